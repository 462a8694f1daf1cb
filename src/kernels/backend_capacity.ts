/**
 * Whether a model's weights fit the memory of the backend in use, asked before a loader allocates
 * any of them: where the package knows a hard limit, tfjs-wasm's heap (one WebAssembly memory,
 * at most 4 GiB in tfjs-wasm 4.22; TFJS_ATTENTION_WASM_MEMORY_BYTES, kernels/flags.ts). A model
 * past it would otherwise fail part way, as "memory access out of bounds" or an allocation error
 * after gigabytes were read. The weights are held as float32 (4 bytes a value: int8 ones too,
 * whole numbers in float32 tensors). Other backends set no limit the package can read: cpu and
 * tfjs-node hold tensors in memory of their own, webgl and webgpu in GPU memory.
 */
import * as tf from '@tensorflow/tfjs-core';

import {WASM_MEMORY_BYTES} from './flags';

/** Bytes the package holds per weight value on the backends (float32, int8 weights included). */
export const BYTES_PER_WEIGHT = 4;

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
 * Throws when `values` weight values (as the files declare them) cannot be held in what is left
 * of `capacity` (default: the backend in use's), naming what they need, what the backend holds
 * and what would fit. `where`: the caller (`loadKerasHubPreset`), `what`: the model's source.
 */
export function checkWeightsFit(
  where: string,
  what: string,
  values: number,
  capacity: BackendCapacity | null = backendCapacity(),
): void {
  if (capacity == null) return;
  const need = values * BYTES_PER_WEIGHT;
  const free = freeBytes(capacity);
  if (need <= free) return;
  throw new Error(
    `${where}: ${what} does not fit tfjs-${capacity.backend}'s memory: its weights need ` +
      `${gb(need)} (${values.toLocaleString('en-US')} values held as float32, 4 bytes each, int8 ` +
      `weights included), and tfjs-${capacity.backend}'s memory holds at most ` +
      `${gb(capacity.limitBytes)}, of which ${gb(capacity.usedBytes)} are in use ` +
      `(TFJS_ATTENTION_WASM_MEMORY_BYTES). What fits: tfjs-node's 'tensorflow' backend (no such ` +
      `limit), the 'webgl' or 'webgpu' backend (weights in GPU memory), or a model of at most ` +
      `${Math.max(0, Math.floor(free / BYTES_PER_WEIGHT)).toLocaleString('en-US')} weight values.`,
  );
}
