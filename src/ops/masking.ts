import * as tf from '@tensorflow/tfjs-core';

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
 * Lower-triangular causal mask: query `i` may attend to key `j` iff `j <= i + offset` (top-left
 * aligned when the query and key lengths differ, as in Keras; `offset` is the position of the
 * first query in cached decoding).
 *
 * @returns bool tensor of shape `[queries, keys]`.
 */
export function causalMask(queries: number, keys: number, offset = 0): tf.Tensor2D {
  // built in JS: a broadcast comparison of two ranges costs ~400 ms at 2048 x 2048 on tfjs' cpu
  const values = new Uint8Array(queries * keys);
  for (let i = 0; i < queries; i++) {
    values.fill(1, i * keys, i * keys + Math.max(0, Math.min(keys, i + offset + 1)));
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
 * Throws unless every length is a whole number >= 0 (lengths are read back: they are small).
 * Negative or NaN lengths would otherwise act as 0 and fractional ones as their ceiling.
 *
 * Not on webgpu: its synchronous read of a tensor on the GPU goes through WebGPU canvases, which
 * can return wrong values and lose the device (headless Chromium with SwiftShader), so the values
 * are not read there; only the dtype is checked.
 */
export function checkLengths(validLens: tf.Tensor, caller: string): void {
  if (validLens.dtype !== 'int32' && validLens.dtype !== 'float32') {
    throw new Error(`${caller}: expected validLens of dtype int32, received ${validLens.dtype}`);
  }
  if (tf.getBackend() === 'webgpu') return;
  const values = validLens.dataSync();
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!(Number.isInteger(v) && v >= 0)) {
      throw new Error(
        `${caller}: expected validLens to hold whole numbers >= 0, received ${v} at flat index ${i} ` +
          `of validLens ${describeShape(validLens)}`,
      );
    }
  }
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
  checkLengths(validLens, caller);
  return tf.tidy(() => {
    const mask = lengthsMask(validLens, keys); // [batch, keys] or [batch, queries, keys]
    const shape =
      validLens.rank === 1
        ? [batch, ...new Array(rank - 2).fill(1), keys]
        : [batch, ...new Array(rank - 3).fill(1), perQuery, keys];
    return tf.reshape(mask, shape);
  });
}

/**
 * The sliding-window mask of Keras 3.15's local attention: query `i` may attend to key `j` iff
 * `|i - j| < window` (AND it with {@link causalMask} for causal local attention); query `r` is at
 * position `i = r + offset`.
 *
 * @returns bool tensor of shape `[queries, keys]`.
 */
export function slidingWindowMask(
  queries: number,
  keys: number,
  window: number,
  offset = 0,
): tf.Tensor2D {
  const values = new Uint8Array(queries * keys);
  for (let r = 0; r < queries; r++) {
    const i = r + offset; // the query's position (cached decoding: after `offset` cached ones)
    for (let j = Math.max(0, i - window + 1); j < Math.min(keys, i + window); j++) {
      values[r * keys + j] = 1;
    }
  }
  return tf.tensor2d(values, [queries, keys], 'bool'); // [queries, keys]
}

/** A `[queries, keys]` mask (causal, sliding window) in the scores' rank: `[1, ..., 1, T, S]`. */
export function trailingMask(mask: tf.Tensor, scoresRank: number): tf.Tensor {
  return tf.reshape(mask, [...new Array(scoresRank - mask.rank).fill(1), ...mask.shape]);
}

/** A key-padding mask `[batch, ..., keys]` (a Keras mask of the value / key) as `[batch, ..., 1, keys]`. */
export function keyPaddingMask(mask: tf.Tensor): tf.Tensor {
  return tf.expandDims(mask, -2);
}

/** A query-padding mask `[batch, ..., queries]` (the query's Keras mask) as `[batch, ..., queries, 1]`. */
export function queryPaddingMask(mask: tf.Tensor): tf.Tensor {
  return tf.expandDims(mask, -1);
}

/**
 * Expands a mask of lower rank to the scores' rank, as Keras does.
 *
 * @param headsAxis where Keras' MultiHeadAttention inserts the missing axes, counted from the end
 *   (`-2 * numAttentionAxes - 1`: the heads axis); null inserts leading axes (Keras `Attention`).
 */
export function expandMask(mask: tf.Tensor, rank: number, headsAxis: number | null): tf.Tensor {
  let x = mask;
  while (x.rank < rank) {
    x = tf.expandDims(x, headsAxis != null && x.rank + 1 + headsAxis >= 0 ? headsAxis : 0);
  }
  return x;
}

/** Throws unless `mask` broadcasts to `scoresShape`, naming `what` and both shapes. */
export function checkMaskBroadcasts(
  mask: tf.Tensor,
  scoresShape: number[],
  what: string,
  caller: string,
): tf.Tensor {
  const offset = scoresShape.length - mask.rank;
  const ok = offset >= 0 && mask.shape.every((d, i) => d === 1 || d === scoresShape[offset + i]);
  if (!ok) {
    throw new Error(
      `${caller}: ${what} of shape ${describeShape(mask)} does not broadcast to the attention ` +
        `scores [${scoresShape.join(', ')}]`,
    );
  }
  return mask;
}
