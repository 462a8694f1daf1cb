/**
 * Reading float32 inputs and writing float32 outputs of the package's kernels on tfjs' cpu and
 * wasm backends: cpu keeps values in JavaScript arrays; wasm keeps them in its module's heap,
 * where the package's kernels run in place ({@link wasmHeap}), or else are read through a view
 * (no copy) and written into an output it allocates.
 */
import type * as tf from '@tensorflow/tfjs-core';

import type {CpuBackend} from './cpu_backend';
import {kernelsOnMemory, wasmKernelsLoaded, type KernelExports} from './wasm_kernels';

/** The parts of tfjs' wasm backend (BackendWasm) used here. */
interface WasmBackend {
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array;
  makeOutput(shape: number[], dtype: 'float32'): tf.TensorInfo;
  dataIdMap: {get(dataId: tf.DataId): {memoryOffset: number} | undefined};
  wasm: {
    _malloc(bytes: number): number;
    _free(offset: number): void;
    asm?: Record<string, unknown>;
    wasmExports?: Record<string, unknown>;
  };
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

/** The package's kernels running on a tfjs-wasm backend's heap. */
export interface WasmHeap {
  /** The kernels; their byte offsets are offsets in the backend's heap. */
  kernels: KernelExports;
  /** sgemm's scratch in the heap (allocated once per backend). */
  work: number;
  /** Where a tensor's values start in the heap. */
  offset(t: tf.TensorInfo): number;
  /** A new float32 output of `shape` in the heap (uninitialized). */
  output(shape: number[]): tf.TensorInfo;
  /** Runs `f` with `values` copied into a temporary heap allocation at the offset it gets. */
  withInt32(values: Int32Array, f: (offset: number) => void): void;
}

const heaps = new WeakMap<object, WasmHeap | null>();

/** The wasm module's memory among its exports (Emscripten names it `memory`). */
function memoryOf(backend: WasmBackend): WebAssembly.Memory | null {
  const exports = backend.wasm?.asm ?? backend.wasm?.wasmExports;
  const m = exports?.memory;
  return m instanceof WebAssembly.Memory ? m : null;
}

/**
 * The package's kernels on tfjs-wasm `backend`'s own heap, or null where they cannot run there
 * (kernels not loaded or off, a shared heap, an unknown build): callers then copy.
 */
export function wasmHeap(backend: unknown): WasmHeap | null {
  if (!wasmKernelsLoaded() || typeof backend !== 'object' || backend == null) return null;
  const wasm = backend as WasmBackend;
  const cached = heaps.get(wasm);
  if (cached !== undefined) return cached;
  const memory = memoryOf(wasm);
  const kernels = memory == null ? null : kernelsOnMemory(memory);
  if (memory == null || kernels == null || typeof wasm.wasm._malloc !== 'function') {
    heaps.set(wasm, null); // the module is loaded: this heap will never take it
    return null;
  }
  /** Heap bytes from tfjs-wasm's malloc (which returns 0 when the heap cannot grow). */
  const malloc = (bytes: number): number => {
    const at = wasm.wasm._malloc(bytes) >>> 0;
    if (at === 0) throw new Error(`tfjs-attention: the wasm heap has no ${bytes} bytes left`);
    return at;
  };
  const offset = (t: tf.TensorInfo): number => {
    const data = wasm.dataIdMap.get(t.dataId);
    if (data == null) throw new Error('tfjs-attention: a tensor is not on the wasm backend');
    return data.memoryOffset;
  };
  const heap: WasmHeap = {
    kernels,
    work: malloc(kernels.sgemmWorkBytes()),
    offset,
    output: (shape) => wasm.makeOutput(shape, 'float32'),
    withInt32(values, f) {
      const at = malloc(Math.max(4, values.byteLength));
      try {
        new Int32Array(memory.buffer, at, values.length).set(values);
        f(at);
      } finally {
        wasm.wasm._free(at);
      }
    },
  };
  heaps.set(wasm, heap);
  return heap;
}
