/**
 * keras-hub's CausalLM loss (src/finetune/causal_lm_loss.ts) against float64 loops written from
 * Keras' `SparseCategoricalCrossentropy(from_logits=True)` with `sum_over_batch_size`: per
 * position -log_softmax(logits)[y] · w, summed, divided by batch · length (not by the weights'
 * sum); its gradient in closed form (softmax - onehot(y)) · w / (batch · length). Tolerances:
 * 1e-5 relative on the loss, 1e-6 absolute on gradients of magnitude ~1e-2.
 */
import * as tf from '@tensorflow/tfjs';

import {causalLmLoss} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {lcg} from '../helpers/data';

const [B, L, V] = [3, 5, 7];

function data() {
  const logits = Array.from(lcg(B * L * V, 3, 4)); // within ±4: softmax far from uniform
  const y = Array.from(lcg(B * L, 4), (u) => Math.floor(((u + 1) / 2) * V) % V);
  // a padding mask shifted as the preprocessor's: trailing zeros, row 1 all but 2 masked
  const w = [
    [1, 1, 1, 1, 1],
    [1, 1, 0, 0, 0],
    [1, 1, 1, 1, 0],
  ].flat();
  return {logits, y, w};
}

/** log_softmax of each row of `vocab` values, float64. */
function logSoftmaxRows(logits: number[]): number[] {
  const out: number[] = [];
  for (let r = 0; r < logits.length / V; r++) {
    const row = logits.slice(r * V, (r + 1) * V);
    const max = Math.max(...row);
    const lse = max + Math.log(row.reduce((s, v) => s + Math.exp(v - max), 0));
    out.push(...row.map((v) => v - lse));
  }
  return out;
}

function loopLoss(logits: number[], y: number[], w: number[]): number {
  const lp = logSoftmaxRows(logits);
  let sum = 0;
  for (let i = 0; i < B * L; i++) sum += -lp[i * V + y[i]] * w[i];
  return sum / (B * L);
}

function loopGrad(logits: number[], y: number[], w: number[]): number[] {
  const lp = logSoftmaxRows(logits);
  return lp.map((v, k) => {
    const i = Math.floor(k / V);
    const hot = k % V === y[i] ? 1 : 0;
    return ((Math.exp(v) - hot) * w[i]) / (B * L);
  });
}

describeBackends('causalLmLoss', () => {
  it('is the weighted cross-entropy over batch · length (plain loops, 1e-5 relative)', () => {
    const {logits, y, w} = data();
    const lt = tf.tensor(logits, [B, L, V]);
    const yt = tf.tensor(y, [B, L], 'int32');
    const wt = tf.tensor(w, [B, L]);
    const before = tf.memory().numTensors;
    const loss = causalLmLoss(lt, yt, wt);
    expect(loss.shape).toEqual([]);
    const expected = loopLoss(logits, y, w);
    const got = loss.dataSync()[0];
    expect(Math.abs(got - expected) / expected).toBeLessThan(1e-5);
    // divided by batch · length, not by the count of real tokens (the masked positions count)
    const realTokens = w.reduce((s, v) => s + v, 0);
    expect(realTokens).toBeLessThan(B * L);
    expect(Math.abs(got - (expected * B * L) / realTokens)).toBeGreaterThan(0.1);
    loss.dispose();
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([lt, yt, wt]);
  });

  it('takes integer weights and a float y alike (1e-5 relative)', () => {
    const {logits, y, w} = data();
    const expected = loopLoss(logits, y, w);
    const got = tf.tidy(
      () =>
        causalLmLoss(
          tf.tensor(logits, [B, L, V]),
          tf.tensor(y, [B, L], 'float32'),
          tf.tensor(w, [B, L], 'int32'),
        ).dataSync()[0],
    );
    expect(Math.abs(got - expected) / expected).toBeLessThan(1e-5);
  });

  it('has the gradient (softmax - onehot(y)) · w / (batch · length) (plain loops, 1e-6)', () => {
    const {logits, y, w} = data();
    const lt = tf.tensor(logits, [B, L, V]);
    const yt = tf.tensor(y, [B, L], 'int32');
    const wt = tf.tensor(w, [B, L]);
    const before = tf.memory().numTensors;
    const g = tf.grad((x: tf.Tensor) => causalLmLoss(x, yt, wt))(lt);
    expect(g.shape).toEqual([B, L, V]);
    const expected = loopGrad(logits, y, w);
    expectClose(g, expected, 1e-6, 0);
    // a masked position has no gradient, a real one does
    const gv = g.dataSync();
    expect(Array.from(gv.slice(7 * V, 8 * V)).every((v) => v === 0)).toBe(true); // row 1, pos 2
    expect(Math.max(...Array.from(gv.slice(0, V), Math.abs))).toBeGreaterThan(1e-3);
    g.dispose();
    expect(tf.memory().numTensors).toBe(before);
    // scaled by the upstream gradient
    const g2 = tf.grad((x: tf.Tensor) => tf.mul(causalLmLoss(x, yt, wt), 3))(lt);
    expectClose(
      g2,
      expected.map((v) => 3 * v),
      3e-6,
      0,
    );
    tf.dispose([g2, lt, yt, wt]);
  });

  it('refuses shapes that do not fit, saying what it expected and received', () => {
    const lt = tf.zeros([2, 3, 4]);
    const good = tf.zeros([2, 3], 'int32');
    const bad = tf.zeros([2, 4], 'int32');
    const flat = tf.zeros([2, 3]);
    const before = tf.memory().numTensors;
    expect(() => causalLmLoss(flat, good, good)).toThrow(
      'causalLmLoss: expected logits [batch, length, vocab], received [2,3]',
    );
    expect(() => causalLmLoss(lt, bad, good)).toThrow(
      "causalLmLoss: expected y [2, 3] (the logits' batch and length), received [2,4]",
    );
    expect(() => causalLmLoss(lt, good, bad)).toThrow(
      "causalLmLoss: expected sampleWeight [2, 3] (the logits' batch and length), received [2,4]",
    );
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([lt, good, bad, flat]);
  });
});
