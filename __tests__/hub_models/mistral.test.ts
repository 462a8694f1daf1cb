/**
 * keras-hub's Mistral (src/hub_models/mistral/) against keras-hub 0.32's own outputs of a tiny
 * MistralCausalLM (fixtures/mistral_family.py: 2 layers of width 16, 4 query heads over 2 key /
 * value heads, a sliding window of 4 positions, untied embeddings, a SentencePiece BPE tokenizer
 * with byte fallback): the `save_to_preset` folder and the task's .keras file load, logits within
 * 1e-4 (a prompt longer than the window; right-padded prompts), keras-hub's greedy ids and strings
 * (its stop token and what it strips), the tokenizer's ids and strings on a corpus, on cpu and wasm;
 * nothing left behind.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  buildKerasHubModel,
  loadKerasHubPreset,
  MistralTokenizer,
  MistralTransformerDecoder,
} from '../../src';
import type {KerasHubPreset} from '../../src';
import {describeBackends} from '../helpers/backends';
import {
  itGeneratesKerasHubOutputs,
  itGivesPaddedLogits,
  itLoadsTaskFile,
} from '../helpers/causal_lm_checks';
import {causalLMFixture, largestDifference, predictLogits} from '../helpers/causal_lm_family';

const fx = causalLMFixture('mistral');
const e = fx.expected;
const TOL = 1e-4;

describeBackends('Mistral from keras-hub', () => {
  let preset: KerasHubPreset;
  beforeAll(async () => {
    preset = await loadKerasHubPreset(fx.preset);
  });
  afterAll(() => preset?.dispose());

  it('loads the save_to_preset folder: MistralCausalLM, its tokenizer and preprocessor', () => {
    expect(preset.model.outputs[0].shape).toEqual([null, null, 420]);
    const decoders = preset.model.layers.filter((l) => l instanceof MistralTransformerDecoder);
    expect(decoders.map((d) => (d as MistralTransformerDecoder).slidingWindow)).toEqual([4, 4]);
    expect(preset.tokenizer).toBeInstanceOf(MistralTokenizer);
    expect(preset.preprocessor).toEqual({
      sequenceLength: 16,
      addStartToken: true,
      addEndToken: true,
    });
  });

  it("gives keras-hub's logits (within 1e-4) on a prompt longer than the window", () => {
    expect(e.logits.shape[1]).toBeGreaterThan(4);
    const before = tf.memory().numTensors;
    const logits = predictLogits(preset.model, e.logits);
    expect(largestDifference(logits, e.logits.values)).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
  });

  itGivesPaddedLogits(e, () => preset);

  it("the tokenizer gives keras-hub's ids and strings on the corpus, and its packed prompts", () => {
    const t = preset.tokenizer as MistralTokenizer;
    expect(e.tokenizer.texts.map((s) => t.encode(s))).toEqual(e.tokenizer.ids);
    expect(e.tokenizer.ids.map((ids) => t.decode(ids))).toEqual(e.tokenizer.detokenized);
    const {tokenIds, paddingMask} = e.preprocess;
    e.prompts.forEach((p, b) => {
      const n = paddingMask[b].filter((m) => m === 1).length;
      expect([t.startTokenId, ...t.encode(p)]).toEqual(tokenIds[b].slice(0, n));
    });
  });

  itGeneratesKerasHubOutputs(e, () => preset);
});

describe('Mistral from keras-hub: the task .keras file and checks', () => {
  itLoadsTaskFile('MistralCausalLM', fx);

  it('options not implemented are refused by name, before any weight is read', () => {
    const read = (f: string) => JSON.parse(fs.readFileSync(path.join(fx.preset, f), 'utf8'));
    const config = read('config.json').config;
    const weights = new Map();
    expect(() =>
      buildKerasHubModel('MistralBackbone', {...config, rope_scaling_factor: 2}, weights),
    ).toThrow(
      "MistralBackbone: config rope_scaling_factor=2 is not implemented: only 1 is implemented (every Mistral preset's)",
    );
    expect(() => buildKerasHubModel('MistralBackbone', {...config, head_dim: 8}, weights)).toThrow(
      'MistralBackbone: config head_dim=8 is not implemented: a head size other than ' +
        'hidden_dim / num_query_heads (4) is not implemented (received head_dim 8)',
    );
    expect(
      () =>
        new MistralTransformerDecoder({
          intermediateDim: 8,
          numQueryHeads: 2,
          numKeyValueHeads: 1,
          slidingWindow: 0,
        }),
    ).toThrow(
      'MistralTransformerDecoder: expected slidingWindow to be a positive integer or null, received 0',
    );
  });
});
