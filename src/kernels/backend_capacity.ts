/**
 * Whether a model's weights fit the memory of the backend in use, asked before a loader allocates
 * any of them: where the package knows a hard limit, tfjs-wasm's heap (one WebAssembly memory,
 * at most 4 GiB in tfjs-wasm 4.22; TFJS_ATTENTION_WASM_MEMORY_BYTES, kernels/flags.ts). A model
 * past it would otherwise fail part way, as "memory access out of bounds" or an allocation error
 * after gigabytes were read. The weights are held as float32 (4 bytes a value), int8 ones as
 * bytes (1 a value, ops/int8.ts). Other backends set no limit the package can read: cpu and
 * tfjs-node hold tensors in memory of their own, webgl and webgpu in GPU memory.
 */
import * as tf from '@tensorflow/tfjs-core';

import {WASM_MEMORY_BYTES} from './flags';

/** Bytes the package holds per float weight value on the backends (float32). */
export const BYTES_PER_WEIGHT = 4;

/** A model's weight values by how they are held: float32 (4 bytes each), int8 (1 byte each). */
export interface WeightCounts {
  float: number;
  int8: number;
}

/** A backend's memory for weights: its limit and what its tensors hold now. */
export interface BackendCapacity {
  /** The backend's name. */
  backend: string;
  /** The most bytes it can hold. */
  limitBytes: number;
  /** Bytes its tensors hold now. */
  usedBytes: number;
}

/** The capacity of the backend in use, or null where the package knows no limit. */
export function backendCapacity(): BackendCapacity | null {
  const backend = tf.getBackend();
  if (backend !== 'wasm') return null;
  return {
    backend,
    limitBytes: tf.env().getNumber(WASM_MEMORY_BYTES),
    usedBytes: tf.memory().numBytes,
  };
}

/** Bytes left of `capacity`: its limit less what its tensors hold. */
export function freeBytes(capacity: BackendCapacity): number {
  return capacity.limitBytes - capacity.usedBytes;
}

/** Bytes as the refusals print them (`4.94 GB`). */
export const gb = (bytes: number): string => `${(bytes / 1e9).toFixed(2)} GB`;

/**
 * Throws when the weights `counts` (as the files declare them) cannot be held in what is left of
 * `capacity` (default: the backend in use's), naming what they need, what the backend holds and
 * what would fit (an int8 form where its bytes would). `where`: the caller
 * (`loadKerasHubPreset`), `what`: the model's source.
 */
export function checkWeightsFit(
  where: string,
  what: string,
  counts: WeightCounts,
  capacity: BackendCapacity | null = backendCapacity(),
): void {
  if (capacity == null) return;
  const need = counts.float * BYTES_PER_WEIGHT + counts.int8;
  const free = freeBytes(capacity);
  if (need <= free) return;
  const n = (v: number) => v.toLocaleString('en-US');
  const held =
    counts.int8 === 0
      ? `${n(counts.float)} values held as float32, 4 bytes each`
      : `${n(counts.float)} float32 values, 4 bytes each, and ${n(counts.int8)} int8 values, 1 byte each`;
  // the int8 form: Keras' model.quantize("int8") of the float weights (scales aside)
  const int8Fits = counts.float > 0 && counts.float + counts.int8 <= free;
  throw new Error(
    `${where}: ${what} does not fit tfjs-${capacity.backend}'s memory: its weights need ` +
      `${gb(need)} (${held}), and tfjs-${capacity.backend}'s memory holds at most ` +
      `${gb(capacity.limitBytes)}, of which ${gb(capacity.usedBytes)} are in use ` +
      `(TFJS_ATTENTION_WASM_MEMORY_BYTES). What fits: ` +
      (int8Fits
        ? `its int8 form (a preset of Keras' model.quantize("int8"): about ` +
          `${gb(counts.float + counts.int8)}, 1 byte a weight value), `
        : '') +
      `tfjs-node's 'tensorflow' backend (no such limit), the 'webgl' or 'webgpu' backend ` +
      `(weights in GPU memory), or a model of at most ` +
      `${n(Math.max(0, Math.floor(free / BYTES_PER_WEIGHT)))} float32 weight values.`,
  );
}

/** The weight values of manifest entries by how they are held (int8 bytes: dtype `bool`). */
export function weightCounts(
  specs: ReadonlyArray<{shape: readonly number[]; dtype?: string}>,
): WeightCounts {
  const out: WeightCounts = {float: 0, int8: 0};
  for (const s of specs) {
    const size = s.shape.reduce((a, d) => a * d, 1);
    if (s.dtype === 'bool') out.int8 += size;
    else out.float += size;
  }
  return out;
}
