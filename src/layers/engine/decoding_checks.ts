/**
 * The node checks of cached decoding that the package's layer classes declare in their
 * contracts (contract.ts): causal self-attention with a key / value cache, equations that keep
 * the sequence axis, position layers along the sequence axis. Each returns the reason a call of
 * the layer cannot run on new positions alone, or null.
 */
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {parseEquation} from '../../ops/einsum_equation';
import type {CachedDecoding, GraphNode, NodeCheck} from './contract';

const rankOf = (node: GraphNode) => node.inputTensors[0].rank;

/** Why an attention layer's call is not causal self-attention over `[batch, T, features]`. */
export const refuseSelfAttention: NodeCheck = (config, node) => {
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
  if (rankOf(node) !== 3) {
    return `its input has rank ${rankOf(node)}, not [batch, T, features]`;
  }
  return null;
};

/** The call options of an attention layer's cached call (a key mask as its attention mask). */
export const attentionCacheKwargs = (cache: unknown, index: number, keyMask: unknown): Kwargs => ({
  cache,
  cacheUpdateIndex: index,
  ...(keyMask != null ? {attentionMask: keyMask} : {}),
});

/**
 * The cached decoding of a multi-head attention layer whose cache holds `heads(config)` key /
 * value heads of `headDim(config)` values.
 */
export function multiHeadDecoding(
  heads: (config: Record<string, unknown>) => number,
  headDim: (config: Record<string, unknown>) => number,
  refuse: NodeCheck = refuseSelfAttention,
  readsKerasMasks = true,
): CachedDecoding {
  return {
    kind: 'cached',
    refuse,
    cacheShape: (config, _input, batch, maxLength) => [
      batch,
      2,
      maxLength,
      heads(config),
      headDim(config),
    ],
    cacheKwargs: attentionCacheKwargs,
    readsKerasMasks,
    paddingMaskRole: null,
  };
}

/** An EinsumDense call keeps the batch and sequence axes when they pass from input to output. */
export const einsumKeepsSequence: NodeCheck = (config, node) => {
  const refusal = `its equation '${config.equation}' does not keep the sequence axis`;
  let terms;
  try {
    terms = parseEquation(String(config.equation).replace(/\s/g, ''));
  } catch {
    return refusal;
  }
  const {inputs, output} = terms;
  if (inputs.length !== 2 || output == null || inputs[1].ellipsisAt !== -1) return refusal;
  const [x, w, z] = [inputs[0].letters, inputs[1].letters, output.letters];
  if (inputs[0].ellipsisAt === 0 && output.ellipsisAt === 0) {
    // the ellipsis covers the leading axes: batch and sequence when it stands for two or more
    return rankOf(node) - x.length >= 2 ? null : refusal;
  }
  if (inputs[0].ellipsisAt !== -1 || output.ellipsisAt !== -1) return refusal;
  const [b, s] = [x[0], x[1]];
  const bias = String(config.biasAxes ?? '');
  const ok =
    x.length >= 2 &&
    z[0] === b &&
    z[1] === s &&
    !w.includes(b) &&
    !w.includes(s) &&
    !bias.includes(s);
  return ok ? null : refusal;
};

/** Positions along the second-to-last axis of a `[batch, T, features]` input. */
export const positionsOfSequence: NodeCheck = (_c, node) =>
  rankOf(node) === 3
    ? null
    : `its positions are not the sequence axis of a rank-${rankOf(node)} input`;

/** Ids `[batch, T]`. */
export const idsInput: NodeCheck = (_c, node) =>
  rankOf(node) === 2 ? null : `its input has rank ${rankOf(node)}, not ids [batch, T]`;

/** Works on every position alone, whatever the call. */
export const alwaysPositionWise: NodeCheck = () => null;
