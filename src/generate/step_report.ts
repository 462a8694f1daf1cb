/**
 * What `generate` tells its caller about the step it runs (`onCompile`): whether the compiled
 * step runs, why not (the layer that declined and why, or why no cache), whether its program was
 * compiled by an earlier call, and the compiled run's counters.
 */
import type {StepKernels} from '../kernels/step_kernels_api';
import type {StepMemory, StepMemoryCounts} from './step_memory';

/** The counters of a compiled run, updated while the `generate` call runs. */
export interface CompiledRunReport {
  /**
   * The kernels' implementation: 'simd' (the WebAssembly SIMD module), 'simd-relaxed' (the same,
   * its int8 products on relaxed SIMD: TFJS_ATTENTION_RELAXED_SIMD) or 'js'.
   */
  kernels: StepKernels['kind'];
  /** `heap`: tfjs-wasm's heap, weights in place; `own`: a memory of its own, weights copied in. */
  memory: StepMemory['kind'];
  /** Program runs (a prefill counts one). */
  runs: number;
  /** The ops of the program. */
  ops: number;
  /** The weights' offsets in the memory, in the program's order. */
  weightOffsets: number[];
  /** The weights' tensors' ids, in the same order. */
  weightIds: number[];
  /** The int8 weights' offsets (int8 values packed in the memory), in the program's order. */
  packedOffsets: number[];
  /** Their tensors' ids, in the same order. */
  packedIds: number[];
  /** The memory's counts (buffers live and allocated, weights copied in). */
  counts: StepMemoryCounts;
}

/** Which step a `generate` call runs, given to its `onCompile` option once the step is chosen. */
export interface StepReport {
  /** Whether the compiled step runs (one program of kernel ops, no tfjs kernel per step). */
  compiled: boolean;
  /**
   * Why not, or null when it runs: the layer that declined and why (`layer 'x' (Class): ...`),
   * or why the model decodes without a cache, or what else stood in the way.
   */
  reason: string | null;
  /** Whether the program was compiled by an earlier call on the same model and reused. */
  programReused: boolean;
  /** The compiled run's counters (runs, memory, weights), updated until the call ends; null when not compiled. */
  run: CompiledRunReport | null;
}

/** The report of a call that does not run the compiled step, and why. */
export function notCompiled(reason: string, programReused = false): StepReport {
  return {compiled: false, reason, programReused, run: null};
}
