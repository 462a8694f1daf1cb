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

import {buildKerasHubModel, quantize} from '../../src';
import {COMPILED_STEP, SIMD} from '../../src/kernels/flags';
import {describeBackends} from '../helpers/backends';
import {hubFixture} from '../helpers/hub_families_fixture';
import {expectSameSteps, generated} from '../helpers/step_checks';

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
