/**
 * keras-hub's Qwen 2.5 (QwenBackbone / QwenCausalLM, QwenTokenizer) loaded from the
 * `save_to_preset` folder and the task's `.keras` file keras-hub 0.32 wrote
 * (fixtures/qwen_family.py: hidden 16, 4 query / 2 key-value heads with biases, untied embedding,
 * a sliding window of 5 positions, shorter than the prompts and generations), against keras-hub's
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
  QwenAttention,
  QwenTokenizer,
  QwenTransformerDecoder,
} from '../../src';
import type {KerasHubPreset} from '../../src';
import {describeBackends} from '../helpers/backends';
import {qwenFileChecks, qwenFixture, qwenPresetChecks} from '../helpers/qwen_family';

const fx = qwenFixture('qwen');
const {preset: PRESET, e} = fx;

describeBackends('Qwen 2.5 from keras-hub', (backend) => {
  let preset: KerasHubPreset;
  beforeAll(async () => {
    preset = await loadKerasHubPreset(PRESET);
  });
  afterAll(() => preset?.dispose());

  it('loads the save_to_preset folder: its classes, tokenizer and preprocessor', () => {
    expect(preset.model.layers.map((l) => l.getClassName())).toEqual(
      expect.arrayContaining(['ReversibleEmbedding', 'QwenTransformerDecoder', 'QwenLayerNorm']),
    );
    expect(preset.tokenizer).toBeInstanceOf(QwenTokenizer);
    const tokenizer = preset.tokenizer as QwenTokenizer;
    // keras-hub's QwenTokenizer: no start token, <|endoftext|> ends and stops, padding 0
    expect(tokenizer.startTokenId).toBeUndefined();
    expect(tokenizer.endTokenId).toBe(e.end_token_id);
    expect(tokenizer.padTokenId).toBe(e.pad_token_id);
    expect(tokenizer.stopTokenIds).toEqual([e.end_token_id]);
    expect(tokenizer.specialTokenIds).toEqual(e.special_token_ids);
    // preprocessor.json says add_start_token; keras-hub's packer adds none (start_value None)
    expect(preset.preprocessor).toEqual({
      sequenceLength: 16,
      addStartToken: false,
      addEndToken: true,
    });
  });

  qwenPresetChecks('qwen', backend, e, () => preset);
});

describe('Qwen 2.5 from keras-hub: files, tokenizer, checks', () => {
  qwenFileChecks('qwen', fx, QwenTokenizer);

  it('refuses config values it does not implement, naming them', () => {
    const config = JSON.parse(fs.readFileSync(path.join(PRESET, 'config.json'), 'utf8')).config;
    expect(() =>
      buildKerasHubModel(
        'QwenBackbone',
        {...config, use_sliding_window_attention: 'yes'},
        new Map(),
      ),
    ).toThrow(
      'QwenBackbone: config use_sliding_window_attention="yes" is not implemented: expected true, false or null',
    );
    expect(
      () =>
        new QwenTransformerDecoder({
          intermediateDim: 8,
          numQueryHeads: 4,
          numKeyValueHeads: 2,
          useSlidingWindowAttention: true,
          slidingWindowSize: 0,
        }),
    ).toThrow(
      'QwenTransformerDecoder: expected slidingWindowSize to be a positive integer, received 0',
    );
    expect(() => new QwenAttention({numQueryHeads: 4, numKeyValueHeads: 3})).toThrow(
      'QwenAttention: expected numQueryHeads (4) to be a multiple of numKeyValueHeads, received 3',
    );
  });
});
