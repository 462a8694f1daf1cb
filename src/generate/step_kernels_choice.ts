/**
 * Which implementation of the compiled step's kernels (kernels/step_kernels_api.ts) runs: the one
 * place that chooses. The package's WebAssembly SIMD module of the whole interface
 * (kernels/step_kernels.ts) where it loaded (`generate` awaits `stepKernelsReady()` first) and
 * TFJS_ATTENTION_SIMD allows it; else the plain-JavaScript loops on the same memory.
 */
import type {StepKernels} from '../kernels/step_kernels_api';
import {stepKernelsOn} from '../kernels/step_kernels';
import {jsStepKernels} from '../kernels/step_kernels_js';

/** The kernels on `memory`. */
export function chooseStepKernels(memory: WebAssembly.Memory): StepKernels {
  return stepKernelsOn(memory) ?? jsStepKernels(memory);
}
