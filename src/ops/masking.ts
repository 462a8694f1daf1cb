import * as tf from '@tensorflow/tfjs-core';

import {softmaxWithFill} from './fused_softmax';

/**
 * Masks as pure functions, apart from the layers that use them.
 *
 * Convention everywhere: a boolean mask is `true` where attention is allowed. Masks are
 * broadcastable rather than full-size, and are combined with `logicalAnd`.
 */

/**
 * The value given to masked logits before the softmax. `-1e9` (as Keras does for float32) swamps
 * any logit, so masked weights are exactly 0 and a fully masked row is uniform. On backends that
 * compute in half precision (webgl without float32 render targets) `-1e9` overflows to `-inf` and
 * turns a fully masked row into NaN; there `-3e4` is used, as Keras does for float16.
 */
export function maskFillValue(): number {
  // tfjs' webgl floatPrecision() says 16 even with float32 textures, so read the flag there.
  const halfFloat =
    tf.getBackend() === 'webgl'
      ? !tf.env().getBool('WEBGL_RENDER_FLOAT32_ENABLED')
      : tf.backend().floatPrecision() === 16;
  return halfFloat ? -3e4 : -1e9;
}

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
 * The boolean mask of positions `< validLens` along an axis of length `length`.
 *
 * @param validLens lengths of any shape `S` (int32 or float32; fractional lengths round up).
 * @returns bool tensor of shape `[...S, length]`.
 */
export function lengthsMask(validLens: tf.Tensor, length: number): tf.Tensor {
  return tf.tidy(() => {
    const positions = tf.range(0, length, 1, 'float32'); // [length]
    return tf.less(positions, tf.expandDims(tf.cast(validLens, 'float32'), -1)); // [...S, length]
  });
}

/**
 * Lower-triangular causal mask: query `i` may attend to key `j` iff `j <= i` (top-left aligned
 * when the query and key lengths differ, as in Keras).
 *
 * @returns bool tensor of shape `[queries, keys]`.
 */
export function causalMask(queries: number, keys: number): tf.Tensor2D {
  // built in JS: a broadcast comparison of two ranges costs ~400 ms at 2048 x 2048 on tfjs' cpu
  const values = new Uint8Array(queries * keys);
  for (let i = 0; i < queries; i++) {
    values.fill(1, i * keys, i * keys + Math.min(keys, i + 1));
  }
  return tf.tensor2d(values, [queries, keys], 'bool'); // [queries, keys]
}

/** ANDs the given masks (nulls are skipped); returns null when there is none. */
export function combineMasks(...masks: Array<tf.Tensor | null | undefined>): tf.Tensor | null {
  const present = masks.filter((m): m is tf.Tensor => m != null);
  if (present.length === 0) {
    return null;
  }
  return tf.tidy(() => {
    let acc = present[0].dtype === 'bool' ? present[0] : tf.cast(present[0], 'bool');
    for (const m of present.slice(1)) {
      acc = tf.logicalAnd(acc, m.dtype === 'bool' ? m : tf.cast(m, 'bool'));
    }
    return acc === present[0] ? tf.clone(acc) : acc;
  });
}

/**
 * Softmax over the last `numAxes` axes of `logits`, with masked positions excluded.
 *
 * Masked logits are replaced by {@link maskFillValue} before the softmax, so masked weights are
 * exactly 0 wherever some position of the row is allowed, and a fully masked row comes out uniform
 * (never NaN), as in Keras and the d2l reference.
 *
 * @param logits scores of any rank.
 * @param mask null, or a bool (or 0/1) tensor broadcastable to `logits`; true = keep.
 * @param numAxes how many trailing axes the softmax normalises over (default 1).
 */
export function softmaxWithMask(logits: tf.Tensor, mask: tf.Tensor | null, numAxes = 1): tf.Tensor {
  return tf.tidy(() => {
    if (numAxes === 1) {
      return softmaxWithFill(logits, mask == null ? null : maskFill(mask, logits.rank));
    }
    let x = logits;
    if (mask != null) {
      const keep = mask.dtype === 'bool' ? mask : tf.cast(mask, 'bool');
      x = tf.where(keep, x, tf.scalar(maskFillValue(), x.dtype));
    }
    const shape = x.shape;
    const lead = shape.slice(0, shape.length - numAxes);
    const flat = tf.reshape(x, [...lead, -1]); // [..., prod(normalised axes)]
    return tf.reshape(tf.softmax(flat), shape);
  });
}

/**
 * A mask as the fill tensor of {@link softmaxWithFill}: 0 where allowed, {@link maskFillValue}
 * where masked, with the given rank (leading axes of size 1 added). It has the mask's (small,
 * broadcast) shape, so building it costs nothing next to the logits.
 */
export function maskFill(mask: tf.Tensor, rank: number): tf.Tensor {
  return tf.tidy(() => {
    let m = mask;
    while (m.rank < rank) m = tf.expandDims(m, 0);
    // (1 - mask) * fill rather than where(mask, 0, fill): where tiles its scalars to full size
    const masked = tf.sub(tf.scalar(1), tf.cast(m, 'float32'));
    return tf.mul(masked, tf.scalar(maskFillValue()));
  });
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
    return softmaxWithMask(scores, mask);
  });
}

/**
 * The mask for valid lengths against scores of shape `[batch, ..., queries, keys]`, broadcastable
 * to those scores.
 *
 * @param validLens `[batch]` or `[batch, queries]`.
 * @param caller named in error messages.
 */
export function validLensMask(
  validLens: tf.Tensor,
  scoresShape: number[],
  caller: string,
): tf.Tensor {
  const rank = scoresShape.length;
  const batch = scoresShape[0];
  const keys = scoresShape[rank - 1];
  const queries = scoresShape[rank - 2];
  const perQuery = validLens.rank === 2 ? validLens.shape[1] : 0;
  const ok =
    (validLens.rank === 1 && validLens.shape[0] === batch) ||
    (validLens.rank === 2 &&
      rank >= 3 &&
      validLens.shape[0] === batch &&
      (perQuery === queries || perQuery === 1));
  if (!ok) {
    throw new Error(
      `${caller}: expected validLens of shape [${batch}] or [${batch}, 1] (one length per ` +
        `sequence) or [${batch}, ${queries}] (one per query) for scores of shape ` +
        `[${scoresShape.join(', ')}], received ${describeShape(validLens)}`,
    );
  }
  return tf.tidy(() => {
    const mask = lengthsMask(validLens, keys); // [batch, keys] or [batch, queries, keys]
    const shape =
      validLens.rank === 1
        ? [batch, ...new Array(rank - 2).fill(1), keys]
        : [batch, ...new Array(rank - 3).fill(1), perQuery, keys];
    return tf.reshape(mask, shape);
  });
}
