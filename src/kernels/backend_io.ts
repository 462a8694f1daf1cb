/**
 * Reading float32 inputs and writing float32 outputs of the package's kernels on tfjs' cpu and
 * wasm backends: cpu keeps values in JavaScript arrays; wasm keeps them in its module's heap,
 * read through a view (no copy) and written into an output it allocates.
 */
import type * as tf from '@tensorflow/tfjs-core';

import type {CpuBackend} from '../ops/cpu_backend';

/** The parts of tfjs' wasm backend (BackendWasm) used here. */
interface WasmBackend {
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array;
  makeOutput(shape: number[], dtype: 'float32'): tf.TensorInfo;
}

export type KernelBackend = 'cpu' | 'wasm';

/** A float32 input's values (on wasm a view of its heap: use before allocating). */
export function readF32(
  kind: KernelBackend,
  backend: unknown,
  t: tf.TensorInfo,
): ArrayLike<number> {
  return kind === 'cpu'
    ? (backend as CpuBackend).readSync(t.dataId)
    : (backend as WasmBackend).typedArrayFromHeap(t);
}

/** A float32 output holding `values`. */
export function writeF32(
  kind: KernelBackend,
  backend: unknown,
  shape: number[],
  values: Float32Array,
): tf.TensorInfo {
  if (kind === 'cpu') return (backend as CpuBackend).makeTensorInfo(shape, 'float32', values);
  const wasm = backend as WasmBackend;
  const out = wasm.makeOutput(shape, 'float32');
  wasm.typedArrayFromHeap(out).set(values);
  return out;
}
