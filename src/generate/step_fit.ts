/**
 * Whether a compiled step's memory fits tfjs-wasm's, asked before a run allocates any of it
 * (kernels/backend_capacity.ts: at most 4 GiB, TFJS_ATTENTION_WASM_MEMORY_BYTES). On tfjs-wasm
 * the step reads float32 and int8 weights in place, but packs a head-major int8 kernel (Gemma's
 * query, key and value) transposed into a buffer of its own (1 byte a value, kept with the model)
 * and holds each attention's keys and values
 * (`[B, maxLength, width]` float32, twice). A step that does not fit is not compiled: `generate`
 * runs the eager stepper and says why, where the run would otherwise fail part way in the heap's
 * allocator. Other backends hold the step in a memory of their own, with no limit read here.
 */
import {backendCapacity, freeBytes, gb} from '../kernels/backend_capacity';
import type {StepProgram} from './program_builder';

/**
 * The step's bytes beyond the model's weights: int8 kernels packed transposed (unless `packed`),
 * caches.
 */
export function stepBytes(
  program: StepProgram,
  batch: number,
  maxLength: number,
  packed: boolean,
): {int8: number; caches: number} {
  const int8 = packed
    ? 0
    : program.packed.reduce((n, p) => n + (p.transposeRows > 0 ? p.tensor.size : 0), 0);
  const caches = program.caches.reduce((n, width) => n + 2 * batch * maxLength * width * 4, 0);
  return {int8, caches};
}

/**
 * Why the step of `program` for `batch` rows of `maxLength` does not fit what is left of the
 * backend's memory, or null (it fits, or the backend sets no limit the package reads).
 * `packed`: its int8 weights are packed already (a memory kept with the model).
 */
export function stepFitReason(
  program: StepProgram,
  batch: number,
  maxLength: number,
  packed: boolean,
): string | null {
  const capacity = backendCapacity();
  if (capacity == null) return null;
  const {int8, caches} = stepBytes(program, batch, maxLength, packed);
  const free = freeBytes(capacity);
  if (int8 + caches <= free) return null;
  return (
    `the compiled step needs ${gb(int8 + caches)} of tfjs-${capacity.backend}'s memory ` +
    `(int8 weights packed: ${gb(int8)}, key / value caches: ${gb(caches)}) and ${gb(free)} ` +
    `are left of its ${gb(capacity.limitBytes)} (TFJS_ATTENTION_WASM_MEMORY_BYTES)`
  );
}
