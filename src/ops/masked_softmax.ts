/**
 * d2l's `masked_softmax` and `sequence_mask`: masked positions are replaced (not added to), so
 * masked weights are exactly 0 and a row with no valid key is uniform, never NaN.
 */
import * as tf from '@tensorflow/tfjs-core';

import {softmaxWithFill} from '../kernels/fused_softmax';
import {lengthsMask, maskFill, validLensMask} from './masking';

function describeShape(t: tf.Tensor): string {
  return `[${t.shape.join(', ')}]`;
}

function asTensor(value: unknown, what: string, caller: string): tf.Tensor {
  if (!(value instanceof tf.Tensor)) {
    throw new Error(
      `${caller}: expected ${what} to be a tf.Tensor, received ${value === null ? 'null' : typeof value}`,
    );
  }
  return value;
}

/**
 * d2l's `sequence_mask`: sets the positions at or beyond each sequence's valid length to `value`.
 *
 * `validLens` has shape `x.shape[0:r]` (r >= 1); positions are counted along axis `r` of `x`, and
 * any axes after it are masked together. With `x` of shape `[batch, steps, ...]` and `validLens`
 * of shape `[batch]` this is exactly the reference; with `x` `[batch, queries, keys]` and
 * `validLens` `[batch, queries]` it masks keys per query.
 *
 * ```js
 * sequenceMask(tf.tensor2d([[1, 2, 3], [4, 5, 6]]), tf.tensor1d([1, 2], 'int32'));
 * // [[1, 0, 0], [4, 5, 0]]
 * ```
 */
export function sequenceMask(x: tf.Tensor, validLens: tf.Tensor, value = 0): tf.Tensor {
  asTensor(x, 'x', 'sequenceMask');
  asTensor(validLens, 'validLens', 'sequenceMask');
  const r = validLens.rank;
  if (r < 1 || r >= x.rank) {
    throw new Error(
      `sequenceMask: expected validLens of rank 1 to ${x.rank - 1} for x of shape ` +
        `${describeShape(x)}, received validLens of shape ${describeShape(validLens)}`,
    );
  }
  const prefix = x.shape.slice(0, r);
  if (!prefix.every((d, i) => d === validLens.shape[i])) {
    throw new Error(
      `sequenceMask: expected validLens of shape [${prefix.join(', ')}] (the leading axes of x, ` +
        `shape ${describeShape(x)}), received ${describeShape(validLens)}`,
    );
  }
  if (typeof value !== 'number') {
    throw new Error(`sequenceMask: expected value to be a number, received ${typeof value}`);
  }
  return tf.tidy(() => {
    const mask = lengthsMask(validLens, x.shape[r]); // [...prefix, steps]
    const trailing = x.rank - r - 1;
    const full =
      trailing > 0 ? tf.reshape(mask, [...mask.shape, ...new Array(trailing).fill(1)]) : mask;
    return tf.where(full, x, tf.scalar(value, x.dtype));
  });
}

/**
 * d2l's `masked_softmax`: softmax over the last axis with the keys at or beyond the valid length
 * excluded.
 *
 * - `validLens` of shape `[batch]` (or `[batch, 1]`, the form a model input takes): one length
 *   per sequence, shared by every query (and head).
 * - `validLens` of shape `[batch, queries]` (queries = `scores.shape[rank - 2]`): one per query.
 * - no `validLens`: a plain softmax.
 *
 * Masked weights are exactly 0; a length of 0 gives uniform weights, never NaN.
 *
 * @param scores logits of rank >= 2, `[batch, ..., queries, keys]`.
 */
export function maskedSoftmax(scores: tf.Tensor, validLens?: tf.Tensor | null): tf.Tensor {
  asTensor(scores, 'scores', 'maskedSoftmax');
  if (scores.rank < 2) {
    throw new Error(
      `maskedSoftmax: expected scores of rank >= 2 ([batch, ..., keys]), received shape ` +
        describeShape(scores),
    );
  }
  if (validLens == null) {
    return tf.softmax(scores);
  }
  asTensor(validLens, 'validLens', 'maskedSoftmax');
  return tf.tidy(() => {
    const mask = validLensMask(validLens, scores.shape, 'maskedSoftmax');
    return softmaxWithFill(scores, maskFill(mask, scores.rank));
  });
}
