/**
 * keras-hub's Qwen 3 (Qwen3Backbone / Qwen3CausalLM, Qwen3Tokenizer) loaded from the
 * `save_to_preset` folder and the task's `.keras` file keras-hub 0.32 wrote
 * (fixtures/qwen_family.py: hidden 24, 4 query / 2 key-value heads of head_dim 8, per-head query /
 * key RMS norms, rope_scaling_factor 2, tied embedding, 3 layers), against keras-hub's
 * own outputs: logits of right-padded prompts within 1e-4 on cpu and wasm (and of its int8 model,
 * `quantize(model, 'int8')`), greedy `generateText` strings equal to keras-hub's `generate` (an end
 * token hit, stripped), greedy ids equal to keras-hub's with the eager stepper agreeing at every
 * position, tokenizer ids and strings equal on the corpus, no tensor left.
 */
import * as fs from 'fs';
import * as path from 'path';

import {
  buildKerasHubModel,
  loadKerasHubPreset,
  Qwen3Attention,
  Qwen3Tokenizer,
  Qwen3TransformerDecoder,
} from '../../src';
import type {KerasHubPreset} from '../../src';
import {describeBackends} from '../helpers/backends';
import {qwenFileChecks, qwenFixture, qwenPresetChecks} from '../helpers/qwen_family';

const fx = qwenFixture('qwen3');
const {preset: PRESET, e} = fx;

describeBackends('Qwen 3 from keras-hub', (backend) => {
  let preset: KerasHubPreset;
  beforeAll(async () => {
    preset = await loadKerasHubPreset(PRESET);
  });
  afterAll(() => preset?.dispose());

  it('loads the save_to_preset folder: its classes, tokenizer and preprocessor', () => {
    expect(preset.model.layers.map((l) => l.getClassName())).toEqual(
      expect.arrayContaining(['ReversibleEmbedding', 'Qwen3TransformerDecoder', 'Qwen3LayerNorm']),
    );
    expect(preset.tokenizer).toBeInstanceOf(Qwen3Tokenizer);
    const tokenizer = preset.tokenizer as Qwen3Tokenizer;
    // keras-hub's Qwen3Tokenizer: no start token, <|im_end|> ends and stops, <|endoftext|> pads
    expect(tokenizer.startTokenId).toBeUndefined();
    expect(tokenizer.endTokenId).toBe(e.end_token_id);
    expect(tokenizer.padTokenId).toBe(e.pad_token_id);
    expect(tokenizer.stopTokenIds).toEqual([e.end_token_id]);
    expect([tokenizer.endTokenId, tokenizer.padTokenId]).toEqual([
      e.special_tokens['<|im_end|>'],
      e.special_tokens['<|endoftext|>'],
    ]);
    expect(tokenizer.specialTokenIds).toEqual(e.special_token_ids);
    // preprocessor.json says add_start_token; keras-hub's packer adds none (start_value None)
    expect(preset.preprocessor).toEqual({
      sequenceLength: 16,
      addStartToken: false,
      addEndToken: true,
    });
  });

  qwenPresetChecks('qwen3', backend, e, () => preset);
});

describe('Qwen 3 from keras-hub: files, tokenizer, checks', () => {
  qwenFileChecks('qwen3', fx, Qwen3Tokenizer);

  it('refuses what it does not implement, naming it', () => {
    const config = JSON.parse(fs.readFileSync(path.join(PRESET, 'config.json'), 'utf8')).config;
    expect(() =>
      buildKerasHubModel('Qwen3Backbone', {...config, tie_word_embeddings: 'yes'}, new Map()),
    ).toThrow(
      'Qwen3Backbone: config tie_word_embeddings="yes" is not implemented: expected true, false or null',
    );
    expect(() =>
      buildKerasHubModel('Qwen3Backbone', {...config, head_dim: undefined}, new Map()),
    ).toThrow('head_dim');
    expect(
      () =>
        new Qwen3TransformerDecoder({
          intermediateDim: 8,
          numQueryHeads: 4,
          numKeyValueHeads: 2,
          headDim: 8,
          slidingWindowSize: -2,
        }),
    ).toThrow(
      'Qwen3TransformerDecoder: expected slidingWindowSize to be a positive integer, received -2',
    );
    expect(() => new Qwen3Attention({numQueryHeads: 4, numKeyValueHeads: 3})).toThrow(
      'Qwen3Attention: expected numQueryHeads (4) to be a multiple of numKeyValueHeads, received 3',
    );
  });
});
