/**
 * Which implementation of the compiled step's kernels (kernels/step_kernels_api.ts) runs: the one
 * place that chooses. The package's WebAssembly SIMD module of the whole interface
 * (kernels/step_kernels.ts) where it loaded (`generate` awaits `stepKernelsReady()` first) and
 * TFJS_ATTENTION_SIMD allows it; else the plain-JavaScript loops, with the products of several
 * rows (a prefill's) handed to the package's SIMD sgemm (kernels/wasm_kernels.ts) on the same
 * memory where that module loaded.
 */
import {StepActivation, StepKernels} from '../kernels/step_kernels_api';
import {stepKernelsOn} from '../kernels/step_kernels';
import {jsStepKernels} from '../kernels/step_kernels_js';
import {kernelsOnMemory} from '../kernels/wasm_kernels';

/** Rows from which a product runs the SIMD sgemm (which packs the whole weight at each call). */
export const SGEMM_ROWS = 4;

/** The kernels on `memory`; `alloc` gives scratch in it (freed with the memory's buffers). */
export function chooseStepKernels(
  memory: WebAssembly.Memory,
  alloc: (bytes: number) => number,
): StepKernels {
  const whole = stepKernelsOn(memory);
  if (whole != null) return whole;
  const js = jsStepKernels(memory);
  const simd = kernelsOnMemory(memory);
  if (simd == null) return js;
  const work = alloc(simd.sgemmWorkBytes());
  /** Bias and activation after a product, row by row. */
  const finish = (rows: number, n: number, bias: number, act: StepActivation, out: number) => {
    if (bias !== 0)
      for (let r = 0; r < rows; r++) js.add(n, out + r * n * 4, bias, out + r * n * 4);
    if (act !== StepActivation.None) js.activate(rows * n, out, act, out);
  };
  return {
    ...js,
    dense(rows, k, n, x, w, bias, act, out) {
      if (rows < SGEMM_ROWS) return js.dense(rows, k, n, x, w, bias, act, out);
      simd.sgemm(1, rows, n, k, x, 0, w, 0, out, work);
      finish(rows, n, bias, act, out);
    },
    denseT(rows, k, n, x, w, out) {
      if (rows < SGEMM_ROWS) return js.denseT(rows, k, n, x, w, out);
      simd.sgemm(1, rows, n, k, x, 0, w, 1, out, work);
    },
  };
}
