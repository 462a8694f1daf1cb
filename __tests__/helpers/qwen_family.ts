/**
 * The checks the Qwen 2.5 and Qwen 3 tests share against fixtures/qwen_family.py's fixtures
 * (__tests__/fixtures/<family>/: preset/, <family>.keras, expected.json): logits of right-padded
 * prompts within 1e-4 (and of keras-hub's int8 model), generateText's strings, generate's greedy ids
 * with the eager stepper agreeing at every position, the task's .keras file, the tokenizer on the
 * corpus; each check leaves no tensor behind.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {generate, generateText, loadKerasModel, loadTokenizer, quantize} from '../../src';
import type {KerasHubPreset, StepReport, Tokenizer} from '../../src';
import {eagerLogits, planOf} from './eager_logits';

const TOL = 1e-4;

/** expected.json of a Qwen family fixture. */
export interface QwenExpected {
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

/** The fixture folder of `family` (qwen, qwen3), its preset folder and its expected.json. */
export function qwenFixture(family: string): {dir: string; preset: string; e: QwenExpected} {
  const dir = path.join(__dirname, '..', 'fixtures', family);
  const e = JSON.parse(fs.readFileSync(path.join(dir, 'expected.json'), 'utf8')) as QwenExpected;
  return {dir, preset: path.join(dir, 'preset'), e};
}

/** max |model(preprocessed) - expected| over every logit. */
function logitsDiff(e: QwenExpected, model: tf.LayersModel, expected: number[][][]): number {
  return tf.tidy(() => {
    const ids = tf.tensor2d(e.preprocessed.token_ids, undefined, 'int32');
    const mask = tf.tensor2d(e.preprocessed.padding_mask, undefined, 'int32');
    const out = model.predict([ids, mask]) as tf.Tensor;
    expect(out.shape).toEqual([3, 8, 420]);
    return tf.max(tf.abs(tf.sub(out, tf.tensor(expected)))).dataSync()[0];
  });
}

/** The checks on one backend's loaded preset (inside a describeBackends block). */
export function qwenPresetChecks(
  family: string,
  backend: string,
  e: QwenExpected,
  presetOf: () => KerasHubPreset,
): void {
  it("gives keras-hub's logits of right-padded prompts within 1e-4, no tensor left", () => {
    const before = tf.memory().numTensors;
    const d = logitsDiff(e, presetOf().model, e.logits);
    console.log(`${family} [${backend}]: logits vs keras-hub, max |diff| ${d}`);
    expect(d).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
  });

  it("generateText: keras-hub's greedy strings (an end token hit and stripped)", async () => {
    const before = tf.memory().numTensors;
    for (const [maxLength, texts] of Object.entries(e.generate)) {
      expect(await generateText(presetOf(), e.prompts, {maxLength: Number(maxLength)})).toEqual(
        texts,
      );
    }
    expect(tf.memory().numTensors).toBe(before);
  });

  it("generate: keras-hub's greedy ids, the eager stepper agreeing at every position", async () => {
    const g = e.greedy;
    const before = tf.memory().numTensors;
    const reports: StepReport[] = [];
    const out = await generate(presetOf().model, g.token_ids, {
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
    const eager = eagerLogits(planOf(presetOf().model), ids, g.prompt_lengths, g.max_length);
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
    const q = quantize(presetOf().model, 'int8');
    const d = logitsDiff(e, q, e.int8_logits);
    console.log(`${family} [${backend}]: int8 logits vs keras-hub int8, max |diff| ${d}`);
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
}

/** The checks on the task's .keras file and the tokenizer (outside the backend blocks). */
export function qwenFileChecks(
  family: string,
  f: {dir: string; preset: string; e: QwenExpected},
  tokenizerClass: new (...args: never[]) => Tokenizer,
): void {
  const {dir: DIR, preset: PRESET, e} = f;
  it("loadKerasModel(the task's .keras file): keras-hub's logits within 1e-4", async () => {
    const model = await loadKerasModel(path.join(DIR, `${family}.keras`));
    const before = tf.memory().numTensors;
    expect(logitsDiff(e, model, e.logits)).toBeLessThan(TOL);
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  it("the tokenizer: keras-hub's ids (tf.data) and strings on the corpus; Qwen's own split as 'model'", async () => {
    const tokenizer = await loadTokenizer(PRESET);
    expect(tokenizer).toBeInstanceOf(tokenizerClass);
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
}
