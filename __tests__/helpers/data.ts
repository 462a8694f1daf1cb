/** Deterministic test data, independent of tf's random number generator. */
import * as tf from '@tensorflow/tfjs';

export function lcg(n: number, seed: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 31 - 1) * scale;
  }
  return out;
}

export function randTensor(shape: number[], seed: number, scale = 1): tf.Tensor {
  return tf.tensor(
    lcg(
      shape.reduce((p, d) => p * d, 1),
      seed,
      scale,
    ),
    shape,
  );
}
