/**
 * One registry of keras-hub families (hub_models/registry.ts): the built-in families registered
 * through `registerKerasHubFamily` itself, a class name another family uses refused, a family
 * registered from outside src/ built by `buildKerasHubModel` and its tokenizer read by
 * `tokenizerFromPreset`; a preset's implied size checked by the family's own formula.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import {
  BytePairTokenizer,
  buildKerasHubModel,
  GPT2,
  kerasHubClassNames,
  loadKerasHubPreset,
  registerKerasHubFamily,
  ReversibleEmbedding,
  tokenizerFromPreset,
} from '../../src';
import type {
  BytePairTokenizerOptions,
  HubWeightValue,
  JsonObject,
  KerasHubFamily,
  StepCompile,
  TokenizerAsset,
  TokenizerConfig,
  TokenizerSplit,
} from '../../src';

/** A tokenizer of the toy family: byte-level BPE under its own class name. */
class ToyTokenizer extends BytePairTokenizer {
  static override get className(): string {
    return 'ToyTokenizer';
  }
  static override fromPreset(
    _config: TokenizerConfig,
    asset: TokenizerAsset,
    split: TokenizerSplit,
  ): ToyTokenizer {
    const vocabulary = JSON.parse(asset('vocabulary.json')) as Record<string, number>;
    return new ToyTokenizer({vocabulary, merges: [], split});
  }
  constructor(options: BytePairTokenizerOptions) {
    super(options, 'ToyTokenizer');
    this.endTokenId = 0;
  }
}

/** A toy causal LM: token embedding, layer norm; logits the embedding's reverse. */
const TOY: KerasHubFamily = {
  name: 'Toy',
  backbone: 'ToyBackbone',
  tasks: {ToyCausalLM: 'causalLM'},
  inputs: ['token_ids', 'padding_mask'],
  outputs: ['sequence_output'],
  configKeys: ['vocabulary_size', 'hidden_dim'],
  requiredKeys: ['vocabulary_size', 'hidden_dim'],
  refuse: {},
  layers: [],
  tokenizer: ToyTokenizer,
  preprocessor: {addStartToken: false, addEndToken: false},
  weightTerms: (c: JsonObject) => [
    {
      keys: {vocabulary_size: c.vocabulary_size as number, hidden_dim: c.hidden_dim as number},
      what: 'a token embedding',
      values: (c.vocabulary_size as number) * (c.hidden_dim as number),
    },
  ],
  build(config: JsonObject) {
    const tokenIds = tf.input({shape: [null], dtype: 'int32', name: 'token_ids'});
    const paddingMask = tf.input({shape: [null], dtype: 'int32', name: 'padding_mask'});
    const tokenEmbedding = new ReversibleEmbedding({
      name: 'token_embedding',
      inputDim: config.vocabulary_size as number,
      outputDim: config.hidden_dim as number,
      embeddingsInitializer: 'zeros',
    });
    const norm = tf.layers.layerNormalization({name: 'norm'});
    const x = norm.apply(tokenEmbedding.apply(tokenIds)) as SymbolicTensor;
    return {
      inputs: [tokenIds, paddingMask],
      outputs: {sequence_output: x},
      tokenEmbedding,
    };
  },
};

const value = (shape: number[], fill: (i: number) => number): HubWeightValue => ({
  shape,
  values: Float32Array.from({length: shape.reduce((a, b) => a * b, 1)}, (_, i) => fill(i)),
});

describe('registerKerasHubFamily', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it('the built-in families are registered through it: a second GPT-2 is refused by name', () => {
    expect(() => registerKerasHubFamily({...GPT2, name: 'GPT-2 again'})).toThrow(
      'registerKerasHubFamily: the backbone class "GPT2Backbone" of family "GPT-2 again" is ' +
        'already registered (the backbone class of family "GPT-2"); expected class names no ' +
        'registered family uses',
    );
  });

  it('a task or tokenizer class another family uses is refused, and nothing is registered', () => {
    const before = kerasHubClassNames();
    expect(() =>
      registerKerasHubFamily({...TOY, name: 'Toy task', tasks: {GPT2CausalLM: 'causalLM'}}),
    ).toThrow(/the task class "GPT2CausalLM" of family "Toy task" is already registered/);
    expect(() =>
      registerKerasHubFamily({...TOY, name: 'Toy tokenizer', tokenizer: GPT2.tokenizer}),
    ).toThrow(
      /the tokenizer class "GPT2Tokenizer" of family "Toy tokenizer" is already registered \(the tokenizer class of family "GPT-2"\)/,
    );
    expect(kerasHubClassNames()).toEqual(before);
  });

  it('a compile rule for a class that has one, or one that is no function, is refused, and nothing is registered', () => {
    const before = kerasHubClassNames();
    const rule: StepCompile = (_layer, inputs) => inputs;
    expect(() =>
      registerKerasHubFamily({...TOY, name: 'Toy rules', stepRules: {MultiHeadAttention: rule}}),
    ).toThrow(
      'registerKerasHubFamily: family "Toy rules" gives class "MultiHeadAttention" a compile ' +
        'rule; expected a function for a class without one (it has one already)',
    );
    expect(() =>
      registerKerasHubFamily({
        ...TOY,
        name: 'Toy rules',
        stepRules: {ToyNorm: 'fast' as unknown as StepCompile},
      }),
    ).toThrow(/gives class "ToyNorm" a string as its compile rule; .*\(it is not a function\)/);
    expect(kerasHubClassNames()).toEqual(before);
  });

  it('a family from outside src/ is built by buildKerasHubModel and its tokenizer read by name', () => {
    expect(() => buildKerasHubModel('ToyCausalLM', {}, new Map())).toThrow(
      /keras-hub class "ToyCausalLM" is not implemented/,
    );
    registerKerasHubFamily(TOY);
    expect(kerasHubClassNames().slice(-2)).toEqual(['ToyBackbone', 'ToyCausalLM']);
    const before = tf.memory().numTensors;
    const weights = new Map<string, HubWeightValue>([
      ['layers/toy_backbone/layers/reversible_embedding/vars/0', value([5, 4], (i) => i / 10)],
      ['layers/toy_backbone/layers/layer_normalization/vars/0', value([4], () => 1)],
      ['layers/toy_backbone/layers/layer_normalization/vars/1', value([4], () => 0)],
    ]);
    const config = {
      backbone: {class_name: 'ToyBackbone', config: {vocabulary_size: 5, hidden_dim: 4}},
    };
    const model = buildKerasHubModel('ToyCausalLM', config, weights);
    const ids = tf.tensor2d([[1, 2, 3]], undefined, 'int32');
    const mask = tf.onesLike(ids);
    const logits = model.predict([ids, mask]) as tf.Tensor;
    expect(logits.shape).toEqual([1, 3, 5]);
    tf.dispose([ids, mask, logits]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
    const tokenizer = tokenizerFromPreset(
      {class_name: 'ToyTokenizer', config: {}},
      {'vocabulary.json': JSON.stringify({a: 0, b: 1}), 'merges.txt': ''},
    );
    expect(tokenizer).toBeInstanceOf(ToyTokenizer);
    expect(tokenizer.encode('ab')).toEqual([0, 1]);
  });
});

describe("a preset's implied size is its family's formula", () => {
  beforeAll(() => tf.setBackend('cpu'));

  it("GPT-2's position embedding counts: a max_sequence_length of 1e9 is refused before any weight is read", async () => {
    const dir = path.join(__dirname, '..', 'fixtures', 'hub_presets', 'gpt2');
    const files = new Map<string, Uint8Array>();
    const walk = (under: string) => {
      for (const e of fs.readdirSync(path.join(dir, under), {withFileTypes: true})) {
        const rel = under === '' ? e.name : `${under}/${e.name}`;
        if (e.isDirectory()) walk(rel);
        else files.set(rel, new Uint8Array(fs.readFileSync(path.join(dir, rel))));
      }
    };
    walk('');
    for (const name of ['config.json', 'task.json']) {
      const json = JSON.parse(new TextDecoder().decode(files.get(name)));
      const cfg = name === 'config.json' ? json.config : json.config.backbone.config;
      cfg.max_sequence_length = 1e9;
      files.set(name, new TextEncoder().encode(JSON.stringify(json)));
    }
    const progress: number[] = [];
    const before = tf.memory().numTensors;
    await expect(loadKerasHubPreset(files, {onProgress: (f) => progress.push(f)})).rejects.toThrow(
      /the GPT2Backbone config implies at least \d+ weight values, but its weights files declare \d+; refused before building the model/,
    );
    expect(progress).toEqual([]);
    expect(tf.memory().numTensors).toBe(before);
  });
});
