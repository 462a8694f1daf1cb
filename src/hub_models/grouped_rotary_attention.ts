/**
 * The eager parts keras-hub's rotary attentions share (Llama 3 and, through it, Mistral and
 * SmolLM3; Qwen 2.5 and Qwen 3), as pure functions apart from the layers: the key / value cache
 * update and grouped-query attention over the heads as keras-hub computes it (scores scaled by
 * 1 / sqrt(headDim), masked keys filled with -1e9 before the softmax).
 */
import * as tf from '@tensorflow/tfjs-core';

import {reshapeTo} from '../ops/reshape';

/**
 * keras-hub's cache update: `kNew` / `vNew` `[B, T, Nkv, H]` written at positions
 * `start .. start + T - 1` of `cache [B, 2, S, Nkv, H]`; the whole keys and values and the new
 * cache. `layer` names the layer in the error of positions past the cache.
 */
export function updateKeyValueCache(
  cache: tf.Tensor,
  kNew: tf.Tensor,
  vNew: tf.Tensor,
  start: number,
  layer: string,
): {k: tf.Tensor; v: tf.Tensor; cache: tf.Tensor} {
  const [B, T] = kNew.shape as number[];
  const S = cache.shape[2] as number;
  if (start + T > S) {
    throw new Error(
      `Layer '${layer}': positions ${start}..${start + T - 1} do not fit a cache of ` +
        `${S} positions`,
    );
  }
  const [kc, vc] = tf.unstack(cache, 1);
  const put = (old: tf.Tensor, update: tf.Tensor) =>
    tf.concat(
      [
        tf.slice(old, [0, 0, 0, 0], [B, start, -1, -1]),
        update,
        tf.slice(old, [0, start + T, 0, 0], [B, S - start - T, -1, -1]),
      ],
      1,
    );
  const [k, v] = [put(kc, kNew), put(vc, vNew)];
  return {k, v, cache: tf.stack([k, v], 1)};
}

/**
 * Grouped-query attention: `q [B, T, Nq, H]` against `k`, `v` `[B, S, Nkv, H]` (query head j
 * reads key / value head floor(j / (Nq / Nkv)), as keras' `ops.repeat` on the head axis gives it,
 * without copying keys), `keep [B, T, S]` bool (null: every key); `[B, T, Nq, H]`.
 * `zeroMasked`: the weights of masked keys zeroed after the softmax (Keras 3.15's `Softmax`
 * layer, which Llama's attention calls: a query whose keys are all masked attends to nothing);
 * else a plain softmax over the -1e9 fill (Qwen's).
 */
export function groupedQueryAttention(
  q: tf.Tensor,
  k: tf.Tensor,
  v: tf.Tensor,
  keep: tf.Tensor | null,
  zeroMasked: boolean,
): tf.Tensor {
  const [B, T, Nq, H] = q.shape as number[];
  const [S, Nkv] = [k.shape[1] as number, k.shape[2] as number];
  const G = Nq / Nkv;
  const qg = reshapeTo(tf.transpose(reshapeTo(q, [B, T, Nkv, G, H]), [0, 2, 3, 1, 4]), [
    B,
    Nkv,
    G * T,
    H,
  ]);
  const kh = tf.transpose(k, [0, 2, 3, 1]); // [B, Nkv, H, S]
  const vh = tf.transpose(v, [0, 2, 1, 3]); // [B, Nkv, S, H]
  // scores [B, Nq, T, S] (query heads kv-major, as Keras orders them)
  let scores = reshapeTo(tf.mul(tf.matMul(qg, kh), 1 / Math.sqrt(H)), [B, Nq, T, S]);
  const keep4 = keep == null ? null : tf.expandDims(keep, 1); // [B, 1, T, S]
  if (keep4 != null) scores = tf.where(keep4, scores, tf.fill(scores.shape, -1e9));
  let weights = tf.softmax(scores);
  if (keep4 != null && zeroMasked) weights = tf.where(keep4, weights, tf.zerosLike(weights));
  const probs = reshapeTo(weights, [B, Nkv, G * T, S]);
  return tf.transpose(reshapeTo(tf.matMul(probs, vh), [B, Nq, T, H]), [0, 2, 1, 3]);
}
