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

/**
 * Ids as int32, as Keras' `Embedding` casts them: int32 ids are returned as they are; float ids
 * (Keras models often declare `keras.Input(shape=(None,))`, float32, for token ids) must hold
 * whole numbers and are cast, anything fractional or non-finite is an error naming the first
 * such value and where it is (not on webgpu, whose synchronous reads are unreliable: there they
 * are only cast). Returns `ids` itself or a new tensor (the caller disposes it).
 */
export function idsAsInt32(ids: tf.Tensor, caller: string): tf.Tensor {
  if (ids.dtype === 'int32') return ids;
  if (ids.dtype !== 'float32') {
    throw new Error(
      `${caller}: expected int32 (or whole-number float32) ids, received ${ids.dtype}`,
    );
  }
  // webgpu: not read (its synchronous read can return wrong values; see checkLengths), cast only
  if (tf.getBackend() === 'webgpu') return tf.cast(ids, 'int32');
  const values = ids.dataSync();
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!Number.isInteger(v)) {
      const at = ids.shape.map((_, a) => {
        const stride = ids.shape.slice(a + 1).reduce((p, d) => p * d, 1);
        return Math.floor(i / stride) % ids.shape[a];
      });
      throw new Error(
        `${caller}: expected int32 ids or float32 ids holding whole numbers, received float32 ` +
          `ids with ${v} at [${at.join(', ')}]`,
      );
    }
  }
  return tf.cast(ids, 'int32');
}
