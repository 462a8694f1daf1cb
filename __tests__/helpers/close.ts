/** Numeric comparison helpers with explicit tolerances. */
import * as tf from '@tensorflow/tfjs';

export type NestedNumbers = number | NestedNumbers[];

function flatten(x: NestedNumbers | tf.Tensor | Float32Array | number[]): number[] {
  if (x instanceof tf.Tensor) {
    return Array.from(x.dataSync());
  }
  if (typeof x === 'number') {
    return [x];
  }
  if (x instanceof Float32Array) {
    return Array.from(x);
  }
  return (x as NestedNumbers[]).flatMap((v) => flatten(v));
}

/** Max absolute difference; shapes must agree when both are tensors. */
export function maxAbsDiff(a: tf.Tensor | NestedNumbers, b: tf.Tensor | NestedNumbers): number {
  if (a instanceof tf.Tensor && b instanceof tf.Tensor) {
    expect(a.shape).toEqual(b.shape);
  }
  const fa = flatten(a);
  const fb = flatten(b);
  expect(fa.length).toBe(fb.length);
  let m = 0;
  for (let i = 0; i < fa.length; i++) {
    const d = Math.abs(fa[i] - fb[i]);
    if (Number.isNaN(d)) {
      return Infinity;
    }
    m = Math.max(m, d);
  }
  return m;
}

/**
 * Expects |a - b| <= atol + rtol * |b| elementwise (numpy's allclose), reporting the worst element.
 */
export function expectClose(
  a: tf.Tensor | NestedNumbers,
  b: tf.Tensor | NestedNumbers,
  atol = 1e-5,
  rtol = 1e-5,
): void {
  if (a instanceof tf.Tensor && b instanceof tf.Tensor) {
    expect(a.shape).toEqual(b.shape);
  }
  const fa = flatten(a);
  const fb = flatten(b);
  expect(fa.length).toBe(fb.length);
  let worst = -1;
  let worstExcess = 0;
  for (let i = 0; i < fa.length; i++) {
    const excess = Math.abs(fa[i] - fb[i]) - (atol + rtol * Math.abs(fb[i]));
    if (!(excess <= 0) && (worst === -1 || !(excess <= worstExcess))) {
      worst = i;
      worstExcess = excess;
    }
  }
  if (worst !== -1) {
    throw new Error(
      `values differ at flat index ${worst}: ${fa[worst]} vs ${fb[worst]} ` +
        `(atol ${atol}, rtol ${rtol}; ${fa.length} elements)`,
    );
  }
}
