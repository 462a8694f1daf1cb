/**
 * The products of src/kernels/matmul.ts.
 *
 * Products whose inner dimension is 0: zeros made without any backend's matMul (tfjs-wasm's 2-D
 * product leaves its output unwritten then), with the broadcast batch shape, every transpose, and
 * (empty) gradients.
 *
 * `weightProduct`, the product of activations with a weight used where the weight must not be
 * copied (the tied logits): against plain loops for one row (tfjs' product on wasm) and several
 * rows (the package's SIMD product), the weight in either layout, with the SIMD module on and off;
 * gradients against the plain-loop gradients of sum(g · x wᵀ). Tolerance 1e-5 absolute and
 * relative (float32 against float64 loops).
 */
import * as tf from '@tensorflow/tfjs';

import {matMul, mm, weightProduct} from '../../src/kernels/matmul';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {lcg} from '../helpers/data';
import {kernelsOf, withFlags, withSimdKernels} from '../helpers/kernels';
import {OWN_KERNELS, SIMD} from '../../src/kernels/flags';

/** op(a) · op(b) in plain loops: [...lead, m, n] sums over k = 0 terms. */
function zerosOf(lead: number[], m: number, n: number): unknown {
  const rows = () => Array.from({length: m}, () => Array.from({length: n}, () => 0));
  return lead.reduceRight<unknown>((inner, d) => Array.from({length: d}, () => inner), rows());
}

describeBackends('products with an inner dimension of 0', (backend) => {
  // [a's shape, b's shape, transposeA, transposeB, the product's batch shape, m, n]
  const cases: Array<[number[], number[], boolean, boolean, number[], number, number]> = [
    [[3, 0], [0, 4], false, false, [], 3, 4],
    [[1, 3, 0], [1, 0, 4], false, false, [1], 3, 4],
    [[2, 0, 3], [2, 0, 5], true, false, [2], 3, 5],
    [[2, 3, 0], [2, 5, 0], false, true, [2], 3, 5],
    [[1, 0, 6], [1, 5, 0], true, true, [1], 6, 5],
  ];
  const modes: Array<[string, Record<string, boolean>]> = [
    ['own kernels', {}],
    ['own kernels off', {[OWN_KERNELS]: false}],
    ['SIMD module off', {[SIMD]: false}],
  ];
  for (const [mode, flags] of modes) {
    it(`mm and matMul give zeros and empty gradients, no backend product (${mode}, ${backend})`, async () => {
      await withFlags(flags, async () => {
        for (const [sa, sb, ta, tb, lead, m, n] of cases) {
          const a = tf.zeros(sa);
          const b = tf.zeros(sb);
          const before = tf.memory().numTensors;
          for (const f of [mm, matMul]) {
            tf.dispose(tf.fill([lead.reduce((p, d) => p * d, 1) * m * n], 7)); // stale values
            const y = f(a, b, ta, tb);
            expect(y.shape).toEqual([...lead, m, n]);
            expect(y.arraySync()).toEqual(zerosOf(lead, m, n));
            y.dispose();
            const names = await kernelsOf(() => f(a, b, ta, tb));
            expect(names.filter((k) => /MatMul/.test(k))).toEqual([]);
            const [ga, gb] = tf.grads((x: tf.Tensor, z: tf.Tensor) => tf.sum(f(x, z, ta, tb)))([
              a,
              b,
            ]);
            expect([ga.shape, gb.shape]).toEqual([sa, sb]);
            tf.dispose([ga, gb]);
          }
          expect(tf.memory().numTensors).toBe(before);
          tf.dispose([a, b]);
        }
      });
    });
  }

  it(`matMul broadcasts batch shapes when the inner dimension is 0 (${backend})`, () => {
    tf.tidy(() => {
      const y = matMul(tf.zeros([2, 1, 3, 0]), tf.zeros([4, 0, 5]));
      expect(y.shape).toEqual([2, 4, 3, 5]);
      expect(y.arraySync()).toEqual(zerosOf([2, 4], 3, 5));
      // tfjs' own check, or TensorFlow's (tfjs-node): "compatible batch dimensions"
      expect(() => matMul(tf.zeros([2, 3, 0]), tf.zeros([3, 0, 5]))).toThrow(
        /broadcast|compatible batch dimensions/,
      );
    });
  });
});

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
    // the package's product is registered on cpu and wasm; tfjs-node keeps TensorFlow's
    const own = backend === 'tensorflow' ? ['BatchMatMul'] : ['TfjsAttentionMatMul'];
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
