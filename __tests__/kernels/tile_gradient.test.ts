/**
 * The one-reduction Tile gradient gives tfjs' own gradient (exactly on wasm, where both sum in
 * float32 in the same order; within 1e-6 on cpu, which sums in float64) in a fraction of the
 * kernels, and is taken back afterwards.
 */
import * as tf from '@tensorflow/tfjs';

import {useFastTileGradient} from '../../src/kernels/tile_gradient';
import {describeBackends} from '../helpers/backends';

function tileGrad(x: tf.Tensor, reps: number[], dy: tf.Tensor): tf.Tensor {
  return tf.grad((t: tf.Tensor) => tf.sum(tf.mul(tf.tile(t, reps), dy)))(x);
}

async function gradAndKernels(x: tf.Tensor, reps: number[], dy: tf.Tensor) {
  let value: unknown;
  const info = await tf.profile(() => {
    const g = tileGrad(x, reps, dy);
    value = g.arraySync();
    return g;
  });
  return {value, kernels: info.kernels.length};
}

describeBackends('fast Tile gradient', () => {
  it.each([
    [[3], [4]],
    [
      [1, 1, 8],
      [5, 7, 1],
    ],
    [
      [2, 3, 1],
      [1, 2, 6],
    ],
    [
      [2, 1, 3, 2],
      [2, 3, 1, 2],
    ],
  ])(
    'x %j tiled by %j: the same values as tfjs gradient, restored afterwards',
    async (shape, reps) => {
      const n = shape.reduce((a, b) => a * b, 1);
      const x = tf.tensor(
        Array.from({length: n}, (_, i) => Math.sin(i + 1)),
        shape,
      );
      const outShape = shape.map((s, d) => s * reps[d]);
      const m = outShape.reduce((a, b) => a * b, 1);
      const dy = tf.tensor(
        Array.from({length: m}, (_, i) => Math.cos(3 * i) / 7),
        outShape,
      );
      const before = tf.getGradient('Tile');
      const want = await gradAndKernels(x, reps, dy);
      const restore = useFastTileGradient();
      let got: {value: unknown; kernels: number};
      try {
        got = await gradAndKernels(x, reps, dy);
      } finally {
        restore();
      }
      if (tf.getBackend() === 'wasm') {
        expect(got.value).toEqual(want.value); // same order of float32 sums: trained bytes unchanged
      } else {
        const flat = (v: unknown) => [v].flat(4) as number[];
        const w = flat(want.value);
        flat(got.value).forEach((g, i) => expect(Math.abs(g - w[i])).toBeLessThan(1e-6));
      }
      if (reps.reduce((a, b) => a * b, 1) >= 12) expect(got.kernels).toBeLessThan(want.kernels / 2);
      expect(tf.getGradient('Tile')).toBe(before);
      tf.dispose([x, dy]);
    },
  );
});
