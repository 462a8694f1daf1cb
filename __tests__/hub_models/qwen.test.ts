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

import * as tf from '@tensorflow/tfjs';

import {
  buildKerasHubModel,
  generate,
  generateText,
  loadKerasHubPreset,
  loadKerasModel,
  loadTokenizer,
  quantize,
  QwenAttention,
  QwenTokenizer,
  QwenTransformerDecoder,
} from '../../src';
import type {KerasHubPreset, StepReport} from '../../src';
import {describeBackends} from '../helpers/backends';
import {eagerLogits, planOf} from '../helpers/eager_logits';

const DIR = path.join(__dirname, '..', 'fixtures', 'qwen');
const PRESET = path.join(DIR, 'preset');
const TOL = 1e-4;

interface Expected {
  special_tokens: Record<string, number>;
  end_token_id: number;
  pad_token_id: number;
  special_token_ids: number[];
  /** keras-hub's ids; its detokenized strings where they differ from the text, Hugging Face's ids
   * (Qwen's own split) where they differ from keras-hub's, by text index. */
  corpus: {
    texts: string[];
    ids: number[][];
    strings: Record<string, string>;
    hf: Record<string, number[]>;
  };
  prompts: string[];
  generate: Record<string, string[]>;
  preprocessed: {token_ids: number[][]; padding_mask: number[][]};
  logits: number[][][];
  int8_logits: number[][][];
  greedy: {token_ids: number[][]; prompt_lengths: number[]; max_length: number; tokens: number[][]};
}
const e = JSON.parse(fs.readFileSync(path.join(DIR, 'expected.json'), 'utf8')) as Expected;

/** max |model(preprocessed) - expected| over every logit. */
function logitsDiff(model: tf.LayersModel, expected: number[][][]): number {
  return tf.tidy(() => {
    const ids = tf.tensor2d(e.preprocessed.token_ids, undefined, 'int32');
    const mask = tf.tensor2d(e.preprocessed.padding_mask, undefined, 'int32');
    const out = model.predict([ids, mask]) as tf.Tensor;
    expect(out.shape).toEqual([3, 8, 420]);
    return tf.max(tf.abs(tf.sub(out, tf.tensor(expected)))).dataSync()[0];
  });
}

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

  it("gives keras-hub's logits of right-padded prompts within 1e-4, no tensor left", () => {
    const before = tf.memory().numTensors;
    const d = logitsDiff(preset.model, e.logits);
    console.log(`qwen [${backend}]: logits vs keras-hub, max |diff| ${d}`);
    expect(d).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("generateText: keras-hub's greedy strings (an end token hit and stripped)", async () => {
    const before = tf.memory().numTensors;
    for (const [maxLength, texts] of Object.entries(e.generate)) {
      expect(await generateText(preset, e.prompts, {maxLength: Number(maxLength)})).toEqual(texts);
    }
    expect(tf.memory().numTensors).toBe(before);
  });

  it("generate: keras-hub's greedy ids, the eager stepper agreeing at every position", async () => {
    const g = e.greedy;
    const before = tf.memory().numTensors;
    const reports: StepReport[] = [];
    const out = await generate(preset.model, g.token_ids, {
      maxLength: g.max_length,
      promptLengths: g.prompt_lengths,
      endId: null,
      onCompile: (r) => reports.push(r),
    });
    const ids = (await out.array()) as number[][];
    out.dispose();
    expect(ids).toEqual(g.tokens);
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({compiled: true, reason: null});
    const eager = eagerLogits(planOf(preset.model), ids, g.prompt_lengths, g.max_length);
    const first = Math.min(...g.prompt_lengths);
    let compared = 0;
    ids.forEach((row, b) => {
      for (let t = g.prompt_lengths[b]; t < g.max_length; t++) {
        const logits = eager[t - first][b];
        expect(logits.indexOf(Math.max(...logits))).toBe(row[t]);
        compared++;
      }
    });
    expect(compared).toBe(8 + 12 + 11);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("quantize(model, 'int8'): keras-hub's int8 logits within 1e-4, the compiled step's greedy ids are the eager stepper's", async () => {
    const before = tf.memory().numTensors;
    const q = quantize(preset.model, 'int8');
    const d = logitsDiff(q, e.int8_logits);
    console.log(`qwen [${backend}]: int8 logits vs keras-hub int8, max |diff| ${d}`);
    expect(d).toBeLessThan(TOL);
    const reports: StepReport[] = [];
    const g = e.greedy;
    const out = await generate(q, g.token_ids, {
      maxLength: g.max_length,
      promptLengths: g.prompt_lengths,
      endId: null,
      onCompile: (r) => reports.push(r),
    });
    const ids = (await out.array()) as number[][];
    out.dispose();
    expect(reports[0]).toMatchObject({compiled: true, reason: null});
    // the eager stepper on the int8 model picks the compiled step's token at every position
    const eager = eagerLogits(planOf(q), ids, g.prompt_lengths, g.max_length);
    const first = Math.min(...g.prompt_lengths);
    ids.forEach((row, b) => {
      for (let t = g.prompt_lengths[b]; t < g.max_length; t++) {
        const logits = eager[t - first][b];
        expect(logits.indexOf(Math.max(...logits))).toBe(row[t]);
      }
    });
    q.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('Qwen 2.5 from keras-hub: files, tokenizer, checks', () => {
  it("loadKerasModel(the task's .keras file): keras-hub's logits within 1e-4", async () => {
    const model = await loadKerasModel(path.join(DIR, 'qwen.keras'));
    const before = tf.memory().numTensors;
    expect(logitsDiff(model, e.logits)).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  it("the tokenizer: keras-hub's ids (tf.data) and strings on the corpus; Qwen's own split as 'model'", async () => {
    const tokenizer = await loadTokenizer(PRESET);
    expect(tokenizer).toBeInstanceOf(QwenTokenizer);
    const {texts, ids, strings, hf} = e.corpus;
    expect(texts.length).toBeGreaterThan(250);
    const got = texts.map((t) => tokenizer.encode(t));
    const wrong = texts.filter((_, i) => JSON.stringify(got[i]) !== JSON.stringify(ids[i]));
    expect(wrong).toEqual([]);
    const decoded = ids.map((row) => tokenizer.decode(row));
    const stringOf = (i: number) => strings[String(i)] ?? texts[i];
    expect(decoded.filter((s, i) => s !== stringOf(i))).toEqual([]);
    // lossy cases are there: a NUL ends keras-hub's text, an unpaired byte decodes to U+FFFD
    expect(Object.keys(strings).length).toBeGreaterThan(5);
    // Hugging Face's ids with Qwen's regex (one digit per piece, chat tokens whole): the 'model' split
    const model = await loadTokenizer(PRESET, {split: 'model'});
    const hfOf = (i: number) => hf[String(i)] ?? ids[i];
    const hfWrong = texts.filter(
      (t, i) => JSON.stringify(model.encode(t)) !== JSON.stringify(hfOf(i)),
    );
    expect(hfWrong).toEqual([]);
    expect(Object.keys(hf).length).toBeGreaterThan(5);
    expect(hfOf(texts.indexOf('12345'))).toHaveLength(5);
    expect(model.encode('<|im_start|>user')[0]).toBe(e.special_tokens['<|im_start|>']);
  });

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
