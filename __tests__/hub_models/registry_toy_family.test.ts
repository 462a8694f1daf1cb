/**
 * A keras-hub family defined outside src/ (a toy causal LM with its own decoder layer, norm and
 * tokenizer: __tests__/helpers/toy_family/) is added by one folder and one registration call,
 * loads from the `save_to_preset` folder keras-hub wrote (fixtures/toy_family.py), and gives
 * keras-hub's logits (within 1e-4: float32, two blocks of width 16) and keras-hub's greedy tokens
 * and strings (exactly), decoding on the compiled step through the family's own compile rules
 * (toy_family/toy_step_rules.ts) with the eager stepper's tokens.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {generate, generateText, loadKerasHubPreset, registerKerasHubFamily} from '../../src';
import type {KerasHubPreset, StepReport} from '../../src';
import {eagerLogits, planOf} from '../helpers/eager_logits';
import {TOY} from '../helpers/toy_family/toy_family';
import {ToyTokenizer} from '../helpers/toy_family/toy_tokenizer';

const DIR = path.join(__dirname, '..', 'fixtures', 'toy_family');
const PRESET = path.join(DIR, 'preset');
const TOL = 1e-4;

interface Expected {
  maxLength: number;
  prompts: string[];
  generate: Array<{prompt: string; text: string; tokenIds: number[]; paddingMask: boolean[]}>;
  logits: {prompt: string; tokenIds: number[]; shape: number[]; values: number[]};
  paddedLogits: {tokenIds: number[][]; paddingMask: number[][]; shape: number[]; values: number[]};
}
const expected = JSON.parse(fs.readFileSync(path.join(DIR, 'expected.json'), 'utf8')) as Expected;

describe('a keras-hub family added from one folder outside src/ (the toy family)', () => {
  let preset: KerasHubPreset;

  beforeAll(async () => {
    registerKerasHubFamily(TOY);
    preset = await loadKerasHubPreset(PRESET);
  });

  afterAll(() => preset?.dispose());

  it('loads the save_to_preset folder: the task, its tokenizer class and preprocessor', () => {
    expect(preset.model.inputs.map((i) => i.name)).toEqual(['token_ids', 'padding_mask']);
    expect(preset.model.outputs[0].shape).toEqual([null, null, 40]);
    expect(preset.model.layers.map((l) => l.getClassName())).toEqual(
      expect.arrayContaining(['ReversibleEmbedding', 'ToyDecoder', 'ToyRMSNorm']),
    );
    expect(preset.tokenizer).toBeInstanceOf(ToyTokenizer);
    expect(preset.preprocessor).toEqual({
      sequenceLength: 16,
      addStartToken: true,
      addEndToken: true,
    });
    // keras-hub's packed prompt: the start token, then the words' ids
    const tokenizer = preset.tokenizer as ToyTokenizer;
    for (const {prompt, tokenIds} of expected.generate) {
      const words = prompt.split(' ').length;
      expect([tokenizer.startTokenId, ...tokenizer.encode(prompt)]).toEqual(
        tokenIds.slice(0, words + 1),
      );
    }
  });

  it("gives keras-hub's logits (within 1e-4)", () => {
    const {tokenIds, shape, values} = expected.logits;
    const before = tf.memory().numTensors;
    const logits = tf.tidy(() => {
      const ids = tf.tensor2d([tokenIds], [1, tokenIds.length], 'int32');
      const out = preset.model.predict([ids, tf.onesLike(ids)]) as tf.Tensor;
      return {shape: out.shape, values: Array.from(out.dataSync())};
    });
    expect(logits.shape).toEqual(shape);
    const diff = logits.values.reduce((m, v, i) => Math.max(m, Math.abs(v - values[i])), 0);
    expect(diff).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("gives keras-hub's logits of right-padded prompts, its padding mask masking keys", () => {
    const {tokenIds, paddingMask, shape, values} = expected.paddedLogits;
    const before = tf.memory().numTensors;
    const logits = tf.tidy(() => {
      const ids = tf.tensor2d(tokenIds, [shape[0], shape[1]], 'int32');
      const mask = tf.tensor2d(paddingMask, [shape[0], shape[1]], 'int32');
      const out = preset.model.predict([ids, mask]) as tf.Tensor;
      return {shape: out.shape, values: Array.from(out.dataSync())};
    });
    expect(logits.shape).toEqual(shape);
    const diff = logits.values.reduce((m, v, i) => Math.max(m, Math.abs(v - values[i])), 0);
    expect(diff).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("generate: keras-hub's greedy token ids, on the compiled step (its report says so), the eager stepper's tokens", async () => {
    const tokenizer = preset.tokenizer as ToyTokenizer;
    const {maxLength} = expected;
    const packed = expected.prompts.map((p) => [tokenizer.startTokenId, ...tokenizer.encode(p)]);
    const lengths = packed.map((r) => r.length);
    const rows = packed.map((r) => [
      ...r,
      ...new Array<number>(maxLength - r.length).fill(tokenizer.padTokenId),
    ]);
    const before = tf.memory().numTensors;
    const reports: StepReport[] = [];
    const out = await generate(preset.model, rows, {
      maxLength,
      promptLengths: lengths,
      endId: tokenizer.endTokenId,
      padId: tokenizer.padTokenId,
      onCompile: (r) => reports.push(r),
    });
    const ids = (await out.array()) as number[][];
    out.dispose();
    expect(tf.memory().numTensors).toBe(before);
    // the family's compile rules (its stepRules) compiled the toy's decoder and norm
    expect(reports).toHaveLength(1);
    expect(reports[0]).toMatchObject({compiled: true, reason: null});
    // keras-hub's ids up to and including each row's stop token (its padding mask)
    expected.generate.forEach(({tokenIds, paddingMask}, b) => {
      const kept = paddingMask.filter((k) => k).length;
      expect(ids[b].slice(0, kept)).toEqual(tokenIds.slice(0, kept));
    });
    // the eager stepper (each node of the plan run eagerly, its own caches) fed the same ids picks
    // the same token at every generated position, up to each row's stop token
    const eager = eagerLogits(planOf(preset.model), ids, lengths, maxLength);
    const first = Math.min(...lengths);
    let compared = 0;
    ids.forEach((row, b) => {
      const stop = row.indexOf(tokenizer.endTokenId, lengths[b]);
      const last = stop < 0 ? maxLength - 1 : stop;
      for (let t = lengths[b]; t <= last; t++) {
        const logits = eager[t - first][b];
        expect(logits.indexOf(Math.max(...logits))).toBe(row[t]);
        compared++;
      }
    });
    expect(compared).toBeGreaterThan(expected.prompts.length);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("generateText: keras-hub's greedy strings", async () => {
    const before = tf.memory().numTensors;
    const texts = await generateText(preset, expected.prompts, {maxLength: expected.maxLength});
    expect(texts).toEqual(expected.generate.map((g) => g.text));
    expect(tf.memory().numTensors).toBe(before);
  });
});
