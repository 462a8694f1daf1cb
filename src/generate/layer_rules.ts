/**
 * The per-class rules of cached decoding (graph_plan.ts): which layer classes decode with a key /
 * value cache and how (`CACHE_CAPABLE`, one entry per class), which work on each position alone
 * (`POSITION_WISE`), which take `startIndex` (`POSITION_AWARE`), and which make Keras masks.
 * Each check returns the reason a node does not fit, or null.
 */
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

/** What the planner reads of tfjs' graph nodes (`layer.inboundNodes[i]`). */
export interface GraphNode {
  outboundLayer: GraphLayer;
  inputTensors: SymbolicTensor[];
  outputTensors: SymbolicTensor[];
  callArgs?: Kwargs;
}

/** What the planner reads of a tfjs layer. */
export interface GraphLayer {
  name: string;
  inboundNodes: GraphNode[];
  getClassName(): string;
  getConfig(): Record<string, unknown>;
  apply(inputs: unknown, kwargs?: Kwargs): unknown;
}

type Shape = Array<number | null>;

/** A layer class that decodes with a key / value cache in eager calls, returning `[output, cache]`. */
export interface CacheCapable {
  /** Why this call of the layer cannot run with a cache, or null when it can. */
  refuse(config: Record<string, unknown>, node: GraphNode): string | null;
  /** The cache's shape, `[batch, 2, maxLength, heads, headDim]`. */
  cacheShape(
    config: Record<string, unknown>,
    input: Shape,
    batch: number,
    maxLength: number,
  ): number[];
  /** The call options naming the cache and where this call's positions go in it. */
  cacheKwargs(cache: unknown, index: number): Kwargs;
  /** Whether the layer reads the Keras masks of its inputs (padding masks from mask_zero). */
  readsKerasMasks: boolean;
}

/** Why an attention layer's call is not causal self-attention (or null if it is). */
function refuseAttention(config: Record<string, unknown>, node: GraphNode): string | null {
  if (node.inputTensors.length !== 1) {
    return (
      `it is called on ${node.inputTensors.length} inputs (cross-attention, or lengths / an ` +
      `attention mask as inputs); only self-attention on one input runs with a cache`
    );
  }
  if (config.useCausalMask !== true) {
    return 'it is not causal (useCausalMask is off): earlier positions attend to later ones';
  }
  if (config.returnAttentionScores === true) return 'it returns attention scores';
  if (config.inputRoles != null) return 'it has lengths or an attention mask as inputs';
  const axes = config.attentionAxes as number[] | null | undefined;
  if (axes != null && !(axes.length === 1 && (axes[0] === 1 || axes[0] === -2))) {
    return `it attends over the axes [${axes.join(', ')}], not the sequence axis alone`;
  }
  if (node.inputTensors[0].rank !== 3) {
    return `its input has rank ${node.inputTensors[0].rank}, not [batch, T, features]`;
  }
  return null;
}

const ATTENTION_KWARGS = (cache: unknown, index: number): Kwargs => ({
  cache,
  cacheUpdateIndex: index,
});

const MULTI_HEAD: CacheCapable = {
  refuse: (config, node) =>
    refuseAttention(config, node) ??
    (config.keyDim !== config.valueDim
      ? `its keyDim ${config.keyDim} differs from its valueDim ${config.valueDim} (keras-hub's ` +
        `cache layout holds one head size)`
      : null),
  cacheShape: (config, _input, batch, maxLength) => [
    batch,
    2,
    maxLength,
    config.numHeads as number,
    config.keyDim as number,
  ],
  cacheKwargs: ATTENTION_KWARGS,
  readsKerasMasks: true,
};

/**
 * The layer classes that run with a key / value cache, by class name: one line per class.
 */
export const CACHE_CAPABLE: Record<string, CacheCapable> = {
  MultiHeadAttention: MULTI_HEAD,
  // keras-hub's layer ignores the Keras masks of its inputs
  CachedMultiHeadAttention: {...MULTI_HEAD, readsKerasMasks: false},
  GroupQueryAttention: {
    refuse: refuseAttention,
    cacheShape: (config, _input, batch, maxLength) => [
      batch,
      2,
      maxLength,
      config.numKeyValueHeads as number,
      config.headDim as number,
    ],
    cacheKwargs: ATTENTION_KWARGS,
    readsKerasMasks: true,
  },
  // keras-hub's TransformerDecoder used decoder-only: causal self-attention, its cache
  // [batch, 2, maxLength, numHeads, hiddenDim / numHeads], `[output, cache]` returned
  TransformerDecoder: {
    // (a padding mask input besides the sequence is checked by the planner)
    refuse: (config, node) =>
      node.inputTensors.length !== 1 && node.inputTensors[1]?.dtype === 'float32'
        ? `it is called on ${node.inputTensors.length} inputs (an encoder sequence or masks); ` +
          `only the decoder-only use runs with a cache`
        : node.inputTensors.length > 2
          ? `it is called on ${node.inputTensors.length} inputs (masks beyond a padding mask)`
          : config.useCausalMask === false || config.use_causal_mask === false
            ? 'it is not causal'
            : null,
    cacheShape: (config, input, batch, maxLength) => {
      const heads = (config.numHeads ?? config.num_heads) as number;
      return [batch, 2, maxLength, heads, (input[input.length - 1] as number) / heads];
    },
    cacheKwargs: (cache, index) => ({
      selfAttentionCache: cache,
      selfAttentionCacheUpdateIndex: index,
    }),
    readsKerasMasks: true,
  },
};

/** Layers that work on each position alone; each check gives a reason it does not, or null. */
type NodeCheck = (config: Record<string, unknown>, node: GraphNode) => string | null;

const rankOf = (node: GraphNode) => node.inputTensors[0].rank;

/** The last axes (>= 2) only: the batch and sequence axes pass through. */
function lastAxes(what: string, axesOf: (c: Record<string, unknown>) => unknown): NodeCheck {
  return (config, node) => {
    const rank = rankOf(node);
    const raw = axesOf(config) ?? -1;
    const axes = (Array.isArray(raw) ? raw : [raw]) as number[];
    const bad = axes.find((a) => (a < 0 ? rank + a : a) < 2);
    return bad === undefined
      ? null
      : `its ${what} axis ${bad} is the batch or sequence axis of a rank-${rank} input`;
  };
}

/** Over the last axis, which must not be the sequence axis. */
const featureWise: NodeCheck = (_config, node) =>
  rankOf(node) >= 3
    ? null
    : `its input has rank ${rankOf(node)}: its last axis is the sequence axis`;

const elementwise: NodeCheck = (_config, node) => {
  const ranks = node.inputTensors.map((t) => t.rank);
  return ranks.every((r) => r === ranks[0] && r >= 2)
    ? null
    : `its inputs have ranks [${ranks.join(', ')}], not one rank >= 2`;
};

/** EinsumDense keeps the batch and sequence axes when they pass from input to output. */
const einsumKeepsSequence: NodeCheck = (config, node) => {
  const equation = String(config.equation).replace(/\s/g, '');
  const m = /^([a-zA-Z.]+),([a-zA-Z]+)->([a-zA-Z.]+)$/.exec(equation);
  const refusal = `its equation '${config.equation}' does not keep the sequence axis`;
  if (m == null) return refusal;
  const [, x, w, z] = m;
  if (x.startsWith('...') && z.startsWith('...')) {
    // the ellipsis covers the leading axes: batch and sequence when it stands for two or more
    return rankOf(node) - (x.length - 3) >= 2 ? null : refusal;
  }
  const [b, s] = [x[0], x[1]];
  const bias = String(config.biasAxes ?? '');
  const ok =
    /^[a-zA-Z]{2}/.test(x) &&
    z[0] === b &&
    z[1] === s &&
    !w.includes(b) &&
    !w.includes(s) &&
    !bias.includes(s);
  return ok ? null : refusal;
};

/** Reshape of the features only: `[-1 or null, ...known]` with the same feature count. */
const reshapeFeatures: NodeCheck = (config, node) => {
  const target = config.targetShape as Array<number | null>;
  const input = node.inputTensors[0].shape.slice(2);
  const count = (dims: Array<number | null>) =>
    dims.every((d) => d != null && d > 0)
      ? dims.reduce((p, d) => (p as number) * (d as number), 1)
      : NaN;
  return Array.isArray(target) &&
    (target[0] == null || target[0] === -1) &&
    count(target.slice(1)) === count(input)
    ? null
    : `its target shape ${JSON.stringify(target)} does not keep the sequence axis`;
};

export const POSITION_WISE: Record<string, NodeCheck> = {
  Dense: featureWise,
  EinsumDense: einsumKeepsSequence,
  LayerNormalization: lastAxes('normalized', (c) => c.axis),
  BatchNormalization: lastAxes('normalized', (c) => c.axis),
  Softmax: lastAxes('softmax', (c) => c.axis),
  Concatenate: lastAxes('concatenation', (c) => c.axis),
  Reshape: reshapeFeatures,
  Dropout: elementwise,
  SpatialDropout1D: elementwise,
  GaussianNoise: elementwise,
  GaussianDropout: elementwise,
  AlphaDropout: elementwise,
  Activation: elementwise,
  ReLU: elementwise,
  LeakyReLU: elementwise,
  ELU: elementwise,
  ThresholdedReLU: elementwise,
  Add: elementwise,
  Multiply: elementwise,
  Average: elementwise,
  Maximum: elementwise,
  Minimum: elementwise,
  Embedding: () => null,
  ReversibleEmbedding: () => null, // ids -> [..., D] or, reversed, [..., D] -> [..., V]
};

/** Layers whose positions are given by `startIndex`; the check names the sequence axis. */
export const POSITION_AWARE: Record<string, NodeCheck> = {
  TokenAndPositionEmbedding: (_c, node) =>
    rankOf(node) === 2 ? null : `its input has rank ${rankOf(node)}, not ids [batch, T]`,
  // positions along the second-to-last axis
  PositionEmbedding: (_c, node) =>
    rankOf(node) === 3
      ? null
      : `its positions are not the sequence axis of a rank-${rankOf(node)} input`,
  SinePositionEncoding: (_c, node) =>
    rankOf(node) === 3
      ? null
      : `its positions are not the sequence axis of a rank-${rankOf(node)} input`,
  RotaryEmbedding: (c, node) => {
    const a = Number(c.sequenceAxis ?? 1);
    return (a < 0 ? rankOf(node) + a : a) === 1 ? null : `its sequence axis is ${a}, not 1`;
  },
};

/** Layers whose output carries a Keras padding mask. */
export function makesKerasMask(
  cls: string,
  config: Record<string, unknown>,
  node: GraphNode,
): boolean {
  if (cls === 'Masking') return true;
  const forward = cls !== 'ReversibleEmbedding' || node.inputTensors[0].dtype !== 'float32';
  return (config.maskZero === true || config.mask_zero === true) && forward;
}
