/**
 * The checks a family's compiled-step tests share: the compiled step's logits at each position
 * (as generate feeds it) against the eager stepper's within 1e-4 with the same greedy pick, and
 * generate's greedy tokens with its onCompile report.
 */
import * as tf from '@tensorflow/tfjs';

import {generate} from '../../src';
import type {StepReport} from '../../src';
import {compiledStep} from '../../src/generate/compiled_step';
import type {DecodeStep} from '../../src/generate/decode_loop';
import {eagerLogits, maxDiff, planOf} from './eager_logits';

const TOL = 1e-4;

/** The compiled step's logits of each position from the shortest prompt on, as generate feeds it. */
export function compiledLogits(
  model: tf.LayersModel,
  ids: number[][],
  lengths: number[],
  max: number,
): {logits: Float32Array[][]; report: StepReport} {
  const made = compiledStep(planOf(model), ids, lengths, max);
  if (made.step == null) throw new Error(`not compiled: ${made.reason}`);
  const step = made.step as DecodeStep;
  const out: Float32Array[][] = [];
  try {
    for (let index = Math.min(...lengths); index < max; index++) {
      out.push(
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
  return {logits: out, report: made.report};
}

/** Index of the largest value (the first of ties). */
export const argmax = (row: ArrayLike<number>) =>
  Array.from(row).reduce((best, v, i, a) => (v > a[best] ? i : best), 0);

/** The compiled and eager logits agree within TOL, and pick the same greedy token, at every position. */
export function expectSameSteps(
  model: tf.LayersModel,
  ids: number[][],
  lengths: number[],
  max: number,
) {
  const eager = eagerLogits(planOf(model), ids, lengths, max);
  const {logits, report} = compiledLogits(model, ids, lengths, max);
  expect(report.compiled).toBe(true);
  expect(maxDiff(eager, logits)).toBeLessThan(TOL);
  eager.forEach((step, s) =>
    step.forEach((row, b) => expect(argmax(logits[s][b])).toBe(argmax(row))),
  );
}

/** generate's greedy tokens with its onCompile report. */
export async function generated(
  model: tf.LayersModel,
  g: {token_ids: number[][]; prompt_lengths: number[]; max_length: number},
): Promise<{tokens: number[][]; report: StepReport | null}> {
  let report: StepReport | null = null;
  const ids = await generate(model, g.token_ids, {
    maxLength: g.max_length,
    promptLengths: g.prompt_lengths,
    onCompile: (r) => (report = r),
  });
  const tokens = (await ids.array()) as number[][];
  ids.dispose();
  return {tokens, report};
}
