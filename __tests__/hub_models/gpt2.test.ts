/**
 * keras-hub's GPT2Backbone / GPT2CausalLM built in JavaScript from keras-hub's config and weights
 * by Keras 3 path (buildKerasHubModel), against keras-hub 0.32's own outputs
 * (fixtures/hub_families.py): logits and sequence output within 1e-4 on cpu and wasm, greedy
 * `generate` tokens equal to keras-hub's `generate` with the key / value cache, config options
 * and weight paths checked by name, no tensor left behind.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel, cachedDecodingRefusal, generate, HubWeightValue} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {hubFixture} from '../helpers/hub_families_fixture';

const fx = hubFixture('gpt2');
const TOL = 1e-4;

function inputs(names: string[]): tf.Tensor[] {
  return names.map((n) => tf.tensor2d(fx.io.inputs[n], undefined, 'int32'));
}

describeBackends('GPT-2 from keras-hub', () => {
  it('GPT2CausalLM: logits equal keras-hub within 1e-4, no tensor left', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('GPT2CausalLM', fx.task.config, fx.taskWeights);
    expect(model.inputLayers.map((l, i) => [l.name, model.inputs[i].dtype])).toEqual([
      ['token_ids', 'int32'],
      ['padding_mask', 'int32'],
    ]);
    expect(model.outputs[0].shape).toEqual([null, null, 64]);
    const xs = inputs(['token_ids', 'padding_mask']);
    const logits = model.predict(xs) as tf.Tensor;
    expect(logits.shape).toEqual([2, 8, 64]);
    expectClose(logits, fx.io.logits as number[][][], TOL, 0);
    tf.dispose([logits, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('GPT2Backbone: sequence_output equals keras-hub within 1e-4 (the preset config and paths)', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('GPT2Backbone', fx.backbone.config, fx.backboneWeights);
    const xs = inputs(['token_ids', 'padding_mask']);
    const out = model.predict(xs) as tf.Tensor;
    expectClose(out, fx.io.backbone.sequence_output as number[][][], TOL, 0);
    tf.dispose([out, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it("greedy generate with the cache gives keras-hub's generate tokens", async () => {
    const before = tf.memory().numTensors;
    const g = fx.io.generate as NonNullable<typeof fx.io.generate>;
    const model = buildKerasHubModel('GPT2CausalLM', fx.task, fx.taskWeights);
    expect(cachedDecodingRefusal(model)).toBeNull();
    let fellBack = '';
    const ids = await generate(model, g.token_ids, {
      maxLength: g.max_length,
      promptLengths: g.prompt_lengths,
      useCache: true,
      onFallback: (why) => (fellBack = why),
    });
    expect(fellBack).toBe('');
    expect(await ids.array()).toEqual(g.tokens);
    ids.dispose();
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('GPT-2 from keras-hub: checks', () => {
  const withWeights = (edit: (m: Map<string, HubWeightValue>) => void) => {
    const m = new Map(fx.taskWeights);
    edit(m);
    return m;
  };
  const KEY =
    'layers/gpt2_backbone/layers/transformer_decoder_1/_self_attention_layer/key_dense/vars/1';

  it('a missing weight path is an error naming it, and leaves no tensor', () => {
    const before = tf.memory().numTensors;
    expect(() =>
      buildKerasHubModel(
        'GPT2CausalLM',
        fx.task.config,
        withWeights((m) => m.delete(KEY)),
      ),
    ).toThrow(`1 weight missing: ${KEY} (shape [4, 8])`);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('an extra weight path is an error naming it', () => {
    const extra =
      'layers/gpt2_backbone/layers/transformer_decoder_2/_feedforward_layer_norm/vars/0';
    expect(() =>
      buildKerasHubModel(
        'GPT2CausalLM',
        fx.task.config,
        withWeights((m) => m.set(extra, {shape: [32], values: new Float32Array(32)})),
      ),
    ).toThrow(`1 weight path not read by the model: ${extra}`);
  });

  it('a weight of another shape is an error naming the path and both shapes', () => {
    expect(() =>
      buildKerasHubModel(
        'GPT2CausalLM',
        fx.task.config,
        withWeights((m) => m.set(KEY, {shape: [8, 4], values: new Float32Array(32)})),
      ),
    ).toThrow(`weight ${KEY} expected shape [4, 8], received [8, 4]`);
  });

  it('an int8 weight (a quantized kernel) is refused by path, not cast', () => {
    expect(() =>
      buildKerasHubModel(
        'GPT2CausalLM',
        fx.task.config,
        withWeights((m) => m.set(KEY, {shape: [4, 8], dtype: 'int8', values: new Int8Array(32)})),
      ),
    ).toThrow(
      `weight ${KEY} expected a float dtype (float32, float16, bfloat16, float64), received int8`,
    );
  });

  it('backbone paths given to the task are refused by name', () => {
    expect(() => buildKerasHubModel('GPT2CausalLM', fx.task.config, fx.backboneWeights)).toThrow(
      /weights? missing: layers\/gpt2_backbone\/layers\/reversible_embedding\/vars\/0/,
    );
  });

  /** Every value of the weights, counted with a plain loop (what the config must fit). */
  const held = [...fx.taskWeights.values()].reduce(
    (n, w) => n + w.shape.reduce((a, d) => a * d, 1),
    0,
  );
  const withBackbone = (edit: Record<string, unknown>) => ({
    ...fx.task.config,
    backbone: {...fx.backbone, config: {...fx.backbone.config, ...edit}},
  });
  const refusedWithoutLeak = (edit: Record<string, unknown>, message: string | RegExp) => {
    const before = tf.memory().numTensors;
    expect(() =>
      buildKerasHubModel('GPT2CausalLM', withBackbone(edit) as never, fx.taskWeights),
    ).toThrow(message);
    expect(tf.memory().numTensors).toBe(before);
  };

  it('a config sizing more weights than it is given is refused before building, naming its options; no tensor left', () => {
    const hidden = fx.backbone.config.hidden_dim as number;
    // a 1e9-row position table: "Invalid typed array length" after the token embedding was made
    refusedWithoutLeak(
      {max_sequence_length: 1e9},
      `GPT2CausalLM: config max_sequence_length=1000000000 and hidden_dim=${hidden} imply a ` +
        `position embedding of ${1e9 * hidden} values; expected a config that fits its weights, ` +
        `which hold ${held} values in all`,
    );
    // a vocabulary of a million tokens over a table of a few hundred rows
    refusedWithoutLeak(
      {vocabulary_size: 1e6},
      `GPT2CausalLM: config vocabulary_size=1000000 and hidden_dim=${hidden} imply a token ` +
        `embedding of ${1e6 * hidden} values; expected a config that fits its weights, ` +
        `which hold ${held} values in all`,
    );
    // one block more than the weights hold: refused before any block is built
    refusedWithoutLeak(
      {num_layers: 3},
      /^GPT2CausalLM: config num_layers=3 and hidden_dim=32 and intermediate_dim=64 imply the blocks' attention and feed-forward kernels of 24576 values; expected a config that fits its weights/,
    );
    refusedWithoutLeak(
      {vocabulary_size: 1e300},
      'GPT2Backbone: expected config vocabulary_size to be an integer in [1, 2147483647], ' +
        'received 1e+300',
    );
  });

  it('a dropout outside [0, 1] is refused up front, saying what Keras takes; no tensor left', () => {
    for (const dropout of [2, -0.5]) {
      refusedWithoutLeak(
        {dropout},
        `GPT2Backbone: expected config dropout to be a rate, a number in [0, 1] (as Keras' ` +
          `Dropout takes it), received ${dropout}`,
      );
    }
  });

  it('a refusal while the graph is built (hidden_dim under num_heads) leaves no tensor', () => {
    // the embeddings are built before the first block says its width is too small
    refusedWithoutLeak({hidden_dim: 2}, 'the input width 2 must be >= numHeads (4)');
  });

  it('config options it does not implement are refused by name', () => {
    const config = {...fx.backbone.config};
    expect(() =>
      buildKerasHubModel('GPT2Backbone', {...config, use_flash: true}, fx.backboneWeights),
    ).toThrow('GPT2Backbone: config option use_flash is not implemented');
    expect(() =>
      buildKerasHubModel('GPT2Backbone', {...config, dtype: 'bfloat16'}, fx.backboneWeights),
    ).toThrow('GPT2Backbone: config dtype "bfloat16" is not implemented (expected float32)');
    const {num_heads: _unused, ...noHeads} = config;
    void _unused;
    expect(() => buildKerasHubModel('GPT2Backbone', noHeads, fx.backboneWeights)).toThrow(
      'GPT2Backbone: config is missing num_heads',
    );
    expect(() =>
      buildKerasHubModel('GPT2CausalLM', {...fx.task.config, sampler: 'greedy'}, fx.taskWeights),
    ).toThrow('GPT2CausalLM: config option sampler is not implemented');
    expect(() => buildKerasHubModel('GPT2Tokenizer', config, fx.taskWeights)).toThrow(
      'keras-hub class "GPT2Tokenizer" is not implemented (expected one of GPT2Backbone, GPT2CausalLM',
    );
    expect(() => buildKerasHubModel('GPT2CausalLM', fx.backbone, fx.taskWeights)).toThrow(
      'GPT2CausalLM: expected a GPT2CausalLM config, received one of class "GPT2Backbone"',
    );
  });
});
