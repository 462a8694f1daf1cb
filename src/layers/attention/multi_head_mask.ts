/**
 * The multi-head layers' masks for one call, composed from the pure functions of ops/masking.ts:
 * valid lengths, causal, the attention mask, the Keras masks of query / value / key and the
 * sliding window, each expanded as Keras does (missing axes at the heads axis) and ANDed.
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
import type {TensorSpec} from '../engine/base_attention';

/**
 * Every mask of the call, ANDed, in Keras' score layout (`[B, N, T, S]` for 3-D inputs). In
 * cached decoding the queries start at `cacheUpdateIndex`: causal and window masks shift with it.
 */
export function multiHeadAttentionMask(
  spec: TensorSpec,
  scoresShape: number[],
  numAxes: number,
  slidingWindow: number | null,
  layerName: string,
): tf.Tensor | null {
  const rank = scoresShape.length;
  const caller = `Layer '${layerName}'`;
  const {validLens, attentionMask} = spec.parts;
  const keras = (m: tf.Tensor | null, what: string) =>
    m && checkMaskBroadcasts(expandMask(m, rank, -2 * numAxes - 1), scoresShape, what, caller);
  const single = [
    validLens != null && 'validLens',
    spec.useCausalMask && 'useCausalMask',
    slidingWindow != null && 'slidingWindow',
    (spec.queryMask ?? spec.valueMask ?? spec.keyMask) != null && 'a Keras mask',
  ].filter((x): x is string => typeof x === 'string');
  if (numAxes !== 1 && single.length > 0) {
    throw new Error(
      `${caller}: ${single.join(', ')} needs a single attention axis; this layer attends over ${numAxes}`,
    );
  }
  const [T, S] = scoresShape.slice(rank - 2);
  return combineMasks(
    validLens && validLensMask(validLens, scoresShape, caller),
    spec.useCausalMask ? trailingMask(causalMask(T, S, spec.cacheUpdateIndex ?? 0), rank) : null,
    keras(attentionMask, 'attentionMask'),
    keras(spec.valueMask && keyPaddingMask(spec.valueMask), "the value's Keras mask"),
    keras(spec.keyMask && keyPaddingMask(spec.keyMask), "the key's Keras mask"),
    keras(spec.queryMask && queryPaddingMask(spec.queryMask), "the query's Keras mask"),
    slidingWindow != null
      ? trailingMask(slidingWindowMask(T, S, slidingWindow, spec.cacheUpdateIndex ?? 0), rank)
      : null,
  );
}
