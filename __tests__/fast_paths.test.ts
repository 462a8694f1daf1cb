/**
 * Every fast path against the plain one: the fused MultiHeadAttention path (3-D inputs) against
 * the einsum path, query blocks against whole attention, the cpu fused masked softmax and
 * swapAxes12 kernels against composed tfjs ops, and mm() (explicit transposes, 2-D loops on wasm)
 * against tf.matMul — outputs and gradients, tolerance 1e-5 (abs and rel).
 */
import * as tf from '@tensorflow/tfjs';

import {MultiHeadAttention} from '../src';
import {softmaxWithFill} from '../src/ops/fused_softmax';
import {mm} from '../src/ops/matmul';
import {maskFill} from '../src/ops/masking';
import {swapAxes12} from '../src/ops/swap_axes';
import {
  setAutoChunkThresholds,
  setMultiHeadAttentionFastPath,
} from '../src/layers/multi_head_attention';
import {describeBackends} from './helpers/backends';
import {expectClose} from './helpers/close';
import {randTensor} from './helpers/data';

const TOL = 1e-5;

/** Output and the gradients of every weight and float input, for one path. */
function run(
  layer: MultiHeadAttention,
  inputs: tf.Tensor[],
  kwargs: Record<string, unknown>,
  fast: boolean,
) {
  const previous = setMultiHeadAttentionFastPath(fast);
  try {
    return tf.tidy(() => {
      const g = tf.tidy(() => {
        const y = layer.apply(inputs, kwargs) as tf.Tensor | tf.Tensor[];
        return randTensor((Array.isArray(y) ? y[0] : y).shape, 99);
      });
      const vars = layer.trainableWeights.map((v) => v.read() as tf.Variable);
      const f = () => {
        const y = layer.apply(inputs, kwargs) as tf.Tensor | tf.Tensor[];
        return tf.sum(tf.mul(Array.isArray(y) ? y[0] : y, g)) as tf.Scalar;
      };
      const {grads} = tf.variableGrads(f, vars);
      const floats = inputs.filter((t) => t.dtype === 'float32');
      const inputGrads = tf.grads((...xs: tf.Tensor[]) => {
        let i = 0;
        const all = inputs.map((t) => (t.dtype === 'float32' ? xs[i++] : t));
        const y = layer.apply(all, kwargs) as tf.Tensor | tf.Tensor[];
        return tf.sum(tf.mul(Array.isArray(y) ? y[0] : y, g));
      })(floats);
      const out = layer.apply(inputs, {...kwargs, returnAttentionScores: true}) as tf.Tensor[];
      return {out, grads: vars.map((v) => grads[v.name]), inputGrads};
    });
  } finally {
    setMultiHeadAttentionFastPath(previous);
  }
}

describeBackends('fast paths', () => {
  const cases: Array<{
    name: string;
    args: ConstructorParameters<typeof MultiHeadAttention>[0];
    key: boolean;
    kwargs: () => Record<string, unknown>;
  }> = [
    {name: 'self-attention', args: {numHeads: 2, keyDim: 3}, key: false, kwargs: () => ({})},
    {
      name: 'cross, key, valueDim, 2-D outputShape, no bias',
      args: {numHeads: 3, keyDim: 2, valueDim: 4, outputShape: [2, 3], useBias: false},
      key: true,
      kwargs: () => ({}),
    },
    {
      name: '1-D lengths and causal',
      args: {numHeads: 2, keyDim: 3, useCausalMask: true},
      key: false,
      kwargs: () => ({validLens: tf.tensor1d([3, 0], 'int32')}),
    },
    {
      name: '2-D lengths and an attention mask',
      args: {numHeads: 2, keyDim: 3},
      key: true,
      kwargs: () => ({
        validLens: tf.tensor2d(
          [
            [1, 5, 2, 4],
            [3, 3, 5, 0],
          ],
          [2, 4],
          'int32',
        ),
        attentionMask: tf.greater(randTensor([2, 4, 5], 8), -0.4),
      }),
    },
    {
      name: 'gate and sliding window',
      args: {numHeads: 2, keyDim: 3, useGate: true, slidingWindow: 2},
      key: false,
      kwargs: () => ({}),
    },
    {
      name: 'query blocks of 2 (chunkSize)',
      args: {numHeads: 2, keyDim: 3, chunkSize: 2, useCausalMask: true},
      key: false,
      kwargs: () => ({
        validLens: tf.tensor2d(
          [
            [1, 2, 3, 4],
            [4, 4, 2, 1],
          ],
          [2, 4],
          'int32',
        ),
      }),
    },
  ];
  for (const c of cases) {
    it(`MultiHeadAttention fused path = einsum path: ${c.name}`, () => {
      tf.tidy(() => {
        const layer = new MultiHeadAttention(c.args);
        const q = randTensor([2, 4, 6], 1);
        const v = randTensor([2, c.key ? 5 : 4, 5], 2);
        const k = randTensor([2, c.key ? 5 : 4, 7], 3);
        const inputs = c.key ? [q, v, k] : [q];
        layer.apply(inputs);
        layer.setWeights(layer.getWeights().map((w, i) => randTensor(w.shape, 20 + i, 0.5)));
        const fast = run(layer, inputs, c.kwargs(), true);
        const plain = run(layer, inputs, c.kwargs(), false);
        fast.out.forEach((t, i) => expectClose(t, plain.out[i], TOL, TOL));
        fast.grads.forEach((t, i) => expectClose(t, plain.grads[i], TOL, TOL));
        fast.inputGrads.forEach((t, i) => expectClose(t, plain.inputGrads[i], TOL, TOL));
      });
    });
  }

  it('automatic query blocks match whole attention, outputs and gradients', () => {
    // thresholds lowered from 2^23 / 2^21 score elements so a small input is blocked: 2 x 2 x 9 x 9
    // = 324 elements > 100, blocks of floor(40 / (2 * 2 * 9)) = 1 query
    const previous = setAutoChunkThresholds(100, 40);
    tf.tidy(() => {
      const x = randTensor([2, 9, 4], 4);
      const auto = new MultiHeadAttention({numHeads: 2, keyDim: 2, useCausalMask: true});
      const whole = new MultiHeadAttention({
        numHeads: 2,
        keyDim: 2,
        useCausalMask: true,
        chunkSize: 0,
      });
      auto.apply(x);
      whole.apply(x);
      whole.setWeights(auto.getWeights());
      const a = run(auto, [x], {}, true);
      const w = run(whole, [x], {}, true);
      a.out.forEach((t, i) => expectClose(t, w.out[i], TOL, TOL));
      a.grads.forEach((t, i) => expectClose(t, w.grads[i], TOL, TOL));
      a.inputGrads.forEach((t, i) => expectClose(t, w.inputGrads[i], TOL, TOL));
    });
    setAutoChunkThresholds(previous.above, previous.target);
  });

  it('softmaxWithFill = softmax(where(mask, logits, fill)), with its gradient', () => {
    tf.tidy(() => {
      const logits = tf.mul(randTensor([2, 3, 4, 6], 5), 10);
      const mask = tf.greater(randTensor([2, 1, 4, 6], 6), -0.3);
      const fill = maskFill(mask, 4);
      const composed = (x: tf.Tensor) =>
        tf.softmax(tf.where(tf.broadcastTo(mask, x.shape), x, tf.scalar(-1e9)));
      expectClose(softmaxWithFill(logits, fill), composed(logits), TOL, TOL);
      expectClose(softmaxWithFill(logits, null), tf.softmax(logits), TOL, TOL);
      const dy = randTensor(logits.shape, 7);
      const g1 = tf.grad((x: tf.Tensor) => tf.sum(tf.mul(softmaxWithFill(x, fill), dy)))(logits);
      const g2 = tf.grad((x: tf.Tensor) => tf.sum(tf.mul(composed(x), dy)))(logits);
      expectClose(g1, g2, TOL, TOL);
    });
  });

  it('swapAxes12 = transpose [0, 2, 1, 3], with its gradient', () => {
    tf.tidy(() => {
      const x = randTensor([2, 3, 4, 5], 8);
      expectClose(swapAxes12(x), tf.transpose(x, [0, 2, 1, 3]), 0, 0);
      const dy = randTensor([2, 4, 3, 5], 9);
      expectClose(
        tf.grad((t: tf.Tensor) => tf.sum(tf.mul(swapAxes12(t), dy)))(x),
        tf.transpose(dy, [0, 2, 1, 3]),
        0,
        0,
      );
    });
  });

  it('mm = tf.matMul for every transpose combination, with gradients (small and 2-D-loop sizes)', () => {
    tf.tidy(() => {
      for (const [b, m, k, n] of [
        [3, 4, 5, 6],
        [2, 256, 16, 600], // large slices: a loop of 2-D products on wasm
      ]) {
        for (const ta of [false, true]) {
          for (const tb of [false, true]) {
            const a = randTensor(ta ? [b, k, m] : [b, m, k], 10);
            const c = randTensor(tb ? [b, n, k] : [b, k, n], 11);
            expectClose(mm(a, c, ta, tb), tf.matMul(a, c, ta, tb), 1e-4, 1e-4);
            const dy = randTensor([b, m, n], 12);
            const f1 = tf.grads((x: tf.Tensor, y: tf.Tensor) =>
              tf.sum(tf.mul(mm(x, y, ta, tb), dy)),
            )([a, c]);
            const f2 = tf.grads((x: tf.Tensor, y: tf.Tensor) =>
              tf.sum(tf.mul(tf.matMul(x, y, ta, tb), dy)),
            )([a, c]);
            f1.forEach((g, i) => expectClose(g, f2[i], 1e-4, 1e-4));
          }
        }
      }
    });
  });
});
