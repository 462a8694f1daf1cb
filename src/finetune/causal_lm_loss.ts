/**
 * keras-hub's `CausalLM` loss, as `fit` computes it: Keras' `SparseCategoricalCrossentropy(
 * from_logits=True)` per position, weighted by the shifted padding mask (the preprocessor's
 * `sample_weight`), reduced `sum_over_batch_size`: the weighted sum divided by batch × length,
 * not by the count of real tokens.
 */
import * as tf from '@tensorflow/tfjs-core';

import {weightProduct} from '../kernels/matmul';

/** Refuses `y` or `sampleWeight` not `[batch, length]` (`whose`: where those sizes come from). */
function checkTargets(
  fn: string,
  whose: string,
  batch: number,
  length: number,
  y: tf.Tensor,
  sampleWeight: tf.Tensor,
): void {
  for (const [name, t] of [
    ['y', y],
    ['sampleWeight', sampleWeight],
  ] as const) {
    if (t.shape.join() !== [batch, length].join()) {
      throw new Error(
        `${fn}: expected ${name} [${batch}, ${length}] (${whose} batch and length), ` +
          `received [${t.shape}]`,
      );
    }
  }
}

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
  checkTargets('causalLmLoss', "the logits'", batch, length, y, sampleWeight);
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

/**
 * A frozen float head `logits = cap(h · table)` as {@link headLoss} takes it: `table` is the
 * tied token embedding `[vocab, width]` (`transposed`: logits are `h · tableᵀ`) or an untied
 * `[width, vocab]` reverse table; `softCap` (keras-hub's `logit_soft_cap`) makes the logits
 * `tanh(z / cap) · cap`, null none.
 */
export interface FrozenHead {
  table: tf.Tensor2D;
  transposed: boolean;
  softCap: number | null;
}

/**
 * The rows per chunk of {@link headLoss}: logits of about 32 MiB (8M float32 values) at a time
 * (166 rows of GPT-2's 50,257). A chunk holds a few such tensors at once (the logits, their
 * log-softmax, the one-hot targets, the gradient), and every chunk reads the whole table twice:
 * at GPT-2 small's batch of 4 x 128, chunks of 41 rows made the step 6-12% slower than one chunk.
 */
export function defaultChunkRows(vocab: number): number {
  return Math.max(1, Math.floor(2 ** 23 / vocab));
}

/**
 * {@link causalLmLoss} of the logits a frozen head makes of the final hidden states `hidden`
 * `[batch, length, width]`, and its gradient with respect to `hidden`, without the whole logits:
 * `chunkRows` positions at a time, each chunk's logits, the loss part and
 * `d loss / d logits = (softmax - onehot(y)) · w / count` are made and dropped, and only
 * `d loss / d h = d logits · tableᵀ` `[chunk, width]` is kept. The loss and `d loss / d hidden`
 * are computed in the forward pass (the head's logits are never made twice); the table gets no
 * gradient (it is frozen: for a trainable head take {@link causalLmLoss} of the head's logits).
 */
export function headLoss(
  hidden: tf.Tensor,
  head: FrozenHead,
  y: tf.Tensor,
  sampleWeight: tf.Tensor,
  chunkRows?: number,
): tf.Scalar {
  if (hidden.rank !== 3) {
    throw new Error(`headLoss: expected hidden [batch, length, width], received [${hidden.shape}]`);
  }
  const [batch, length, width] = hidden.shape as [number, number, number];
  const [t0, t1] = head.table.shape;
  const [tableWidth, vocab] = head.transposed ? [t1, t0] : [t0, t1];
  if (head.table.rank !== 2 || tableWidth !== width) {
    throw new Error(
      `headLoss: expected a table ${head.transposed ? `[vocab, ${width}]` : `[${width}, vocab]`} ` +
        `(the hidden states' width), received [${head.table.shape}]`,
    );
  }
  checkTargets('headLoss', "the hidden states'", batch, length, y, sampleWeight);
  const count = batch * length;
  const rowsPerChunk = chunkRows ?? defaultChunkRows(vocab);
  if (!Number.isInteger(rowsPerChunk) || rowsPerChunk < 1) {
    throw new Error(`headLoss: chunkRows must be a positive integer, received ${chunkRows}`);
  }
  return tf.tidy(() => {
    const ids = tf.reshape(tf.cast(y, 'int32'), [count]);
    const weights = tf.reshape(tf.cast(sampleWeight, 'float32'), [count, 1]);
    const lossOf = tf.customGrad(((h: tf.Tensor, save: tf.GradSaveFunc) => {
      const rows = tf.reshape(h, [count, width]);
      const sums: tf.Tensor[] = [];
      const dRows: tf.Tensor[] = [];
      for (let start = 0; start < count; start += rowsPerChunk) {
        const size = Math.min(rowsPerChunk, count - start);
        const [sum, dRow] = tf.tidy(() => {
          const x = tf.slice(rows, [start, 0], [size, width]);
          const idsC = tf.slice(ids, [start], [size]);
          const wC = tf.slice(weights, [start, 0], [size, 1]);
          const z = weightProduct(x, head.table, head.transposed); // [size, vocab]
          const capped = head.softCap == null ? null : tf.tanh(tf.div(z, head.softCap));
          const logits = capped == null ? z : tf.mul(capped, head.softCap as number);
          const logProbs = tf.logSoftmax(logits);
          const hot = tf.oneHot(idsC, vocab);
          const perToken = tf.neg(tf.sum(tf.mul(logProbs, hot), 1, true)); // [size, 1]
          let d = tf.mul(tf.sub(tf.exp(logProbs), hot), tf.div(wC, count)); // d loss / d logits
          if (capped != null) d = tf.mul(d, tf.sub(1, tf.square(capped))); // d logits / d z
          return [tf.sum(tf.mul(perToken, wC)), weightProduct(d, head.table, !head.transposed)];
        });
        sums.push(sum);
        dRows.push(dRow);
      }
      const dHidden = tf.reshape(dRows.length === 1 ? dRows[0] : tf.concat(dRows, 0), h.shape);
      save([dHidden]);
      return {
        value: tf.div(tf.addN(sums), count),
        gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => [tf.mul(saved[0], dy)],
      };
    }) as unknown as Parameters<typeof tf.customGrad>[0]);
    return lossOf(hidden) as tf.Scalar;
  });
}
