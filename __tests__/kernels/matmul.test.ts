/**
 * Products whose inner dimension is 0 (src/kernels/matmul.ts): zeros made without any backend's
 * matMul (tfjs-wasm's 2-D product leaves its output unwritten then), with the broadcast batch
 * shape, every transpose, and (empty) gradients.
 */
import * as tf from '@tensorflow/tfjs';

import {matMul, mm} from '../../src/kernels/matmul';
import {describeBackends} from '../helpers/backends';
import {kernelsOf, withFlags} from '../helpers/kernels';
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
      expect(() => matMul(tf.zeros([2, 3, 0]), tf.zeros([3, 0, 5]))).toThrow(/broadcast/);
    });
  });
});
