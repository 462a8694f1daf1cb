/**
 * keras-hub's `CausalLM` loss, as `fit` computes it: Keras' `SparseCategoricalCrossentropy(
 * from_logits=True)` per position, weighted by the shifted padding mask (the preprocessor's
 * `sample_weight`), reduced `sum_over_batch_size`: the weighted sum divided by batch × length,
 * not by the count of real tokens.
 */
import * as tf from '@tensorflow/tfjs-core';

/**
 * The loss of `logits` `[batch, length, vocab]` against the next ids `y` `[batch, length]`
 * (int32), each position weighted by `sampleWeight` `[batch, length]`: a scalar.
 */
export function causalLmLoss(logits: tf.Tensor, y: tf.Tensor, sampleWeight: tf.Tensor): tf.Scalar {
  if (logits.rank !== 3) {
    throw new Error(
      `causalLmLoss: expected logits [batch, length, vocab], received [${logits.shape}]`,
    );
  }
  const [batch, length, vocab] = logits.shape as [number, number, number];
  for (const [name, t] of [
    ['y', y],
    ['sampleWeight', sampleWeight],
  ] as const) {
    if (t.shape.join() !== [batch, length].join()) {
      throw new Error(
        `causalLmLoss: expected ${name} [${batch}, ${length}] (the logits' batch and length), ` +
          `received [${t.shape}]`,
      );
    }
  }
  return tf.tidy(() => {
    const count = batch * length;
    const ids = tf.reshape(tf.cast(y, 'int32'), [count]);
    const weights = tf.reshape(tf.cast(sampleWeight, 'float32'), [count, 1]);
    // loss and its gradient as one op: d loss / d logits = (softmax - onehot(y)) · w / count
    // (tfjs' gather gradient needs UnsortedSegmentSum, which tfjs-wasm lacks)
    const lossOf = tf.customGrad(((x: tf.Tensor, save: tf.GradSaveFunc) => {
      const rows = tf.reshape(x, [count, vocab]);
      const logProbs = tf.logSoftmax(rows); // [count, vocab]
      const hot = tf.oneHot(ids, vocab); // [count, vocab]
      const perToken = tf.neg(tf.sum(tf.mul(logProbs, hot), 1, true)); // [count, 1]
      save([logProbs, hot, weights]);
      return {
        value: tf.div(tf.sum(tf.mul(perToken, weights)), count),
        gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
          const [lp, oh, w] = saved;
          const d = tf.mul(tf.sub(tf.exp(lp), oh), tf.div(tf.mul(w, dy), count));
          return [tf.reshape(d, x.shape)];
        },
      };
    }) as unknown as Parameters<typeof tf.customGrad>[0]);
    return lossOf(logits) as tf.Scalar;
  });
}
