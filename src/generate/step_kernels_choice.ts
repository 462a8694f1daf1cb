/**
 * Which implementation of the compiled step's kernels (kernels/step_kernels_api.ts) runs: the one
 * place that chooses. The WebAssembly SIMD module, once it lands, is preferred here
 * (`stepKernelsOn(memory) ?? jsStepKernels(memory)`); the plain-JavaScript loops run where it is
 * missing.
 */
import type {StepKernels} from '../kernels/step_kernels_api';
import {jsStepKernels} from '../kernels/step_kernels_js';

/** The kernels on `memory`. */
export function chooseStepKernels(memory: WebAssembly.Memory): StepKernels {
  return jsStepKernels(memory);
}
