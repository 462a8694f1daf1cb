/**
 * The eager stepper (src/generate/graph_step.ts) as a reference for decoding tests: a model's
 * step plan, the logits of each position as generate feeds the stepper, and the largest
 * difference between two runs of logits.
 */
import * as tf from '@tensorflow/tfjs';

import {planCachedDecoding, StepPlan} from '../../src/generate/graph_plan';
import {GraphStepper} from '../../src/generate/graph_step';

/** The model's cached-decoding plan; throws with the reason where it has none. */
export function planOf(model: tf.LayersModel): StepPlan {
  const {plan, reason} = planCachedDecoding(model);
  if (plan == null) throw new Error(`no plan: ${reason}`);
  return plan;
}

/** The eager stepper's logits of each position from the shortest prompt on, as generate feeds it. */
export function eagerLogits(
  plan: StepPlan,
  ids: number[][],
  lengths: number[],
  max: number,
): number[][][] {
  const B = ids.length;
  const stepper = new GraphStepper(plan, B, max);
  const feed = (from: number, to: number) => {
    const chunk = ids.map((r) => r.slice(from, to));
    const t = tf.tensor2d(chunk, [B, to - from], 'int32');
    try {
      return stepper.step(t, chunk);
    } finally {
      t.dispose();
    }
  };
  const out: number[][][] = [];
  try {
    for (let index = Math.min(...lengths); index < max; index++) {
      if (stepper.position < index - 1) feed(stepper.position, index - 1).dispose();
      const logits = feed(index - 1, index);
      out.push(logits.arraySync());
      logits.dispose();
    }
  } finally {
    stepper.dispose();
  }
  return out;
}

/** max |a - b| over every step, row and logit (NaN: Infinity). */
export function maxDiff(a: number[][][], b: Float32Array[][]): number {
  let m = 0;
  a.forEach((step, s) =>
    step.forEach((row, r) =>
      row.forEach((v, j) => {
        const d = Math.abs(v - b[s][r][j]);
        m = Number.isNaN(d) ? Infinity : Math.max(m, d);
      }),
    ),
  );
  return m;
}
