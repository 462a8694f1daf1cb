/**
 * Gemma 3 presets that keras-hub 0.32 saved (fixtures/gemma3_family.py): the SentencePiece
 * Gemma3Tokenizer's ids (tokenized in tf.data, as the preprocessor does) and strings on a corpus
 * with whitespace runs, accents, CJK, emoji, digits, NUL and special tokens; greedy
 * `generateText` equal to keras-hub's `generate` strings (its preprocessor: `<bos>` first, stop
 * tokens `<eos>` / `<end_of_turn>`, special tokens stripped) from the preset folder and the task's
 * `.keras` file; `loadKerasModel`'s logits; `embedText` on the text embedder's preset within 1e-5
 * of keras-hub's `predict`.
 */
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  embedText,
  Gemma3Tokenizer,
  generateText,
  loadKerasHubPreset,
  loadKerasModel,
  loadTokenizer,
} from '../../src';
import {describeBackends} from '../helpers/backends';
import {hubFixture} from '../helpers/hub_families_fixture';

const DIR = path.join(__dirname, '..', 'fixtures', 'gemma3');
const lm = hubFixture('../gemma3/causal_lm').io as unknown as {
  inputs: Record<string, number[][]>;
  logits: number[][][];
  prompts: string[];
  prompt_ids: number[][];
  generate_strings: Record<string, string[]>;
  corpus: {texts: string[]; ids: number[][]; strings: string[]};
  stop_token_ids: number[];
};
const emb = hubFixture('../gemma3/embedder').io as unknown as {
  texts: string[];
  embeddings: number[][];
};

async function logitsOf(model: tf.LayersModel): Promise<number[][][]> {
  const xs = ['token_ids', 'padding_mask'].map((n) =>
    tf.tensor2d(lm.inputs[n], undefined, 'int32'),
  );
  const out = model.predict(xs) as tf.Tensor;
  const values = (await out.array()) as number[][][];
  tf.dispose([out, ...xs]);
  return values;
}

function maxDiff(a: number[][][] | number[][], b: number[][][] | number[][]): number {
  const x = (a as number[][]).flat(2) as number[];
  const y = (b as number[][]).flat(2) as number[];
  expect(x.length).toBe(y.length);
  return x.reduce((m, v, i) => Math.max(m, Math.abs(v - y[i])), 0);
}

describe('Gemma3Tokenizer from a keras-hub preset', () => {
  it("ids and strings equal keras-hub's on the corpus; its start, end, pad and stop tokens", async () => {
    const tokenizer = await loadTokenizer(path.join(DIR, 'causal_lm', 'preset'));
    expect(tokenizer).toBeInstanceOf(Gemma3Tokenizer);
    expect(lm.corpus.texts.map((t) => tokenizer.encode(t))).toEqual(lm.corpus.ids);
    expect(lm.corpus.ids.map((ids) => tokenizer.decode(ids))).toEqual(lm.corpus.strings);
    expect([tokenizer.startTokenId, tokenizer.endTokenId, tokenizer.padTokenId]).toEqual([2, 1, 0]);
    expect((tokenizer as Gemma3Tokenizer).stopTokenIds).toEqual(lm.stop_token_ids);
  });
});

describeBackends('Gemma 3 presets', () => {
  it("from the preset folder: greedy generateText equals keras-hub's generate, logits within 1e-4", async () => {
    const before = tf.memory().numTensors;
    const preset = await loadKerasHubPreset(path.join(DIR, 'causal_lm', 'preset'));
    expect(preset.preprocessor).toEqual({
      sequenceLength: 16,
      addStartToken: true,
      addEndToken: true,
    });
    expect(lm.prompts.map((p) => preset.tokenizer?.encode(p))).toEqual(lm.prompt_ids);
    const gen = {
      model: preset.model,
      tokenizer: preset.tokenizer,
      preprocessor: preset.preprocessor,
    };
    for (const [maxLength, strings] of Object.entries(lm.generate_strings)) {
      expect(await generateText(gen, lm.prompts, {maxLength: Number(maxLength)})).toEqual(strings);
    }
    expect(maxDiff(await logitsOf(preset.model), lm.logits)).toBeLessThan(1e-4);
    preset.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('the text embedder preset: embedText within 1e-5 of keras-hub', async () => {
    const before = tf.memory().numTensors;
    const preset = await loadKerasHubPreset(path.join(DIR, 'embedder', 'preset'));
    expect(preset.preprocessor?.sequenceLength).toBe(8);
    expect(maxDiff(await embedText(preset, emb.texts), emb.embeddings)).toBeLessThan(1e-5);
    preset.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('Gemma 3 .keras task files', () => {
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });

  it('the causal LM: generateText and loadKerasModel', async () => {
    const before = tf.memory().numTensors;
    const file = path.join(DIR, 'causal_lm', 'causal_lm.keras');
    const preset = await loadKerasHubPreset(file);
    const gen = {
      model: preset.model,
      tokenizer: preset.tokenizer,
      preprocessor: preset.preprocessor,
    };
    expect(await generateText(gen, lm.prompts, {maxLength: 16})).toEqual(lm.generate_strings['16']);
    preset.dispose();
    const model = await loadKerasModel(file);
    expect(maxDiff(await logitsOf(model), lm.logits)).toBeLessThan(1e-4);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('the text embedder: embedText', async () => {
    const preset = await loadKerasHubPreset(path.join(DIR, 'embedder', 'embedder.keras'));
    expect(maxDiff(await embedText(preset, emb.texts), emb.embeddings)).toBeLessThan(1e-5);
    preset.dispose();
  });
});
