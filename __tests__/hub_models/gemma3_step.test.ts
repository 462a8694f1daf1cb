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
import {SIMD} from '../../src/kernels/flags';
import {describeBackends} from '../helpers/backends';
import {hubFixture} from '../helpers/hub_families_fixture';
import {expectSameSteps, generated} from '../helpers/step_checks';

const fx = hubFixture('../gemma3/causal_lm');
const g = fx.io.generate as NonNullable<typeof fx.io.generate>;

describeBackends('Gemma 3 in the compiled step', () => {
  afterEach(() => tf.env().set(SIMD, true));

  it("generate compiles (onCompile: compiled) and gives keras-hub's greedy tokens, leaving nothing", async () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Gemma3CausalLM', fx.task.config, fx.taskWeights);
    const {tokens, report} = await generated(model, g);
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
    const {tokens, report} = await generated(model, g);
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
