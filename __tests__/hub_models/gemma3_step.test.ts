/**
 * Gemma 3 in `generate`'s compiled decoding step (src/hub_models/gemma3/gemma3_step_rules.ts): the
 * family's rules (`1 + w` RMS norms, per-head query / key norms, the embedding scale, rotary
 * grouped-query attention with each layer's rope base and scaling and the local layers' sliding
 * window, GELU-tanh gated feed-forward, post norms) compile the keras-hub fixture
 * (fixtures/gemma3_family.py), `onCompile` reports it, and the tokens are keras-hub's greedy
 * `generate` tokens. Independent reference at every position: the eager stepper (the layers' own
 * tfjs ops), its logits within 1e-4 and its greedy pick the same; float32, the SIMD kernels and
 * the JavaScript loops, on cpu and wasm; nothing left behind. In int8 (`quantize(model, 'int8')`:
 * the head-major query / key / value kernels packed head by head into one int8 product) the same
 * against the eager int8 stepper.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel, generate, quantize} from '../../src';
import type {StepReport} from '../../src';
import {compiledStep} from '../../src/generate/compiled_step';
import type {DecodeStep} from '../../src/generate/decode_loop';
import {SIMD} from '../../src/kernels/flags';
import {describeBackends} from '../helpers/backends';
import {eagerLogits, maxDiff, planOf} from '../helpers/eager_logits';
import {hubFixture} from '../helpers/hub_families_fixture';

const TOL = 1e-4;
const fx = hubFixture('../gemma3/causal_lm');
const g = fx.io.generate as NonNullable<typeof fx.io.generate>;

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

describeBackends('Gemma 3 in the compiled step', () => {
  afterEach(() => tf.env().set(SIMD, true));

  it("generate compiles (onCompile: compiled) and gives keras-hub's greedy tokens, leaving nothing", async () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Gemma3CausalLM', fx.task.config, fx.taskWeights);
    const {tokens, report} = await generated(model);
    expect(report).toMatchObject({compiled: true, reason: null});
    expect(tokens).toEqual(g.tokens);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  for (const kernels of ['simd', 'js'] as const) {
    it(`at every generated position the eager stepper's logits within 1e-4 and the same greedy token (${kernels} kernels)`, () => {
      tf.env().set(SIMD, kernels === 'simd');
      const model = buildKerasHubModel('Gemma3CausalLM', fx.task.config, fx.taskWeights);
      const before = tf.memory().numTensors;
      expectSameSteps(model, g.tokens, g.prompt_lengths, g.max_length);
      expect(tf.memory().numTensors).toBe(before);
      model.dispose();
    });
  }

  it("quantize(model, 'int8'): generate compiles (onCompile: compiled), the tokens of the model run whole without a cache", async () => {
    const float = buildKerasHubModel('Gemma3CausalLM', fx.task.config, fx.taskWeights);
    const model = quantize(float, 'int8');
    float.dispose();
    const before = tf.memory().numTensors;
    const {tokens, report} = await generated(model);
    expect(report).toMatchObject({compiled: true, reason: null});
    const eager = await generate(model, g.token_ids, {
      maxLength: g.max_length,
      promptLengths: g.prompt_lengths,
      useCache: false,
    });
    expect(tokens).toEqual(await eager.array());
    eager.dispose();
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  for (const kernels of ['simd', 'js'] as const) {
    it(`int8: at every generated position the eager int8 stepper's logits within 1e-4 and the same greedy token (${kernels} kernels)`, () => {
      tf.env().set(SIMD, kernels === 'simd');
      const float = buildKerasHubModel('Gemma3CausalLM', fx.task.config, fx.taskWeights);
      const model = quantize(float, 'int8');
      float.dispose();
      const before = tf.memory().numTensors;
      expectSameSteps(model, g.tokens, g.prompt_lengths, g.max_length);
      expect(tf.memory().numTensors).toBe(before);
      model.dispose();
    });
  }
});
