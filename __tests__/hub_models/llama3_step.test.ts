/**
 * Llama 3 in `generate`'s compiled decoding step (src/hub_models/llama3/llama3_step_rules.ts):
 * the family's rules (RMS norms, rotary grouped-query attention with Llama 3.1's smoothing,
 * SwiGLU) compile the keras-hub fixtures (fixtures/hub_families.py: 4 query heads over 2 key /
 * value heads, head size 8, rope wavelength 500000; and Llama 3.1's smoothing), `onCompile`
 * reports it, and the tokens are keras-hub's greedy `generate` tokens. Independent reference at
 * every position: the eager stepper (the layers' own tfjs ops), its logits within 1e-4 and its
 * greedy pick the same; float32 and int8 (`quantize(model, 'int8')`), untied and tied logits, the
 * SIMD kernels and the JavaScript loops, on cpu and wasm; nothing left behind.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel, generate, quantize} from '../../src';
import type {StepReport} from '../../src';
import {compiledStep} from '../../src/generate/compiled_step';
import type {DecodeStep} from '../../src/generate/decode_loop';
import {COMPILED_STEP, SIMD} from '../../src/kernels/flags';
import {describeBackends} from '../helpers/backends';
import {eagerLogits, maxDiff, planOf} from '../helpers/eager_logits';
import {hubFixture} from '../helpers/hub_families_fixture';

const TOL = 1e-4;

/** The compiled step's logits of each position from the shortest prompt on, as generate feeds it. */
function compiledLogits(
  model: tf.LayersModel,
  ids: number[][],
  lengths: number[],
  max: number,
): {logits: Float32Array[][]; report: StepReport} {
  const made = compiledStep(planOf(model), ids, lengths, max);
  if (made.step == null) throw new Error(`not compiled: ${made.reason}`);
  const step = made.step as DecodeStep;
  const out: Float32Array[][] = [];
  try {
    for (let index = Math.min(...lengths); index < max; index++) {
      out.push(
        step.next(
          ids,
          index,
          lengths.map((n) => index >= n),
        ) as Float32Array[],
      );
    }
  } finally {
    step.dispose();
  }
  return {logits: out, report: made.report};
}

/** Index of the largest value (the first of ties). */
const argmax = (row: ArrayLike<number>) =>
  Array.from(row).reduce((best, v, i, a) => (v > a[best] ? i : best), 0);

/** The compiled and eager logits agree within TOL, and pick the same greedy token, at every position. */
function expectSameSteps(model: tf.LayersModel, ids: number[][], lengths: number[], max: number) {
  const eager = eagerLogits(planOf(model), ids, lengths, max);
  const {logits, report} = compiledLogits(model, ids, lengths, max);
  expect(report.compiled).toBe(true);
  expect(maxDiff(eager, logits)).toBeLessThan(TOL);
  eager.forEach((step, s) =>
    step.forEach((row, b) => expect(argmax(logits[s][b])).toBe(argmax(row))),
  );
}

/** generate's greedy tokens with its onCompile report. */
async function generated(
  model: tf.LayersModel,
  g: {token_ids: number[][]; prompt_lengths: number[]; max_length: number},
): Promise<{tokens: number[][]; report: StepReport | null}> {
  let report: StepReport | null = null;
  const ids = await generate(model, g.token_ids, {
    maxLength: g.max_length,
    promptLengths: g.prompt_lengths,
    onCompile: (r) => (report = r),
  });
  const tokens = (await ids.array()) as number[][];
  ids.dispose();
  return {tokens, report};
}

for (const name of ['llama3', 'llama31']) {
  const fx = hubFixture(name);
  const g = fx.io.generate as NonNullable<typeof fx.io.generate>;

  describeBackends(`Llama 3 (${name}) in the compiled step`, () => {
    afterEach(() => tf.env().set(SIMD, true));

    it("generate compiles (onCompile: compiled) and gives keras-hub's greedy tokens, leaving nothing", async () => {
      const before = tf.memory().numTensors;
      const model = buildKerasHubModel('Llama3CausalLM', fx.task.config, fx.taskWeights);
      const {tokens, report} = await generated(model, g);
      expect(report).toMatchObject({compiled: true, reason: null});
      expect(tokens).toEqual(g.tokens);
      model.dispose();
      expect(tf.memory().numTensors).toBe(before);
    });

    for (const kernels of ['simd', 'js'] as const) {
      it(`at every generated position the eager stepper's logits within 1e-4 and the same greedy token (${kernels} kernels)`, () => {
        tf.env().set(SIMD, kernels === 'simd');
        const model = buildKerasHubModel('Llama3CausalLM', fx.task.config, fx.taskWeights);
        const before = tf.memory().numTensors;
        expectSameSteps(model, g.tokens, g.prompt_lengths, g.max_length);
        expect(tf.memory().numTensors).toBe(before);
        model.dispose();
      });
    }

    it("int8 (quantize(model, 'int8')) compiles, its logits the eager int8 stepper's at every position, its tokens generate's without the compiled step", async () => {
      const float = buildKerasHubModel('Llama3CausalLM', fx.task.config, fx.taskWeights);
      const model = quantize(float, 'int8');
      float.dispose();
      const before = tf.memory().numTensors;
      expectSameSteps(model, g.tokens, g.prompt_lengths, g.max_length);
      const compiled = await generated(model, g);
      expect(compiled.report).toMatchObject({compiled: true});
      tf.env().set(COMPILED_STEP, false);
      try {
        const eager = await generated(model, g);
        expect(eager.report?.compiled).toBe(false);
        expect(compiled.tokens).toEqual(eager.tokens);
      } finally {
        tf.env().set(COMPILED_STEP, true);
      }
      expect(tf.memory().numTensors).toBe(before);
      model.dispose();
    });

    it('tied logits (tie_word_embeddings: one table) compile, the eager logits at every position', () => {
      const weights = new Map(fx.taskWeights);
      weights.delete('layers/llama3_backbone/layers/reversible_embedding/vars/1');
      const config = JSON.parse(JSON.stringify(fx.task.config));
      config.backbone.config.tie_word_embeddings = true;
      const model = buildKerasHubModel('Llama3CausalLM', config, weights);
      const before = tf.memory().numTensors;
      // (expectSameSteps checks that it compiled)
      expectSameSteps(model, g.tokens, g.prompt_lengths, g.max_length);
      expect(tf.memory().numTensors).toBe(before);
      model.dispose();
    });
  });
}
