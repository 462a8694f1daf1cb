/**
 * A compiled step whose memory does not fit what is left of tfjs-wasm's (src/generate/step_fit.ts:
 * its head-major int8 kernels packed transposed, 1 byte a value, and its key / value caches, against
 * TFJS_ATTENTION_WASM_MEMORY_BYTES) is not compiled: `generate` runs the eager stepper, says why
 * in its report, and gives the same tokens. The fixture LM (int8/decoder_lm: a tied
 * ReversibleEmbedding [100, 32], two TransformerDecoders of width 32 with 4 heads and a
 * feed-forward of 64) quantized by `quantize(model, 'int8')`.
 */
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {generate, loadKerasModel, quantize, releaseGenerateMemory} from '../../src';
import type {StepReport} from '../../src';
import {planCachedDecoding} from '../../src/generate/graph_plan';
import {compileStep} from '../../src/generate/step_compile';
import {stepBytes} from '../../src/generate/step_fit';
import {WASM_MEMORY_BYTES} from '../../src/kernels/flags';
import {describeBackends} from '../helpers/backends';

const FLOAT = path.join(__dirname, '..', 'fixtures', 'int8', 'decoder_lm', 'float', 'model.json');
const PROMPTS = [
  [3, 7, 1, 9],
  [5, 2, 14, 8],
];
const MAX = 12;
// two attentions, keys and values, batch 2, 12 positions, 32 wide, float32
const CACHE_BYTES = 2 * 2 * 2 * MAX * 32 * 4;

describeBackends('the compiled step against tfjs-wasm memory', (backend) => {
  let lm: tf.LayersModel;
  beforeAll(async () => {
    const float = await loadKerasModel(FLOAT);
    lm = quantize(float, 'int8');
    float.dispose();
  });
  afterAll(() => {
    tf.env().set(WASM_MEMORY_BYTES, 2 ** 32);
    lm.dispose();
  });

  it('stepBytes: the int8 kernels packed transposed (1 byte a value, none once packed) and the caches', () => {
    const {plan} = planCachedDecoding(lm);
    const {program} = compileStep(plan!);
    // every int8 weight of this model is read in place (no head-major kernel)
    expect(program!.packed.length).toBe(1 + 2 * 6);
    expect(stepBytes(program!, 2, MAX, false)).toEqual({int8: 0, caches: CACHE_BYTES});
    // a head-major kernel [2, 8, 5] packed transposed, beside a table read as it is
    const headMajor = {
      ...program!,
      packed: [
        {tensor: {size: 80} as tf.Tensor, transposeRows: 8, heads: 2},
        {tensor: {size: 3200} as tf.Tensor, transposeRows: 0, heads: 1},
      ],
    };
    expect(stepBytes(headMajor, 2, MAX, false)).toEqual({int8: 80, caches: CACHE_BYTES});
    expect(stepBytes(headMajor, 2, MAX, true)).toEqual({int8: 0, caches: CACHE_BYTES});
  });

  async function run(
    limitPastUse: number | null,
    release = true,
  ): Promise<{tokens: number[][]; report: StepReport}> {
    if (release) releaseGenerateMemory(lm); // its int8 weights not packed yet
    tf.env().set(
      WASM_MEMORY_BYTES,
      limitPastUse == null ? 2 ** 32 : tf.memory().numBytes + limitPastUse,
    );
    let report: StepReport | null = null;
    const out = await generate(lm, PROMPTS, {
      maxLength: MAX,
      useCache: true,
      onCompile: (r) => (report = r),
    });
    const tokens = (await out.array()) as number[][];
    out.dispose();
    return {tokens, report: report as unknown as StepReport};
  }

  it(
    backend === 'wasm'
      ? 'a step past the memory left runs the eager stepper, saying why, with the same tokens'
      : 'sets no limit on this backend: the step compiles whatever the flag says',
    async () => {
      const need = CACHE_BYTES;
      const roomy = await run(null);
      expect(roomy.report.compiled).toBe(true);
      const enough = await run(need + 65536);
      expect(enough.report.compiled).toBe(true);
      const short = await run(need - 4096);
      if (backend === 'wasm') {
        expect(short.report.compiled).toBe(false);
        expect(short.report.reason).toMatch(
          /^the compiled step needs 0\.00 GB of tfjs-wasm's memory \(int8 weights packed: 0\.00 GB, key \/ value caches: 0\.00 GB\) and 0\.00 GB are left of its 0\.\d\d GB \(TFJS_ATTENTION_WASM_MEMORY_BYTES\)$/,
        );
      } else {
        expect(short.report.compiled).toBe(true);
      }
      expect(short.tokens).toEqual(roomy.tokens);
      expect(enough.tokens).toEqual(roomy.tokens);
      // its memory kept with the model: the caches are asked for again
      await run(null);
      const kept = await run(CACHE_BYTES + 4096, false);
      expect(kept.report.compiled).toBe(true);
      expect(kept.tokens).toEqual(roomy.tokens);
    },
  );
});
