/**
 * `weightProduct` (src/kernels/matmul.ts), the product of activations with a weight used where
 * the weight must not be copied (the tied logits): against plain loops for one row (tfjs' product
 * on wasm) and several rows (the package's SIMD product), the weight in either layout, with the
 * SIMD module on and off; gradients against the plain-loop gradients of sum(g · x wᵀ).
 * Tolerance 1e-5 absolute and relative (float32 against float64 loops).
 */
import * as tf from '@tensorflow/tfjs';

import {weightProduct} from '../../src/kernels/matmul';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {kernelsOf, withSimdKernels} from '../helpers/kernels';
import {lcg} from '../helpers/data';

const TOL = 1e-5;
const K = 24;
const N = 37;

/** `x · w` (w [K, N]) or `x · wᵀ` (w [N, K]) in float64 loops. */
function product(x: Float32Array, w: Float32Array, rows: number, transposed: boolean): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < rows; i++) {
    const row: number[] = [];
    for (let j = 0; j < N; j++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += x[i * K + k] * (transposed ? w[j * K + k] : w[k * N + j]);
      row.push(s);
    }
    out.push(row);
  }
  return out;
}

describeBackends('weightProduct', (backend) => {
  it('the product that runs: the SIMD sgemm, except for one row on wasm and without the module', async () => {
    const w = tf.tensor2d(lcg(N * K, 5), [N, K]);
    const ran = async (rows: number, simd: boolean) =>
      (
        await withSimdKernels(simd, () =>
          kernelsOf(() => weightProduct(tf.ones([rows, K]), w, true)),
        )
      ).filter((n) => n.includes('MatMul'));
    const own = ['TfjsAttentionMatMul'];
    expect(await ran(3, true)).toEqual(own);
    expect(await ran(1, true)).toEqual(backend === 'wasm' ? ['BatchMatMul'] : own);
    expect(await ran(3, false)).toEqual(['BatchMatMul']);
    w.dispose();
  });

  for (const simd of [true, false]) {
    for (const rows of [1, 3]) {
      for (const transposed of [false, true]) {
        const what = `${rows} row(s), ${transposed ? 'x · wᵀ' : 'x · w'}, SIMD ${simd ? 'on' : 'off'}`;
        it(`${what}: plain loops, and the gradients of both operands`, () =>
          withSimdKernels(simd, () => {
            const xv = lcg(rows * K, 3);
            const wv = lcg(K * N, 5);
            const gv = lcg(rows * N, 7);
            const x = tf.tensor2d(xv, [rows, K]);
            const w = tf.tensor2d(wv, transposed ? [N, K] : [K, N]);
            const g = tf.tensor2d(gv, [rows, N]);
            const before = tf.memory().numTensors;
            const y = weightProduct(x, w, transposed);
            expectClose(y, product(xv, wv, rows, transposed), TOL, TOL);
            const [dx, dw] = tf.grads((a: tf.Tensor, b: tf.Tensor) =>
              tf.sum(tf.mul(weightProduct(a, b, transposed), g)),
            )([x, w]);
            // d/dx = g · w(ᵀ)ᵀ, d/dw = xᵀ g (or gᵀ x when w is transposed)
            const wantDx = Array.from({length: rows}, (_, i) =>
              Array.from({length: K}, (_, k) => {
                let s = 0;
                for (let j = 0; j < N; j++) {
                  s += gv[i * N + j] * (transposed ? wv[j * K + k] : wv[k * N + j]);
                }
                return s;
              }),
            );
            const wantDw = Array.from({length: transposed ? N : K}, (_, r) =>
              Array.from({length: transposed ? K : N}, (_, c) => {
                let s = 0;
                for (let i = 0; i < rows; i++) {
                  s += transposed ? gv[i * N + r] * xv[i * K + c] : xv[i * K + r] * gv[i * N + c];
                }
                return s;
              }),
            );
            expectClose(dx, wantDx, TOL, TOL);
            expectClose(dw, wantDw, TOL, TOL);
            tf.dispose([y, dx, dw]);
            expect(tf.memory().numTensors).toBe(before);
            tf.dispose([x, w, g]);
          }));
      }
    }
  }
});
