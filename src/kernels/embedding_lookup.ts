/**
 * Embedding lookup that trains on every backend: rows of `table` gathered by integer ids, with a
 * one-hot product as the gradient instead of tfjs' gather gradient, whose UnsortedSegmentSum
 * kernel the wasm backend lacks.
 */
import * as tf from '@tensorflow/tfjs-core';

/** `table [vocab, dim]`, `ids` int32 of any shape -> `[...ids.shape, dim]`. */
export function embeddingLookup(table: tf.Tensor, ids: tf.Tensor): tf.Tensor {
  return tf.tidy(() => {
    const vocab = table.shape[0];
    const flat = tf.reshape(tf.cast(ids, 'int32'), [-1]); // [n]
    const lookup = tf.customGrad(((t: tf.Tensor, idx: tf.Tensor, save: tf.GradSaveFunc) => {
      save([idx]);
      return {
        value: tf.gather(t, idx), // [n, dim]
        gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => [
          tf.matMul(tf.transpose(tf.oneHot(saved[0], vocab)), dy), // [vocab, dim]
          tf.zerosLike(saved[0]),
        ],
      };
    }) as unknown as Parameters<typeof tf.customGrad>[0]);
    return tf.reshape(lookup(table, flat), [...ids.shape, table.shape[1] as number]); // [...ids, dim]
  });
}
