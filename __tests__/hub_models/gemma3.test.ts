/**
 * keras-hub's Gemma3Backbone / Gemma3CausalLM (text only) built in JavaScript from keras-hub's
 * config and weights by Keras 3 path (buildKerasHubModel), against keras-hub 0.32's own outputs
 * (fixtures/gemma3_family.py: 6 blocks, 5 local with a sliding window of 3 and rope base 1e4, one
 * global with rope base 1e6 scaled by 8; heads of 8 over a width of 16; query / key norms, post
 * norms; `1 + w` RMS norms): logits within 1e-4 on cpu and wasm, greedy `generate` tokens equal
 * to keras-hub's with the key / value cache, refused options named, no tensor left.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel, cachedDecodingRefusal, generate} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {hubFixture} from '../helpers/hub_families_fixture';

const fx = hubFixture('../gemma3/causal_lm');
const TOL = 1e-4;

const inputs = () =>
  ['token_ids', 'padding_mask'].map((n) => tf.tensor2d(fx.io.inputs[n], undefined, 'int32'));

describeBackends('Gemma 3 from keras-hub', () => {
  it('Gemma3CausalLM: logits equal keras-hub within 1e-4, no tensor left', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Gemma3CausalLM', fx.task.config, fx.taskWeights);
    expect(model.inputLayers.map((l) => l.name)).toEqual(['token_ids', 'padding_mask']);
    const xs = inputs();
    const logits = model.predict(xs) as tf.Tensor;
    expect(logits.shape).toEqual([2, 8, 360]);
    expectClose(logits, fx.io.logits as number[][][], TOL, 0);
    tf.dispose([logits, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('Gemma3Backbone: sequence_output equals keras-hub within 1e-4', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Gemma3Backbone', fx.backbone, fx.backboneWeights);
    const xs = inputs();
    const out = model.predict(xs) as tf.Tensor;
    expectClose(out, fx.io.backbone.sequence_output as number[][][], TOL, 0);
    tf.dispose([out, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it("greedy generate with the cache (and without) gives keras-hub's generate tokens", async () => {
    const before = tf.memory().numTensors;
    const g = fx.io.generate as NonNullable<typeof fx.io.generate>;
    const model = buildKerasHubModel('Gemma3CausalLM', fx.task.config, fx.taskWeights);
    expect(cachedDecodingRefusal(model)).toBeNull();
    for (const useCache of [true, false]) {
      const ids = await generate(model, g.token_ids, {
        maxLength: g.max_length,
        promptLengths: g.prompt_lengths,
        useCache,
      });
      expect(await ids.array()).toEqual(g.tokens);
      ids.dispose();
    }
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});
