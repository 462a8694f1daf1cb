/**
 * How each layer takes part in cached decoding (graph_plan.ts): the package's classes, and any
 * user class that declares a contract, say it on the class (`contract.decoding`, see
 * layers/engine/contract.ts); this file holds the rules of tfjs' own built-in layers only, which
 * cannot carry one. Each check returns the reason a node does not fit, or null. (How a node
 * compiles into the compiled step: step_rules.ts.)
 */
import {contractOf} from '../layers/engine/contract';
import type {DecodingContract, GraphNode, NodeCheck} from '../layers/engine/contract';

export type {GraphLayer, GraphNode} from '../layers/engine/contract';

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

/** tfjs' activations that mix the values of the last axis (the others act on each value). */
const AXIS_ACTIVATIONS = ['softmax', 'logSoftmax', 'log_softmax'];

/** An activation on each value, or a softmax over the last axis (which must be features). */
const activation: NodeCheck = (config, node) =>
  elementwise(config, node) ??
  (AXIS_ACTIVATIONS.includes(String(config.activation))
    ? featureWise(config, node) &&
      `its ${config.activation} acts over the last axis, the sequence axis of a ` +
        `rank-${rankOf(node)} input`
    : null);

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

const positionWise = (check: NodeCheck): DecodingContract => ({kind: 'positionWise', check});

/** tfjs' built-in layers that work on each position alone (when their check passes). */
const BUILT_IN: Record<string, DecodingContract> = {
  // fed [batch * t, features] in a step: on 3-D input tfjs' Dense transposes its kernel per call
  Dense: {kind: 'positionWise', check: featureWise, flattenRows: true},
  LayerNormalization: positionWise(lastAxes('normalized', (c) => c.axis)),
  BatchNormalization: positionWise(lastAxes('normalized', (c) => c.axis)),
  Softmax: positionWise(lastAxes('softmax', (c) => c.axis)),
  Concatenate: positionWise(lastAxes('concatenation', (c) => c.axis)),
  Reshape: positionWise(reshapeFeatures),
  Dropout: positionWise(elementwise),
  SpatialDropout1D: positionWise(elementwise),
  GaussianNoise: positionWise(elementwise),
  GaussianDropout: positionWise(elementwise),
  AlphaDropout: positionWise(elementwise),
  Activation: positionWise(activation),
  ReLU: positionWise(elementwise),
  LeakyReLU: positionWise(elementwise),
  ELU: positionWise(elementwise),
  ThresholdedReLU: positionWise(elementwise),
  Add: positionWise(elementwise),
  Multiply: positionWise(elementwise),
  Average: positionWise(elementwise),
  Maximum: positionWise(elementwise),
  Minimum: positionWise(elementwise),
  Embedding: positionWise(() => null),
};

/** How a layer class decodes: its contract's word, a built-in rule, or null (unknown). */
export function decodingOf(cls: string): DecodingContract | null {
  return contractOf(cls)?.decoding ?? BUILT_IN[cls] ?? null;
}

/** Whether a node's output carries a Keras padding mask. */
export function makesKerasMask(
  cls: string,
  config: Record<string, unknown>,
  node: GraphNode,
): boolean {
  const contract = contractOf(cls);
  if (contract != null) return contract.makesKerasMask(config, node);
  if (cls === 'Masking') return true;
  return cls === 'Embedding' && (config.maskZero === true || config.mask_zero === true);
}

/**
 * Whether a Keras mask passing a node of this class reaches the next layer as Keras would pass
 * it, as far as a cache can follow: only the package's own layers, whose masks are tested
 * against Keras. tfjs-layers 4.22's merge layers return the first input's mask with an extra
 * leading axis (`Merge.computeMask`), and with a LayerNormalization between two attention layers
 * `predict`'s logits at a position were seen to depend on later positions of a 0; a cache cannot
 * follow either.
 */
export function keepsKerasMaskExactly(cls: string): boolean {
  return contractOf(cls) != null;
}
