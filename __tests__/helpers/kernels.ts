/** Which kernels a computation runs, and running one under other tfjs flags. */
import * as tf from '@tensorflow/tfjs';

import {OWN_KERNELS} from '../../src/kernels/flags';

/** `f` with the tfjs environment flags set, then set back (also on an error). */
export function withFlags<T>(flags: Record<string, boolean | number>, f: () => T): T {
  const env = tf.env();
  const previous = Object.fromEntries(Object.keys(flags).map((k) => [k, env.get(k)]));
  try {
    for (const [k, v] of Object.entries(flags)) env.set(k, v);
    return f();
  } finally {
    for (const [k, v] of Object.entries(previous)) env.set(k, v);
  }
}

/** `f` with the package's own kernels (TFJS_ATTENTION_OWN_KERNELS) on or off. */
export function withOwnKernels<T>(on: boolean, f: () => T): T {
  return withFlags({[OWN_KERNELS]: on}, f);
}

/** The names of the kernels `f` runs (one entry per kernel call). */
export async function kernelsOf(f: () => tf.TensorContainer): Promise<string[]> {
  const info = await tf.profile(() => f());
  tf.dispose(info.result as tf.TensorContainer);
  return info.kernels.map((k) => k.name);
}
