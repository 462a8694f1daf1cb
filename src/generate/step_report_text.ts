/**
 * A `generate` call's step report (`onCompile`) as one line for people: which step ran, and why
 * not the compiled one. The demo page and the training CLI print it.
 */
import type {StepReport} from './step_report';

/**
 * One line saying which step a `generate` call runs: `compiled step: ...` (its ops, kernels and
 * memory) or `eager step (not compiled): <reason>` (the layer that declined and why, or what else
 * stood in the way).
 *
 * ```js
 * await generate(model, prompts, {maxLength: 32, onCompile: (r) => console.log(stepReportText(r))});
 * ```
 */
export function stepReportText(report: StepReport): string {
  if (!report.compiled || report.run == null) {
    return `eager step (not compiled): ${report.reason ?? 'no reason given'}`;
  }
  const {ops, kernels, memory} = report.run;
  const where =
    memory === 'heap' ? "weights read in place on tfjs-wasm's heap" : 'weights in its own memory';
  const kind =
    kernels === 'simd-relaxed'
      ? 'WebAssembly SIMD kernels (int8 products on relaxed SIMD)'
      : kernels === 'simd'
        ? 'WebAssembly SIMD kernels'
        : 'JavaScript kernels';
  return (
    `compiled step: ${ops} ops on ${kind}, ${where}` +
    (report.programReused ? ' (program reused)' : '')
  );
}
