/**
 * The masks of one attention call, composed from the pure functions of ops/masking.ts: valid
 * lengths, causal, the attention mask, the Keras masks of value / key (and query) and the sliding
 * window, each expanded as Keras does and ANDed into one boolean mask in the layer's score layout.
 * Every attention layer composes its masks here.
 */
import * as tf from '@tensorflow/tfjs-core';

import {
  causalMask,
  checkMaskBroadcasts,
  combineMasks,
  expandMask,
  keyPaddingMask,
  queryPaddingMask,
  slidingWindowMask,
  trailingMask,
  validLensMask,
} from '../../ops/masking';
import type {TensorSpec} from './base_attention';

/** How a layer's masks meet its scores. */
export interface CallMaskOptions {
  /** The layer's name (errors name it). */
  layerName: string;
  /**
   * Where a Keras mask of fewer axes gets its missing ones (`expandMask`): the heads axis of a
   * multi-head layer (`-2 * attention axes - 1`), or null for leading axes (Keras' `Attention`).
   */
  missingAxesAt: number | null;
  /** Attention axes (more than one allows no sequence masks); default 1. */
  attentionAxes?: number;
  /** A sliding window of keys before each query, or null. */
  slidingWindow?: number | null;
  /** Whether the query's Keras mask masks score rows here (Keras' `Attention` applies it to the output instead). */
  queryMaskRows: boolean;
}

/**
 * Every mask of the call, ANDed, for scores of shape `scoresShape` (`[B, N, T, S]` for a 3-D
 * multi-head call, `[B, T, S]` for Keras' `Attention`). In cached decoding the queries start at
 * `cacheUpdateIndex`: causal and window masks shift with it.
 */
export function callMask(
  spec: TensorSpec,
  scoresShape: number[],
  options: CallMaskOptions,
): tf.Tensor | null {
  const rank = scoresShape.length;
  const caller = `Layer '${options.layerName}'`;
  const numAxes = options.attentionAxes ?? 1;
  const slidingWindow = options.slidingWindow ?? null;
  const {validLens, attentionMask} = spec.parts;
  const keras = (m: tf.Tensor | null, what: string) =>
    m && checkMaskBroadcasts(expandMask(m, rank, options.missingAxesAt), scoresShape, what, caller);
  const queryMask = options.queryMaskRows ? spec.queryMask : null;
  const single = [
    validLens != null && 'validLens',
    spec.useCausalMask && 'useCausalMask',
    slidingWindow != null && 'slidingWindow',
    (queryMask ?? spec.valueMask ?? spec.keyMask) != null && 'a Keras mask',
  ].filter((x): x is string => typeof x === 'string');
  if (numAxes !== 1 && single.length > 0) {
    throw new Error(
      `${caller}: ${single.join(', ')} needs a single attention axis; this layer attends over ${numAxes}`,
    );
  }
  const [T, S] = scoresShape.slice(rank - 2);
  const start = spec.cacheUpdateIndex ?? 0;
  return combineMasks(
    validLens && validLensMask(validLens, scoresShape, caller),
    spec.useCausalMask ? trailingMask(causalMask(T, S, start), rank) : null,
    keras(attentionMask, 'attentionMask'),
    keras(spec.valueMask && keyPaddingMask(spec.valueMask), "the value's Keras mask"),
    keras(spec.keyMask && keyPaddingMask(spec.keyMask), "the key's Keras mask"),
    keras(queryMask && queryPaddingMask(queryMask), "the query's Keras mask"),
    slidingWindow != null
      ? trailingMask(slidingWindowMask(T, S, slidingWindow, start), rank)
      : null,
  );
}
