/**
 * The memory of a compiled decoding step: on tfjs' wasm backend the backend's own heap (buffers
 * from its `_malloc`, freed with its `_free`; weights read in place at their tensors' offsets),
 * on tfjs' cpu and tensorflow backends a WebAssembly.Memory of its own (buffers from a bump
 * allocator, each weight copied in once). The int8 weights of int8 layers are held as bytes
 * (ops/int8.ts) and read as they are held, in place on tfjs-wasm's heap: only a head-major kernel
 * (Gemma's) is packed transposed into a buffer of the memory, once. Other backends (webgl,
 * webgpu) have none: their weights live on the GPU, and `generate` keeps the eager stepper there.
 *
 * A memory serves one run at a time (`beginRun` .. `endRun`: the run's buffers) and may serve
 * several (kept_step_memory.ts keeps it with its model between `generate` calls): the weights
 * copied in and packed stay, each checked at each use against its tensor's data (a weight that
 * `setWeights`, an optimizer or `assign` changed has new data: it is copied or packed again).
 */
import * as tf from '@tensorflow/tfjs-core';

import type {StepKernels} from '../kernels/step_kernels_api';
import {WeightArena} from '../kernels/weight_arena';

/** The parts of tfjs' wasm backend (BackendWasm) used here. */
interface WasmBackend {
  dataIdMap: {get(dataId: tf.DataId): {memoryOffset: number} | undefined};
  wasm: {
    _malloc(bytes: number): number;
    _free(offset: number): void;
    asm?: Record<string, unknown>;
    wasmExports?: Record<string, unknown>;
  };
}

/** What a memory has done over its life (tests, reports). */
export interface StepMemoryCounts {
  /** The runs' buffers allocated and not freed yet (the weights it keeps aside). */
  live: number;
  /** Buffers allocated in all. */
  allocated: number;
  /** Weights copied into the memory (0 on wasm, where weights are read in place). */
  uploads: number;
  /**
   * int8 kernels packed transposed into the memory (each once, and again when its tensor's data
   * changed).
   */
  packed: number;
  /** Buffers it keeps from run to run: weights copied in, int8 weights packed (0 once disposed). */
  kept: number;
  /** Runs begun on it (`beginRun`). */
  runs: number;
  /** Times a memory of its own grew (by half its size or more at a time; 0 on wasm). */
  grows: number;
}

/** A step's memory. */
export interface StepMemory {
  readonly memory: WebAssembly.Memory;
  /** `heap`: tfjs-wasm's; `own`: a memory of its own. */
  readonly kind: 'heap' | 'own';
  /** A zeroed 16-aligned buffer of `bytes` (never at offset 0); in a run, freed by `endRun`. */
  alloc(bytes: number): number;
  /**
   * Where a float32 weight's values are (read in place, or copied in once, and again when the
   * tensor's data changed).
   */
  weight(t: tf.Tensor): number;
  /**
   * Where an int8 weight's bytes are (`t` of dtype `bool`, ops/int8.ts; another dtype is an
   * error). `transposeRows` 0: as it is held (in place on tfjs-wasm's heap; copied in once, as
   * `weight`, on a memory of its own). `transposeRows` > 0: `t` is a kernel `[transposeRows, n]`
   * packed transposed (`[n, transposeRows]`, `denseInt8`'s layout) into a buffer of the memory
   * (once per layout, and again when the tensor's data changed); `heads` > 1: a head-major kernel
   * `[heads, transposeRows, headDim]` (Gemma's `btd,ndh->btnh`), each head's `[transposeRows,
   * headDim]` packed transposed after the one before, so the whole reads as the `[heads *
   * headDim, transposeRows]` of `denseInt8`. Packed by `kernels.transposeInt8`, on tfjs-wasm's
   * heap from the bytes in place, on a memory of its own a block of rows at a time through a
   * scratch.
   */
  int8Weight(
    t: tf.Tensor,
    kernels: StepKernels,
    transposeRows?: number,
    heads?: number,
    checkRange?: boolean,
  ): number;
  readonly counts: StepMemoryCounts;
  /** Starts a run: the buffers `alloc` gives from here on are the run's. */
  beginRun(): void;
  /** Frees the run's buffers; the weights copied in and packed stay for the next run. */
  endRun(): void;
  /**
   * Frees every buffer. On a memory that aliases its weights (`stepMemory(true)`), each tensor
   * still reading it first gets its values back as an array of its own, unless `keepViews`: the
   * tensors are about to be freed with their model, and any left (a clone) keeps the memory's
   * buffer alive until it is disposed.
   */
  dispose(keepViews?: boolean): void;
}

const noCounts = (): StepMemoryCounts => ({
  live: 0,
  allocated: 0,
  uploads: 0,
  packed: 0,
  kept: 0,
  runs: 0,
  grows: 0,
});

/**
 * The step's memory on the current backend, or why there is none. `aliasWeights` (a memory kept
 * with its model): on cpu and tensorflow, each weight copied in becomes its tensor's values
 * (weight_aliases.ts), so that the weights are held once.
 */
export function stepMemory(
  aliasWeights = false,
  arena: WeightArena | null = null,
): {memory: StepMemory; reason: null} | {memory: null; reason: string} {
  const name = tf.getBackend();
  if (name === 'wasm') {
    const heap = wasmHeapMemory(tf.backend() as unknown as WasmBackend);
    return heap == null
      ? {memory: null, reason: "tfjs-wasm's heap is not reachable (a shared or unknown build)"}
      : {memory: heap, reason: null};
  }
  if (name === 'cpu' || name === 'tensorflow') {
    return {memory: ownMemory(aliasWeights, arena), reason: null};
  }
  return {
    memory: null,
    reason: `the ${name} backend keeps its weights on the GPU (the compiled step runs on cpu, wasm and tensorflow)`,
  };
}

function memoryOf(backend: WasmBackend): WebAssembly.Memory | null {
  const exports = backend.wasm?.asm ?? backend.wasm?.wasmExports;
  const m = exports?.memory;
  return m instanceof WebAssembly.Memory ? m : null;
}

function wasmHeapMemory(backend: WasmBackend): StepMemory | null {
  const memory = memoryOf(backend);
  if (memory == null || typeof backend.wasm?._malloc !== 'function') return null;
  /** The run's buffers (raw offsets), and the ones kept from run to run. */
  const taken = new Set<number>();
  const keptRaw = new Set<number>();
  const counts = noCounts();
  const offsetOf = (t: tf.Tensor) => {
    const data = backend.dataIdMap.get(t.dataId);
    if (data == null)
      throw new Error(`generate: a weight (tensor ${t.id}) is not on the wasm backend`);
    return data.memoryOffset;
  };
  const malloc = (bytes: number, into: Set<number>) => {
    const raw = backend.wasm._malloc(bytes + 16) >>> 0;
    if (raw === 0) throw new Error(`generate: the wasm heap has no ${bytes} bytes left`);
    into.add(raw);
    counts.allocated++;
    const at = (raw + 15) & ~15;
    new Uint8Array(memory.buffer, at, bytes).fill(0);
    return at;
  };
  const freeRun = () => {
    for (const raw of taken) {
      backend.wasm._free(raw);
      counts.live--;
    }
    taken.clear();
  };
  const heap: StepMemory = {
    memory,
    kind: 'heap',
    counts,
    alloc(bytes) {
      const at = malloc(bytes, taken);
      counts.live++;
      return at;
    },
    weight: offsetOf,
    // the bytes read in place from the heap (after any allocation, which may grow it)
    int8Weight: packer(
      (bytes) => {
        counts.kept++;
        return malloc(bytes, keptRaw);
      },
      () => memory,
      counts,
      offsetOf,
      (t) => new Uint8Array(memory.buffer, offsetOf(t), t.size),
      offsetOf,
    ),
    beginRun() {
      counts.runs++;
    },
    endRun: freeRun,
    dispose() {
      freeRun();
      for (const raw of keptRaw) backend.wasm._free(raw);
      keptRaw.clear();
      counts.kept = 0;
    },
  };
  return heap;
}

/**
 * The bytes a memory of its own takes in at a time to pack an int8 kernel transposed (1 MB): a
 * kernel in whole multiples of 16 rows (16 rows, more than 2^20 bytes, for a kernel wider than
 * 2^16).
 */
const SCRATCH_BYTES = 1 << 20;

/**
 * `int8Weight` of a memory, for int8 weights held as bytes (ops/int8.ts): as they are held
 * (`transposeRows` 0) by `asHeld` (tfjs-wasm's heap: in place; a memory of its own: copied in
 * once); a head-major kernel packed transposed (once per tensor and layout, again into the same
 * buffer when its data changed) into a buffer from `keep` by the kernels' `transposeInt8`, from
 * its bytes in place at `offsetInMemory`, or copied in blocks through a scratch (`bytesOf`).
 */
function packer(
  keep: (bytes: number) => number,
  memoryOf: () => WebAssembly.Memory,
  counts: StepMemoryCounts,
  asHeld: (t: tf.Tensor) => number,
  bytesOf: (t: tf.Tensor) => Uint8Array,
  offsetInMemory?: (t: tf.Tensor) => number,
): (
  t: tf.Tensor,
  kernels: StepKernels,
  transposeRows?: number,
  heads?: number,
  checkRange?: boolean,
) => number {
  const done = new Map<string, {at: number; data: tf.DataId}>();
  /** A memory of its own: where blocks of bytes are copied in to be packed. */
  let scratch = {at: 0, bytes: 0};
  /** The data each tensor had when checked for -128 (relaxed SIMD). */
  const inRange = new Map<number, tf.DataId>();
  return (t, kernels, transposeRows = 0, heads = 1, checkRange = true) => {
    if (t.dtype !== 'bool') {
      throw new Error(
        `generate: an int8 weight (tensor ${t.id}) of dtype ${t.dtype}; expected int8 values ` +
          'held as bytes (ops/int8.ts)',
      );
    }
    if (checkRange && kernels.kind === 'simd-relaxed' && inRange.get(t.id) !== t.dataId) {
      // the relaxed products negate weights: -128 (which Keras never writes) would wrap
      const at = bytesOf(t).indexOf(0x80);
      if (at >= 0) {
        throw new Error(
          `generate: an int8 weight (tensor ${t.id}, shape [${t.shape}]) holds -128 at index ` +
            `${at}; the relaxed SIMD int8 products (TFJS_ATTENTION_RELAXED_SIMD) take Keras' ` +
            'range, [-127, 127]: turn the flag off for this model',
        );
      }
      inRange.set(t.id, t.dataId);
    }
    const k = transposeRows;
    if (k < 0 || !Number.isInteger(k) || (k > 0 && t.size % k !== 0)) {
      throw new Error(
        `generate: an int8 kernel of ${t.size} values (tensor ${t.id}) cannot be rows of ${k}`,
      );
    }
    if (
      heads < 1 ||
      !Number.isInteger(heads) ||
      (heads > 1 && (k === 0 || t.size % (k * heads) !== 0))
    ) {
      throw new Error(
        `generate: an int8 kernel of ${t.size} values (tensor ${t.id}) cannot be ${heads} heads ` +
          `of rows of ${k}`,
      );
    }
    if (k === 0) return asHeld(t);
    const key = `${t.id}/${k}/${heads}`;
    const known = done.get(key);
    if (known != null && known.data === t.dataId) return known.at;
    // a tensor whose data changed (assign) is packed again into its buffer
    const at = known?.at ?? keep(t.size);
    // each head's values (one head: the whole tensor) packed transposed in its own place
    const per = t.size / heads;
    const n = per / k;
    for (let h = 0; h < heads; h++) {
      const from = h * per;
      if (offsetInMemory != null) {
        kernels.transposeInt8(k, n, offsetInMemory(t) + from, at + from, k);
        continue;
      }
      // a memory of its own: rows of the kernel copied in blocks into a scratch of the memory
      const rows = Math.max(16, Math.floor(SCRATCH_BYTES / n / 16) * 16);
      const block = rows * n;
      if (scratch.bytes < block) scratch = {at: keep(block), bytes: block};
      // read after the scratch is taken: a tensor whose values are a view of this memory
      // (weight_aliases.ts) has a new view once the memory grew
      const bytes = bytesOf(t).subarray(from, from + per);
      for (let i = 0; i < per; i += block) {
        const size = Math.min(block, per - i);
        new Uint8Array(memoryOf().buffer, scratch.at, size).set(bytes.subarray(i, i + size));
        kernels.transposeInt8(size / n, n, scratch.at, at + from + i / n, k);
      }
    }
    counts.packed++;
    done.set(key, {at, data: t.dataId});
    return at;
  };
}

/**
 * A memory of its own, on `arena`'s memory and from its first free byte on: a new arena, or the
 * one a loader filled with the model's weights (their tensors' values are views of it: each read
 * where it is, no copy).
 */
function ownMemory(aliasWeights: boolean, given: WeightArena | null): StepMemory {
  const arena = given ?? new WeightArena();
  const memory = arena.memory;
  const aliases = aliasWeights || given != null ? arena.aliases : null;
  let top = arena.top;
  /** Where the kept buffers end, and where the run in progress began (its buffers above). */
  let keptTop = top;
  let runFrom = -1;
  /** The highest byte ever given: buffers below it may hold a former run's values. */
  let written = top;
  const counts = noCounts();
  const weights = new Map<number, {at: number; data: tf.DataId}>();
  const alloc = (bytes: number) => {
    const at = top;
    top = (top + bytes + 15) & ~15;
    // grown by half or more at a time (GPT-2 small's weights in steps of their sizes: 190 ms of
    // growing), every weight's view followed
    if (arena.reserve(top)) counts.grows++;
    counts.allocated++;
    // a fresh memory is zeroed; a former run's bytes are not
    if (at < written) new Uint8Array(memory.buffer, at, Math.min(bytes, written - at)).fill(0);
    written = Math.max(written, top);
    return at;
  };
  /** A buffer kept from run to run (weights), after the run's when in a run. */
  const keep = (bytes: number) => {
    const at = alloc(bytes);
    keptTop = top;
    counts.kept++;
    return at;
  };
  const endRun = () => {
    if (runFrom >= 0) top = Math.max(runFrom, keptTop);
    runFrom = -1;
    counts.live = 0;
  };
  /**
   * A weight copied in once (float32 values, or int8 bytes), and again in place when its tensor's
   * data changed (assign: setWeights, an optimizer); with `aliasWeights`, the copy becomes the
   * tensor's values (the former data, if still alive, keeps values of its own).
   */
  const copyIn = (t: tf.Tensor) => {
    const known = weights.get(t.id);
    if (known != null && known.data === t.dataId) return known.at;
    if (known != null) aliases?.release(known.data);
    // loaded into this memory (weight_arena.ts), or its copy here already its values: read in place
    const held = known == null ? (aliases?.offsetOf(t) ?? null) : null;
    if (held != null) {
      weights.set(t.id, {at: held, data: t.dataId});
      return held;
    }
    const int8 = t.dtype === 'bool';
    const at = known?.at ?? keep(t.size * (int8 ? 1 : 4));
    if (int8) new Uint8Array(memory.buffer, at, t.size).set(t.dataSync() as Uint8Array);
    else new Float32Array(memory.buffer, at, t.size).set(t.dataSync() as Float32Array);
    aliases?.alias(t, at);
    counts.uploads++;
    weights.set(t.id, {at, data: t.dataId});
    return at;
  };
  const own: StepMemory = {
    memory,
    kind: 'own',
    counts,
    alloc(bytes) {
      counts.live++;
      return alloc(bytes);
    },
    weight: copyIn,
    int8Weight: packer(
      keep,
      () => memory,
      counts,
      copyIn,
      (t) => t.dataSync() as Uint8Array,
    ),
    beginRun() {
      endRun();
      runFrom = top;
      counts.runs++;
    },
    endRun,
    dispose(keepViews = false) {
      endRun(); // the memory goes with its last reference
      if (!keepViews) aliases?.releaseAll();
      counts.kept = 0;
      weights.clear();
    },
  };
  return own;
}
