/**
 * keras-hub's Llama3Backbone / Llama3CausalLM built in JavaScript from keras-hub's config and
 * weights by Keras 3 path (buildKerasHubModel), with the package's LlamaTransformerDecoder,
 * LlamaAttention and LlamaLayerNorm, against keras-hub 0.32's own outputs
 * (fixtures/hub_families.py: 4 query heads over 2 key / value heads, rope wavelength 500000,
 * untied embeddings; and the same with Llama 3.1's rope frequency smoothing): logits within 1e-4
 * on cpu and wasm, greedy `generate` tokens equal to keras-hub's with the key / value cache,
 * refused options named, no tensor left.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel, cachedDecodingRefusal, generate} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {hubFixture} from '../helpers/hub_families_fixture';

const fx = hubFixture('llama3');
const TOL = 1e-4;

const inputs = () =>
  ['token_ids', 'padding_mask'].map((n) => tf.tensor2d(fx.io.inputs[n], undefined, 'int32'));

describeBackends('Llama 3 from keras-hub', () => {
  it('Llama3CausalLM: logits equal keras-hub within 1e-4, no tensor left', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Llama3CausalLM', fx.task.config, fx.taskWeights);
    expect(model.inputLayers.map((l) => l.name)).toEqual(['token_ids', 'padding_mask']);
    const xs = inputs();
    const logits = model.predict(xs) as tf.Tensor;
    expect(logits.shape).toEqual([2, 8, 64]);
    expectClose(logits, fx.io.logits as number[][][], TOL, 0);
    tf.dispose([logits, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('Llama3Backbone: sequence_output equals keras-hub within 1e-4', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Llama3Backbone', fx.backbone, fx.backboneWeights);
    const xs = inputs();
    const out = model.predict(xs) as tf.Tensor;
    expectClose(out, fx.io.backbone.sequence_output as number[][][], TOL, 0);
    tf.dispose([out, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it("greedy generate with the cache gives keras-hub's generate tokens", async () => {
    const before = tf.memory().numTensors;
    const g = fx.io.generate as NonNullable<typeof fx.io.generate>;
    const model = buildKerasHubModel('Llama3CausalLM', fx.task.config, fx.taskWeights);
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

const fx31 = hubFixture('llama31');

describeBackends("Llama 3 with Llama 3.1's rope smoothing from keras-hub", () => {
  it('the config carries the smoothing options (the fixture exercises them)', () => {
    expect(fx31.backbone.config).toMatchObject({
      rope_frequency_adjustment_factor: 8,
      rope_low_freq_factor: 1,
      rope_high_freq_factor: 4,
      rope_pretraining_sequence_length: 8,
    });
  });

  it("Llama3CausalLM: logits equal keras-hub within 1e-4, greedy tokens equal keras-hub's", async () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Llama3CausalLM', fx31.task.config, fx31.taskWeights);
    const xs = ['token_ids', 'padding_mask'].map((n) =>
      tf.tensor2d(fx31.io.inputs[n], undefined, 'int32'),
    );
    const logits = model.predict(xs) as tf.Tensor;
    expectClose(logits, fx31.io.logits as number[][][], TOL, 0);
    const g = fx31.io.generate as NonNullable<typeof fx31.io.generate>;
    const ids = await generate(model, g.token_ids, {
      maxLength: g.max_length,
      promptLengths: g.prompt_lengths,
      useCache: true,
    });
    expect(await ids.array()).toEqual(g.tokens);
    tf.dispose([logits, ids, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('Llama 3 from keras-hub: checks', () => {
  it('rope smoothing options set in part, and a position scaling factor, are refused by name', () => {
    const before = tf.memory().numTensors;
    const config = fx.backbone.config;
    expect(() =>
      buildKerasHubModel(
        'Llama3Backbone',
        {...config, rope_low_freq_factor: 1, rope_high_freq_factor: 4},
        fx.backboneWeights,
      ),
    ).toThrow(
      'Llama3Backbone: config rope_low_freq_factor=1 is not implemented: ' +
        'keras-hub sets rope_frequency_adjustment_factor, rope_low_freq_factor, ' +
        'rope_high_freq_factor, rope_pretraining_sequence_length together; received only ' +
        'rope_low_freq_factor, rope_high_freq_factor',
    );
    expect(() =>
      buildKerasHubModel(
        'Llama3Backbone',
        {...config, rope_position_scaling_factor: 8},
        fx.backboneWeights,
      ),
    ).toThrow('Llama3Backbone: config rope_position_scaling_factor=8 is not implemented');
    expect(() =>
      buildKerasHubModel('Llama3Backbone', {...config, num_key_value_heads: 3}, fx.backboneWeights),
    ).toThrow('expected numQueryHeads (4) to be a multiple of numKeyValueHeads, received 3');
    expect(() =>
      buildKerasHubModel('Llama3Backbone', {...config, dropout: 2}, fx.backboneWeights),
    ).toThrow(
      "Llama3Backbone: expected config dropout to be a rate, a number in [0, 1] (as Keras' " +
        'Dropout takes it), received 2',
    );
    expect(() =>
      buildKerasHubModel('Llama3Backbone', {...config, vocabulary_size: 1e9}, fx.backboneWeights),
    ).toThrow(
      /^Llama3Backbone: config vocabulary_size=1000000000 and hidden_dim=32 imply a token embedding and its untied reverse of 64000000000 values/,
    );
    expect(tf.memory().numTensors).toBe(before);
  });

  it('the untied reverse embedding is read from its path', () => {
    const m = new Map(fx.taskWeights);
    const path = 'layers/llama3_backbone/layers/reversible_embedding/vars/1';
    m.delete(path);
    expect(() => buildKerasHubModel('Llama3CausalLM', fx.task.config, m)).toThrow(
      `1 weight missing: ${path} (shape [32, 64])`,
    );
  });
});
