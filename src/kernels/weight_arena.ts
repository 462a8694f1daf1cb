/**
 * A WebAssembly.Memory in which a model's weights live from the moment they are loaded, on tfjs'
 * cpu and tensorflow backends: the loader writes each weight's bytes into a buffer of the arena
 * and makes its tensor with a view of it as values (`holdWeight`), so that the compiled step,
 * which runs in a memory of its own there, takes the arena as that memory and reads the weights
 * where they are: no copy at the first `generate` call, and never the weights twice.
 *
 * The arena grows by half its size or more at a time (every view followed: weight_aliases.ts).
 * `arenaOf(model)` is the arena a loader filled for a model, until the step takes it
 * (`takeArena`). `withWeightArena(arena, build)` makes it the one `holdWeight` callers use while
 * `build` runs (the loaders' binding of the weights).
 */
import * as tf from '@tensorflow/tfjs-core';

import {stepKernelsHeapBase} from './step_kernels';
import {WeightAliases} from './weight_aliases';

const PAGE = 65536;

/** A memory of its own with a bump allocator, whose tensors' views follow it as it grows. */
export class WeightArena {
  readonly memory = new WebAssembly.Memory({initial: 1});
  /** The backend its tensors were made on. */
  readonly backend = tf.getBackend();
  readonly aliases = new WeightAliases(this.memory);
  /**
   * The next free byte: offset 0 means "absent" to the step's kernels, and the package's SIMD
   * modules, which may be instantiated on this memory, keep their own data below 1024 / below the
   * step module's base.
   */
  top = Math.max(1024, stepKernelsHeapBase());
  /** Times the memory grew. */
  grows = 0;
  /** Weights placed by `holdWeight`. */
  held = 0;

  /**
   * Makes the memory at least `end` bytes long: by half its size or more at a time (each grow may
   * copy or remap the whole memory, and pages never written take no resident memory), past what
   * the engine allows only what is needed; every tensor's view is made again on the new buffer.
   * Returns whether it grew.
   */
  reserve(end: number): boolean {
    const pages = Math.ceil(end / PAGE) - this.memory.buffer.byteLength / PAGE;
    if (pages <= 0) return false;
    const more = Math.max(pages, Math.ceil(this.memory.buffer.byteLength / PAGE / 2));
    try {
      this.memory.grow(more);
    } catch {
      this.memory.grow(pages);
    }
    this.grows++;
    this.aliases.follow();
    return true;
  }

  /**
   * A tensor of `shape` whose values are a new 16-aligned buffer of the arena (float32, 4 bytes a
   * value; `bool`, the int8 bytes of ops/int8.ts, 1), filled by `fill(bytes, 0)` before the tensor
   * is made.
   */
  holdWeight(
    shape: readonly number[],
    dtype: 'float32' | 'bool',
    fill: (out: Uint8Array, at: number) => void,
  ): tf.Tensor {
    const size = shape.reduce((p, d) => p * d, 1);
    const bytes = size * (dtype === 'bool' ? 1 : 4);
    const at = this.top;
    this.top = (at + bytes + 15) & ~15;
    this.reserve(this.top);
    fill(new Uint8Array(this.memory.buffer, at, bytes), 0);
    const values =
      dtype === 'bool'
        ? new Uint8Array(this.memory.buffer, at, size)
        : new Float32Array(this.memory.buffer, at, size);
    const t = tf.tensor(values, [...shape], dtype);
    if (!this.aliases.alias(t, at)) {
      // the backend copied the values: nothing of the arena is the tensor's
      this.top = at;
      return t;
    }
    this.held++;
    return t;
  }
}

/**
 * The most a loader puts into an arena (3 GiB): a WebAssembly memory holds at most 4 GiB, and the
 * step's caches and buffers go after the weights.
 */
export const ARENA_MAX_BYTES = 3 * 2 ** 30;

/**
 * A new arena for weights of these dtypes and byte sizes, or null where none is used: another
 * backend than cpu and tensorflow, nothing it takes, or more than {@link ARENA_MAX_BYTES}.
 */
export function weightArenaFor(
  weights: ReadonlyArray<{dtype: tf.DataType; bytes: number}>,
): WeightArena | null {
  const bytes = weights.filter((w) => arenaTakes(w.dtype)).reduce((n, w) => n + w.bytes, 0);
  return bytes > 0 && bytes <= ARENA_MAX_BYTES ? new WeightArena() : null;
}

const arenas = new WeakMap<object, WeightArena>();
let current: WeightArena | null = null;

/** Runs `build` with `arena` as the arena of {@link currentWeightArena}; restored after. */
export function withWeightArena<T>(arena: WeightArena, build: () => T): T {
  const before = current;
  current = arena;
  try {
    return build();
  } finally {
    current = before;
  }
}

/** The arena the weights being loaded go into, or null. */
export function currentWeightArena(): WeightArena | null {
  return current;
}

/** Records that `model`'s weights were loaded into `arena`. */
export function setArenaOf(model: object, arena: WeightArena): void {
  arenas.set(model, arena);
}

/**
 * The arena `model`'s weights were loaded into, given up to the caller (the step), or null (none,
 * or made on another backend than the one in use).
 */
export function takeArena(model: object): WeightArena | null {
  const arena = arenas.get(model) ?? null;
  arenas.delete(model);
  return arena != null && arena.backend === tf.getBackend() ? arena : null;
}

/** Whether weights of `dtype` go into an arena on the backend in use: which the step reads there. */
export function arenaTakes(dtype: tf.DataType): boolean {
  const name = tf.getBackend();
  // tfjs-node: a float32 weight is taken into TensorFlow by the prefill's products (and any
  // op), which would leave its arena copy unused; int8 bytes stay with the step
  if (name === 'tensorflow') return dtype === 'bool';
  return name === 'cpu' && (dtype === 'float32' || dtype === 'bool');
}
