/**
 * Key / value caches for cached decoding, in keras-hub's layout `[batch, 2, maxLength, heads,
 * headDim]` (keys at index 0, values at 1 of axis 1): the projected keys and values of one call
 * written at `cacheUpdateIndex`, or the cache read as it is.
 */
import * as tf from '@tensorflow/tfjs-core';

import {splitRows} from '../../ops/attention_core';
import {recordingGradients} from '../../ops/gradient_recording';
import type {CallSpec} from '../engine/call_spec';

export interface KeysAndValues {
  /** `[batch, length, heads, headDim]`: the whole cache's keys when a cache is given. */
  keys: tf.Tensor;
  values: tf.Tensor;
  /** The updated cache, or null without one. */
  cache: tf.Tensor | null;
}

/**
 * The keys and values one call attends to. Without a cache: this call's projections. With a
 * cache and `cacheUpdateIndex`: the cache with this call's projections written at that index.
 * With a cache alone: the cache (key and value inputs unused, as in keras-hub).
 */
export function keysAndValues(
  spec: CallSpec<tf.Tensor>,
  projectKeys: () => tf.Tensor,
  projectValues: () => tf.Tensor,
  expected: {heads: number; headDim: number},
  caller: string,
): KeysAndValues {
  const {cache, cacheUpdateIndex: index} = spec;
  if (cache == null) return {keys: projectKeys(), values: projectValues(), cache: null};
  const batch = spec.parts.query.shape[0];
  const {heads, headDim} = expected;
  if (cache.dtype !== 'float32') {
    throw new Error(
      `${caller}: expected a float32 cache (keys and values), received ${cache.dtype} of shape ` +
        `[${cache.shape.join(', ')}]; cast it with tf.cast(cache, 'float32')`,
    );
  }
  if (
    cache.rank !== 5 ||
    cache.shape[0] !== batch ||
    cache.shape[1] !== 2 ||
    cache.shape[3] !== heads ||
    cache.shape[4] !== headDim
  ) {
    const holds =
      cache.rank === 5
        ? `; the cache holds ${cache.shape[3]} heads of ${cache.shape[4]} features`
        : '';
    throw new Error(
      `${caller}: expected a cache of shape [${batch}, 2, maxLength, heads, headDim] with ` +
        `${heads} key / value heads of ${headDim} features (this layer's), received ` +
        `[${cache.shape.join(', ')}]${holds}`,
    );
  }
  const [B, , S, N, H] = cache.shape;
  const halves = (c: tf.Tensor) =>
    splitRows(tf.reshape(c, [B, 2, S * N * H]), [1, 1]).map((half) =>
      tf.reshape(half, [B, S, N, H]),
    ); // keys, values: [B, S, N, H] each
  if (index == null) {
    const [keys, values] = halves(cache);
    return {keys, values, cache: tf.clone(cache)};
  }
  const newKeys = projectKeys(); // [B, t, N, H]
  const newValues = projectValues(); // [B, t, N, H]
  const t = newKeys.shape[1] as number;
  if (newKeys.shape[2] !== N || newKeys.shape[3] !== H || newValues.shape[3] !== H) {
    throw new Error(
      `${caller}: the cache holds ${N} heads of ${H} features, this call projects keys ` +
        `[${newKeys.shape.join(', ')}] and values [${newValues.shape.join(', ')}]`,
    );
  }
  if (index + t > S) {
    throw new Error(
      `${caller}: cacheUpdateIndex ${index} plus ${t} new positions exceeds the cache's length ${S}`,
    );
  }
  // keys and values written at once: rows [index, index + t) of [B * 2, S, N * H]
  const rows = tf.reshape(cache, [B * 2, S, N * H]);
  const middle = tf.reshape(tf.stack([newKeys, newValues], 1), [B * 2, t, N * H]);
  const updated = tf.reshape(writeRows(rows, middle, index), [B, 2, S, N, H]);
  const [keys, values] = halves(updated);
  return {keys, values, cache: updated}; // [B, 2, S, N, H]
}

/**
 * Rows (updates) of the cache beyond which its rows are written by split and concatenation: webgl's
 * scatter program reads every update for each output element.
 */
const SCATTER_ROWS = 16;

/**
 * `rows` `[R, S, W]` with `middle` `[R, t, W]` written at `[:, index, :]`: a few rows (a decoding
 * step) as one scatter (one program on webgl, against the slices, stack and concatenation of a
 * split), more as split and concatenation; the same values either way. Not while a gradient is
 * recorded: tfjs has no gradient for TensorScatterUpdate (split and concatenation have one).
 */
function writeRows(rows: tf.Tensor, middle: tf.Tensor, index: number): tf.Tensor {
  const [R, S, W] = rows.shape as [number, number, number];
  const t = middle.shape[1] as number;
  if (
    R * t <= SCATTER_ROWS &&
    !recordingGradients() &&
    tf.getKernel('TensorScatterUpdate', tf.getBackend()) != null
  ) {
    const at = new Int32Array(R * t * 2);
    for (let r = 0; r < R; r++) {
      for (let i = 0; i < t; i++) {
        at[(r * t + i) * 2] = r;
        at[(r * t + i) * 2 + 1] = index + i;
      }
    }
    const indices = tf.tensor2d(at, [R * t, 2], 'int32');
    return tf.tensorScatterUpdate(rows, indices, tf.reshape(middle, [R * t, W]));
  }
  const [before, , after] = splitRows(rows, [index, t, S - index - t]);
  return tf.concat([before, middle, after], 1);
}
