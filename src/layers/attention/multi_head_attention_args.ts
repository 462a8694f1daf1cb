/** MultiHeadAttention's constructor options and their validation. */
import type {BaseAttentionArgs} from '../engine/base_attention';
import type {ProjectionArgs} from '../core/projection_options';
import type {Shape} from '../engine/shapes';

export interface MultiHeadAttentionArgs extends BaseAttentionArgs, ProjectionArgs {
  /** Number of attention heads. */
  numHeads: number;
  /** Size of each head for query and key. */
  keyDim: number;
  /** Size of each head for value; default `keyDim`. */
  valueDim?: number | null;
  /** Biases in the four projections. Default true. */
  useBias?: boolean;
  /** Output size (or shape) without batch and sequence axes; default the query's last dim. */
  outputShape?: number | number[] | null;
  /** Axes attention runs over (default: every axis between batch and features). */
  attentionAxes?: number | number[] | null;
  /** Keras 3.14 gated attention: `output_dense(attended * sigmoid(gate(query)))`. */
  useGate?: boolean;
  /** Keras 3.15 local attention: only keys with `|i - j| < slidingWindow` (and `j <= i` if causal). */
  slidingWindow?: number | null;
  /** tf-keras' build shapes, kept in the config as tf-keras does (informational here). */
  queryShape?: Shape | null;
  /** tf-keras' build shape of the value (informational, as `queryShape`). */
  valueShape?: Shape | null;
  /** tf-keras' build shape of the key (informational, as `queryShape`). */
  keyShape?: Shape | null;
  /** tf-keras 2.21 option; masking here always replaces logits, so it changes nothing. */
  softmaxRobustMasking?: boolean;
  /**
   * Compute attention in blocks of this many queries, so the scores never exist whole (long
   * sequences). Default: automatic, blocks when the scores of one call would exceed
   * 2^23 elements (32 MiB); 0 turns blocking off. Results are the same either way.
   */
  chunkSize?: number | null;
}

export function intList(value: unknown, name: string): number[] | null {
  if (value == null) {
    return null;
  }
  const list = typeof value === 'number' ? [value] : value;
  if (!Array.isArray(list) || !list.every((d) => Number.isInteger(d))) {
    throw new Error(
      `MultiHeadAttention: invalid ${name}: expected an integer or a list of integers, received ${JSON.stringify(value)}`,
    );
  }
  return [...list];
}
