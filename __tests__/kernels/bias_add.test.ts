/**
 * addBias (src/kernels/bias_add.ts): the bias of the dense projections. Its value and gradients equal
 * plain loops (column sums for the bias) at sizes off the SIMD tile; on tfjs' cpu backend it is one
 * own kernel and the bias gradient runs as a SIMD product, no `Sum` kernel, unless
 * TFJS_ATTENTION_OWN_KERNELS is off (or, for the gradient, the SIMD module is missing); and
 * an EinsumDense projection's gradients are those of tfjs' own ops.
 */
import * as tf from '@tensorflow/tfjs';

import {EinsumDense} from '../../src';
import {wasmKernelsReady} from '../../src/kernels/wasm_kernels';
import {addBias} from '../../src/kernels/bias_add';
import {useBackend} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {kernelsOf, withOwnKernels, withSimdKernels} from '../helpers/kernels';

function values(n: number, seed: number): number[] {
  let s = seed >>> 0;
  return Array.from({length: n}, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 31 - 1;
  });
}

beforeAll(async () => {
  await useBackend('cpu');
  expect(await wasmKernelsReady()).toBe(true);
});

describe('addBias on cpu', () => {
  it.each([
    [1, 1],
    [5, 3],
    [17, 33],
    [64, 9],
  ])('y [%i, %i] + b: value, dy and the column sums of dy as plain loops', (n, o) => {
    const y = values(n * o, n + o);
    const b = values(o, 7 * o);
    const g = values(n * o, 3 * n); // the upstream gradient, through sum(out * g)
    const before = tf.memory().numTensors;
    const [value, dy, db] = tf.tidy(() => {
      const yt = tf.tensor2d(y, [n, o]);
      const bt = tf.tensor1d(b);
      const gt = tf.tensor2d(g, [n, o]);
      const grads = tf.grads((a: tf.Tensor, c: tf.Tensor) => tf.sum(tf.mul(addBias(a, c), gt)));
      return [addBias(yt, bt), ...grads([yt, bt])];
    });
    const wantValue = y.map((v, i) => v + b[i % o]);
    const wantDb = b.map((_, j) => {
      let s = 0;
      for (let i = 0; i < n; i++) s += g[i * o + j];
      return s;
    });
    expect(tf.memory().numTensors).toBe(before + 3); // only the three results
    expectClose(value, tf.tensor2d(wantValue, [n, o]), 1e-6, 1e-6);
    expectClose(dy, tf.tensor2d(g, [n, o]), 0, 0);
    expectClose(db, tf.tensor1d(wantDb), 1e-5, 1e-5);
    tf.dispose([value, dy, db]);
  });

  it('computes the bias gradient as a SIMD product (no Sum), and with the flag off as tfjs does', async () => {
    const y = tf.tensor2d(values(40 * 6, 1), [40, 6]);
    const b = tf.tensor1d(values(6, 2));
    const ones = tf.ones([40, 6]);
    const grad = () => tf.grad((c: tf.Tensor) => addBias(y, c))(b, ones); // no Sum of its own
    const fast = await kernelsOf(grad);
    expect(fast).toContain('TfjsAttentionMatMul');
    expect(fast).not.toContain('Sum');
    const plain = await withOwnKernels(false, () => kernelsOf(grad));
    expect(plain).toContain('Sum');
    expect(plain).not.toContain('TfjsAttentionMatMul');
    const a = grad();
    const c = withOwnKernels(false, grad);
    expectClose(a, c, 1e-6, 1e-6);
    expectClose(a, tf.fill([6], 40), 1e-6, 0); // d/db of sum(y + b) is the row count
    tf.dispose([y, b, a, c, ones]);
  });

  it("runs as one own kernel (no tfjs Add); without the SIMD module its gradient is tfjs' Sum", async () => {
    const y = tf.tensor2d(values(9 * 5, 3), [9, 5]);
    const b = tf.tensor1d(values(5, 4));
    const g = tf.tensor2d(values(9 * 5, 5), [9, 5]);
    const value = () => addBias(y, b);
    // the output gradient given directly: no Sum of a loss among the kernels
    const grads = () => tf.grads((a: tf.Tensor, c: tf.Tensor) => addBias(a, c))([y, b], g);
    const names = await kernelsOf(value);
    expect(names).toEqual(['TfjsAttentionBiasAdd']);
    expect(await withOwnKernels(false, () => kernelsOf(value))).toEqual(['Add']);
    const simd = grads();
    await withSimdKernels(false, async () => {
      expect(await kernelsOf(value)).toEqual(['TfjsAttentionBiasAdd']);
      const gradNames = await kernelsOf(grads);
      expect(gradNames).toContain('Sum');
      expect(gradNames).not.toContain('TfjsAttentionMatMul');
      const plain = grads();
      plain.forEach((t, i) => expectClose(t, simd[i], 1e-6, 1e-6));
      tf.dispose(plain);
    });
    tf.dispose([y, b, g, simd]);
  });

  it("gives an EinsumDense projection the gradients of tfjs' own ops", () => {
    const layer = new EinsumDense({
      equation: 'abc,cd->abd',
      outputShape: [null, 7],
      biasAxes: 'd',
    });
    const x = tf.tensor3d(values(3 * 5 * 4, 9), [3, 5, 4]);
    layer.apply(x);
    const g = tf.tensor3d(values(3 * 5 * 7, 4), [3, 5, 7]);
    const loss = () => tf.sum(tf.mul(layer.apply(x) as tf.Tensor, g)) as tf.Scalar;
    const grads = () => {
      const {value, grads: gs} = tf.variableGrads(loss);
      value.dispose();
      return layer.trainableWeights.map((w) => gs[w.name]);
    };
    const fast = grads();
    const plain = withOwnKernels(false, grads);
    expect(fast.length).toBe(2);
    fast.forEach((t, i) => expectClose(t, plain[i], 1e-5, 1e-5));
    // the bias gradient: sums of g over the batch and sequence axes
    const want = tf.sum(g, [0, 1]);
    expectClose(fast[1], want, 1e-5, 1e-5);
    tf.dispose([x, g, ...fast, ...plain, want]);
  });
});
