/** Which kernels a computation runs, and running one under other tfjs flags. */
import * as tf from '@tensorflow/tfjs';

import {OWN_KERNELS, SIMD} from '../../src/kernels/flags';

/**
 * `f` with the tfjs environment flags set, then set back (also on an error); when `f` returns a
 * promise, they are set back once it settles.
 */
export function withFlags<T>(flags: Record<string, boolean | number>, f: () => T): T {
  const env = tf.env();
  const previous = Object.fromEntries(Object.keys(flags).map((k) => [k, env.get(k)]));
  const restore = () => {
    for (const [k, v] of Object.entries(previous)) env.set(k, v);
  };
  let result: T;
  try {
    for (const [k, v] of Object.entries(flags)) env.set(k, v);
    result = f();
  } catch (e) {
    restore();
    throw e;
  }
  if (result instanceof Promise) return result.finally(restore) as T;
  restore();
  return result;
}

/** `f` with the package's own kernels (TFJS_ATTENTION_OWN_KERNELS) on or off. */
export function withOwnKernels<T>(on: boolean, f: () => T): T {
  return withFlags({[OWN_KERNELS]: on}, f);
}

/**
 * `f` with the WebAssembly SIMD module on or off (TFJS_ATTENTION_SIMD): off, the package takes the
 * paths it takes where the module did not load.
 */
export function withSimdKernels<T>(on: boolean, f: () => T): T {
  return withFlags({[SIMD]: on}, f);
}

/** The names of the kernels `f` runs (one entry per kernel call). */
export async function kernelsOf(f: () => tf.TensorContainer): Promise<string[]> {
  const info = await tf.profile(() => f());
  tf.dispose(info.result as tf.TensorContainer);
  return info.kernels.map((k) => k.name);
}
