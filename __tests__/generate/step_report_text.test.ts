/**
 * `stepReportText` (src/generate/step_report_text.ts): the line the demo and the training CLI
 * print from `generate`'s `onCompile` report, for a compiled call and for one that is not
 * compiled (with its reason).
 */
import * as tf from '@tensorflow/tfjs';

import {generate, stepReportText} from '../../src';
import type {StepReport} from '../../src';

/** Embedding -> Dense logits (position-wise: cached decoding, compiled on cpu). */
function tiny(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const x = tf.layers.embedding({inputDim: 11, outputDim: 8}).apply(ids) as tf.SymbolicTensor;
  const logits = tf.layers.dense({units: 11}).apply(x) as tf.SymbolicTensor;
  return tf.model({inputs: ids, outputs: logits});
}

async function reportOf(model: tf.LayersModel, useCache?: boolean): Promise<StepReport> {
  let report: StepReport | null = null;
  const out = await generate(model, [[1, 2]], {
    maxLength: 5,
    useCache,
    onCompile: (r) => {
      report = r;
    },
  });
  out.dispose();
  return report as unknown as StepReport;
}

describe('stepReportText', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('a compiled call: its ops, kernels and memory; then the program reused', async () => {
    const model = tiny();
    try {
      const first = await reportOf(model);
      expect(first.compiled).toBe(true);
      const ops = first.run?.ops as number;
      const kernels = {
        simd: 'WebAssembly SIMD kernels',
        'simd-relaxed': 'WebAssembly SIMD kernels (int8 products on relaxed SIMD)',
        js: 'JavaScript kernels',
      }[first.run!.kernels];
      expect(stepReportText(first)).toBe(
        `compiled step: ${ops} ops on ${kernels}, weights in its own memory`,
      );
      expect(stepReportText(await reportOf(model))).toBe(
        `compiled step: ${ops} ops on ${kernels}, weights in its own memory (program reused)`,
      );
      // each kind of kernels said (the int8 products on relaxed SIMD: TFJS_ATTENTION_RELAXED_SIMD)
      const withKernels = (k: 'simd' | 'simd-relaxed' | 'js') =>
        stepReportText({...first, run: {...first.run!, kernels: k}});
      expect(withKernels('simd-relaxed')).toBe(
        `compiled step: ${ops} ops on WebAssembly SIMD kernels (int8 products on relaxed SIMD), weights in its own memory`,
      );
      expect(withKernels('simd')).toMatch(/ on WebAssembly SIMD kernels, /);
      expect(withKernels('js')).toMatch(/ on JavaScript kernels, /);
    } finally {
      model.dispose();
    }
  });

  it('a call that is not compiled says why', async () => {
    const model = tiny();
    try {
      expect(stepReportText(await reportOf(model, false))).toBe(
        'eager step (not compiled): useCache is false: each step recomputes the whole prefix',
      );
    } finally {
      model.dispose();
    }
  });
});
