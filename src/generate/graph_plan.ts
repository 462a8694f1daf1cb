/**
 * Whether a functional causal LM (int32 ids `[batch, T]` -> logits `[batch, T, vocab]`) can be
 * run incrementally, one token at a time, by interpreting its graph: every node is either
 * position-wise (run on the new positions alone), position-aware (run with `startIndex`) or a
 * causal self-attention with a key / value cache (run with the cache and its update index).
 * Anything else gives a reason, and `generate` recomputes the prefix instead.
 */
import {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayersModel} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

/** What this file reads of tfjs' graph nodes (`layer.inboundNodes[i]`). */
export interface GraphNode {
  outboundLayer: GraphLayer;
  inputTensors: SymbolicTensor[];
  outputTensors: SymbolicTensor[];
  callArgs?: Kwargs;
}

/** What this file reads of a tfjs layer. */
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

const POSITION_WISE: Record<string, NodeCheck> = {
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
const POSITION_AWARE: Record<string, NodeCheck> = {
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
function makesKerasMask(cls: string, config: Record<string, unknown>, node: GraphNode): boolean {
  if (cls === 'Masking') return true;
  const forward = cls !== 'ReversibleEmbedding' || node.inputTensors[0].dtype !== 'float32';
  return (config.maskZero === true || config.mask_zero === true) && forward;
}

export type StepKind = 'positionWise' | 'positionAware' | 'cached';

/** One node of the graph and how it runs in a step. */
export interface PlannedNode {
  layer: GraphLayer;
  node: GraphNode;
  kind: StepKind;
  /** The recorded call options, less `mask` and `training` (predict passes neither). */
  kwargs: Kwargs;
  /** For `cached` nodes: the layer's entry of {@link CACHE_CAPABLE} and its config. */
  cache?: {entry: CacheCapable; config: Record<string, unknown>};
}

/** The nodes from the ids input to the logits, in an order where inputs come first. */
export interface StepPlan {
  input: SymbolicTensor;
  /** A padding mask input, left out of the steps (all ones at the known positions), or null. */
  padding: SymbolicTensor | null;
  output: SymbolicTensor;
  nodes: PlannedNode[];
  /**
   * The ids feed a `maskZero` embedding whose Keras mask reaches attention. Such a model decodes
   * with a cache only while no known token is 0: every key is then kept, as with no mask (the
   * stepper drops the masks); `generate` recomputes once a 0 is among the known tokens.
   */
  masksZeroIds: boolean;
}

export type PlanResult = {plan: StepPlan; reason: null} | {plan: null; reason: string};

function nodeOf(t: SymbolicTensor): GraphNode {
  const layer = t.sourceLayer as unknown as GraphLayer;
  return layer.inboundNodes[t.nodeIndex];
}

function describeLayer(layer: GraphLayer): string {
  return `layer '${layer.name}' (${layer.getClassName()})`;
}

/**
 * Plans the incremental run of `model`, or says why it cannot be run incrementally (then the
 * prefix must be recomputed at each step).
 */
export function planCachedDecoding(model: LayersModel): PlanResult {
  const fail = (reason: string): PlanResult => ({plan: null, reason});
  // a second input is a keras-hub padding mask: generate feeds it all ones at the known
  // positions, so the decoders that read it as their key padding mask run without it
  const second = model.inputs.length === 2 ? model.inputs[1] : null;
  const padding = second != null && second.rank === 2 && second.dtype !== 'float32' ? second : null;
  if (model.inputs.length !== 1 && padding == null) {
    return fail(
      `the model has ${model.inputs.length} inputs; cached decoding needs ids alone, or ids ` +
        'and a padding mask [batch, T]',
    );
  }
  if (model.outputs.length !== 1) {
    return fail(
      `the model has ${model.outputs.length} outputs; cached decoding needs logits alone`,
    );
  }
  const [input] = model.inputs;
  const [output] = model.outputs;
  if (input.rank !== 2 || output.rank !== 3) {
    return fail(
      `the model maps [${input.shape.join(', ')}] to [${output.shape.join(', ')}], not ids ` +
        `[batch, T] to logits [batch, T, vocab]`,
    );
  }
  // depth-first from the logits: a node after the nodes of its inputs
  const order: GraphNode[] = [];
  const seen = new Set<GraphNode>();
  const visit = (t: SymbolicTensor, path: Set<GraphNode>): string | null => {
    if (t === input || t === padding) return null;
    const node = nodeOf(t);
    if (node == null) return `the tensor '${t.name}' has no recorded source`;
    if (seen.has(node)) return null;
    if (path.has(node)) return `the graph has a cycle at ${describeLayer(node.outboundLayer)}`;
    if (node.inputTensors.length === 0) {
      return `the model has another input, '${t.name}' (${describeLayer(node.outboundLayer)})`;
    }
    path.add(node);
    for (const x of node.inputTensors) {
      const r = visit(x, path);
      if (r != null) return r;
    }
    path.delete(node);
    seen.add(node);
    order.push(node);
    return null;
  };
  const cycle = visit(output, new Set());
  if (cycle != null) return fail(cycle);
  const masked = new Set<number>(); // ids of symbolic tensors that carry a Keras mask
  let masksZeroIds = false;
  let zeroMaskOnly = true; // every Keras mask so far comes from a mask_zero embedding of the ids
  const nodes: PlannedNode[] = [];
  for (const node of order) {
    const layer = node.outboundLayer;
    const cls = layer.getClassName();
    const what = describeLayer(layer);
    const config = layer.getConfig();
    const inMasked = node.inputTensors.some((x) => masked.has(x.id));
    if (
      cls === 'TransformerDecoder' &&
      node.inputTensors.length === 2 &&
      node.inputTensors[1].dtype !== 'float32' &&
      node.inputTensors[1] !== padding
    ) {
      return fail(`${what}: it takes a mask that is not the model's padding mask input`);
    }
    if (padding != null && node.inputTensors.includes(padding)) {
      const roles = (config.inputRoles ?? config.input_roles) as string[] | undefined;
      const asKeyPadding =
        cls === 'TransformerDecoder' &&
        node.inputTensors.length === 2 &&
        node.inputTensors[1] === padding &&
        roles?.[1] === 'decoderPaddingMask';
      if (!asKeyPadding) {
        return fail(
          `${what}: it reads the padding mask input other than as a TransformerDecoder's ` +
            'decoderPaddingMask (the only use a cached step can leave out)',
        );
      }
    }
    const kwargs: Kwargs = {...(node.callArgs ?? {})};
    delete kwargs.mask;
    delete kwargs.training;
    let planned: PlannedNode;
    const cached = CACHE_CAPABLE[cls];
    if (cached != null) {
      const why = cached.refuse(config, node);
      if (why != null) return fail(`${what}: ${why}`);
      if (inMasked && cached.readsKerasMasks && !zeroMaskOnly) {
        return fail(
          `${what}: its input carries a Keras mask (from a Masking layer, or a mask_zero ` +
            `embedding not fed by the ids), which it reads as a padding mask; a cache holds no mask`,
        );
      }
      if (inMasked && cached.readsKerasMasks) masksZeroIds = true;
      planned = {layer, node, kind: 'cached', kwargs, cache: {entry: cached, config}};
    } else if (POSITION_AWARE[cls] != null) {
      const why = POSITION_AWARE[cls](config, node);
      if (why != null) return fail(`${what}: ${why}`);
      planned = {layer, node, kind: 'positionAware', kwargs};
    } else if (POSITION_WISE[cls] != null) {
      const why = POSITION_WISE[cls](config, node);
      if (why != null) return fail(`${what}: ${why}`);
      planned = {layer, node, kind: 'positionWise', kwargs};
    } else if ('layers' in layer) {
      return fail(`${what}: a nested model, whose layers a step cannot see into`);
    } else {
      return fail(`${what}: not known to compute each position alone (no cached rule for it)`);
    }
    if (makesKerasMask(cls, config, node)) {
      // a mask_zero embedding of the ids: all true while no known id is 0 (see masksZeroIds)
      const ofIds = cls !== 'Masking' && node.inputTensors[0] === input;
      zeroMaskOnly = zeroMaskOnly && ofIds;
    }
    if (inMasked || makesKerasMask(cls, config, node)) {
      for (const t of node.outputTensors) masked.add(t.id);
    }
    nodes.push(planned);
  }
  return {plan: {input, padding, output, nodes, masksZeroIds}, reason: null};
}

/** Why `model` cannot be decoded with a cache, or null when `generate` can use one. */
export function cachedDecodingRefusal(model: LayersModel): string | null {
  return planCachedDecoding(model).reason;
}
