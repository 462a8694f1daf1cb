/**
 * The float32 products of a compiled step's prefill on the backend's own matmul: on tfjs-node's
 * `tensorflow` backend, TensorFlow's matmul on the model's weight tensors where they are, for a
 * prompt's many rows (the time to the first token). TensorFlow's product of 32 rows runs at 60-80
 * GFLOP/s on one thread against about 30 for the step's own WebAssembly kernels; its fixed cost
 * per call (about 0.07 ms: a tensor in, a tensor out) loses on the one row of a decoding step,
 * which stays on the step's kernels.
 *
 * TFJS_ATTENTION_STEP_BACKEND_ROWS (kernels/flags.ts; default -1: automatic, 8 on `tensorflow`,
 * never elsewhere): the rows from which a `dense` op runs here; 0 turns it off. Set on cpu (tests)
 * it runs tfjs-cpu's matmul through the same code.
 */
import * as tf from '@tensorflow/tfjs-core';

import {STEP_BACKEND_ROWS} from '../kernels/flags';
import {StepActivation, type StepKernels} from '../kernels/step_kernels_api';

export {STEP_BACKEND_ROWS} from '../kernels/flags';

/** Rows from which the automatic setting runs a product on tfjs-node's matmul. */
export const TENSORFLOW_ROWS_FROM = 8;

/**
 * The rows from which the step's float32 products run on the backend's matmul, or 0 (never), for
 * a step in a memory of its own (`own`) or tfjs-wasm's heap (`heap`: never, its kernels are the
 * step's own).
 */
export function backendRowsFrom(memory: 'heap' | 'own'): number {
  if (memory === 'heap') return 0;
  const set = tf.env().getNumber(STEP_BACKEND_ROWS);
  if (set >= 0) return set;
  return tf.getBackend() === 'tensorflow' ? TENSORFLOW_ROWS_FROM : 0;
}

/**
 * `out [rows, n] = act(x [rows, k] · w [k, n] + bias [n])` on the backend's matmul: `x` and `out`
 * byte offsets into `f32`'s memory, `w` and `bias` (or null) the weights' tensors (any shape of
 * `k * n` and `n` values, read as Keras' kernel, input axis first); the activation applied by
 * the step's kernels in place.
 */
export function backendDense(
  f32: () => Float32Array,
  kernels: StepKernels,
  rows: number,
  k: number,
  n: number,
  x: number,
  w: tf.Tensor,
  bias: tf.Tensor | null,
  act: StepActivation,
  out: number,
): void {
  const from = x >>> 2;
  const values = f32().slice(from, from + rows * k);
  const y = tf.tidy(() => {
    const a = tf.tensor2d(values, [rows, k]);
    const b = w.rank === 2 ? w : tf.reshape(w, [k, n]);
    return bias == null ? tf.matMul(a, b) : tf.add(tf.matMul(a, b), tf.reshape(bias, [n]));
  });
  try {
    // the memory does not grow while an op runs: the view made now holds `out`
    f32().set(y.dataSync() as Float32Array, out >>> 2);
  } finally {
    y.dispose();
  }
  if (act !== StepActivation.None) kernels.activate(rows * n, out, act, out);
}
