/**
 * Key / value caches for cached decoding, in keras-hub's layout `[batch, 2, maxLength, heads,
 * headDim]` (keys at index 0, values at 1 of axis 1): the projected keys and values of one call
 * written at `cacheUpdateIndex`, or the cache read as it is.
 */
import * as tf from '@tensorflow/tfjs-core';

import type {CallSpec} from './call_spec';

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
  caller: string,
): KeysAndValues {
  const {cache, cacheUpdateIndex: index} = spec;
  if (cache == null) return {keys: projectKeys(), values: projectValues(), cache: null};
  const batch = spec.parts.query.shape[0];
  if (cache.rank !== 5 || cache.shape[1] !== 2 || cache.shape[0] !== batch) {
    throw new Error(
      `${caller}: expected a cache of shape [${batch}, 2, maxLength, heads, headDim], received ` +
        `[${cache.shape.join(', ')}]`,
    );
  }
  const [cachedKeys, cachedValues] = tf.unstack(cache, 1); // [B, S, N, H] each
  if (index == null) return {keys: cachedKeys, values: cachedValues, cache: tf.clone(cache)};
  const newKeys = projectKeys(); // [B, t, N, H]
  const newValues = projectValues(); // [B, t, N, H]
  const [B, S, N, H] = cachedKeys.shape;
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
  const put = (c: tf.Tensor, update: tf.Tensor) =>
    tf.concat(
      [
        tf.slice(c, [0, 0, 0, 0], [B, index, N, H]),
        update,
        tf.slice(c, [0, index + t, 0, 0], [B, S - index - t, N, H]),
      ],
      1,
    ); // [B, S, N, H]
  const keys = put(cachedKeys, newKeys);
  const values = put(cachedValues, newValues);
  return {keys, values, cache: tf.stack([keys, values], 1)}; // [B, 2, S, N, H]
}
