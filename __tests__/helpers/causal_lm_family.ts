/**
 * The keras-hub fixtures of a causal LM family as fixtures/causal_lm_fixture.py writes them
 * (__tests__/fixtures/<family>/: preset/, task.keras, expected.json), and the checks every such
 * family's tests make against them: the compiled step's logits at each position against the eager
 * stepper's, and generate's greedy ids with its report.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {generate} from '../../src';
import type {StepReport} from '../../src';
import {compiledStep} from '../../src/generate/compiled_step';
import type {DecodeStep} from '../../src/generate/decode_loop';
import {eagerLogits, maxDiff, planOf} from './eager_logits';

/** Logits as the fixture holds them: token ids, shape, values row-major. */
export interface FixtureLogits {
  tokenIds: number[] | number[][];
  paddingMask?: number[][];
  shape: number[];
  values: number[];
}

/** expected.json of a causal LM family fixture. */
export interface CausalLMExpected {
  maxLength: number;
  prompts: string[];
  stopTokenIds: number[];
  generate: Array<{prompt: string; text: string; tokenIds: number[]; paddingMask: boolean[]}>;
  preprocess: {tokenIds: number[][]; paddingMask: number[][]};
  logits: FixtureLogits;
  paddedLogits: FixtureLogits;
  int8Logits: {shape: number[]; values: number[]} | {error: string};
  tokenizer: {texts: string[]; ids: number[][]; detokenized: string[]};
}

/** The fixture folder of `family` and its expected.json. */
export function causalLMFixture(family: string): {
  dir: string;
  preset: string;
  taskFile: string;
  expected: CausalLMExpected;
} {
  const dir = path.join(__dirname, '..', 'fixtures', family);
  const expected = JSON.parse(
    fs.readFileSync(path.join(dir, 'expected.json'), 'utf8'),
  ) as CausalLMExpected;
  return {dir, preset: path.join(dir, 'preset'), taskFile: path.join(dir, 'task.keras'), expected};
}

/** The model's logits of the fixture's inputs (all-ones padding mask unless it has one). */
export function predictLogits(model: tf.LayersModel, l: FixtureLogits): Float32Array {
  return tf.tidy(() => {
    const rows = (Array.isArray(l.tokenIds[0]) ? l.tokenIds : [l.tokenIds]) as number[][];
    const ids = tf.tensor2d(rows, [rows.length, rows[0].length], 'int32');
    const mask =
      l.paddingMask != null
        ? tf.tensor2d(l.paddingMask, [rows.length, rows[0].length], 'int32')
        : tf.onesLike(ids);
    const out = model.predict([ids, mask]) as tf.Tensor;
    expect(out.shape).toEqual(l.shape);
    return out.dataSync() as Float32Array;
  });
}

/** max |a - b|. */
export function largestDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

/** The prompts packed as keras-hub's generate packs them: the ids and each row's length. */
export function packedPrompts(e: CausalLMExpected): {rows: number[][]; lengths: number[]} {
  const lengths = e.preprocess.paddingMask.map((m) => m.reduce((a, b) => a + b, 0));
  return {rows: e.preprocess.tokenIds, lengths};
}

/** generate's greedy ids of the packed prompts, with its onCompile report. */
export async function generatedIds(
  model: tf.LayersModel,
  e: CausalLMExpected,
  padId: number,
): Promise<{ids: number[][]; report: StepReport | null}> {
  const {rows, lengths} = packedPrompts(e);
  let report: StepReport | null = null;
  const out = await generate(model, rows, {
    maxLength: e.maxLength,
    promptLengths: lengths,
    endId: e.stopTokenIds,
    padId,
    onCompile: (r) => (report = r),
  });
  const ids = (await out.array()) as number[][];
  out.dispose();
  return {ids, report};
}

/**
 * keras-hub's greedy ids equal `ids` in each row up to and including its first stop token, and
 * `ids` hold `padId` after it (generate stopped the row there; keras-hub's ids go on past it).
 */
export function expectKerasHubIds(e: CausalLMExpected, ids: number[][], padId: number): void {
  e.generate.forEach(({tokenIds, paddingMask}, b) => {
    const kept = paddingMask.filter((k) => k).length;
    expect(ids[b].slice(0, kept)).toEqual(tokenIds.slice(0, kept));
    expect(ids[b].slice(kept)).toEqual(new Array<number>(tokenIds.length - kept).fill(padId));
  });
}

/** Index of the largest value (the first of ties). */
const argmax = (row: ArrayLike<number>) =>
  Array.from(row).reduce((best, v, i, a) => (v > a[best] ? i : best), 0);

/**
 * The compiled step's logits against the eager stepper's at every position of keras-hub's
 * greedy rows (within `tol`, the same greedy token); returns the compiled step's report.
 */
export function expectCompiledMatchesEager(
  model: tf.LayersModel,
  e: CausalLMExpected,
  tol: number,
): StepReport {
  const ids = e.generate.map((g) => g.tokenIds);
  const {lengths} = packedPrompts(e);
  const max = e.maxLength;
  const eager = eagerLogits(planOf(model), ids, lengths, max);
  const made = compiledStep(planOf(model), ids, lengths, max);
  if (made.step == null) throw new Error(`not compiled: ${made.reason}`);
  const step = made.step as DecodeStep;
  const compiled: Float32Array[][] = [];
  try {
    for (let index = Math.min(...lengths); index < max; index++) {
      compiled.push(
        step.next(
          ids,
          index,
          lengths.map((n) => index >= n),
        ) as Float32Array[],
      );
    }
  } finally {
    step.dispose();
  }
  expect(maxDiff(eager, compiled)).toBeLessThan(tol);
  eager.forEach((s, i) => s.forEach((row, b) => expect(argmax(compiled[i][b])).toBe(argmax(row))));
  return made.report;
}
