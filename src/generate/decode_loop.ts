/**
 * The one decoding loop of `generate`, after keras-hub's `Sampler.__call__(next, prompt, cache,
 * index)`: positions from the shortest prompt to `maxLength - 1`, each one asking a step function
 * for the logits that choose its token, keeping prompt tokens, stopping rows at the end token
 * (the rest of a row stays `padId`). How the logits are computed (a key / value cache, or the
 * whole prefix again) is the step function's business; the loop, end tokens, padding and
 * `onStep` are written here only.
 */
import type * as tf from '@tensorflow/tfjs-core';

import {SamplerOptions, sampleNext} from './samplers';

/**
 * One decoding step (keras-hub's `next`): the logits `[batch, vocab]` that choose the tokens at
 * position `index`, computed from `ids[b][0 .. index - 1]`; `active[b]` says whether row b takes
 * a token there. The logits are a tensor (which the loop reads and disposes) or one Float32Array
 * row per batch row (a compiled step, which computes them without tfjs). A step may return null
 * when no row is active (it may still advance its own state, as a cache must).
 */
export interface DecodeStep {
  next(ids: number[][], index: number, active: readonly boolean[]): StepLogits | null;
  /** Frees what the step holds (caches); called once, when the loop ends or fails. */
  dispose(): void;
}

/** The logits of one step: a tensor `[batch, vocab]`, or one row per batch row. */
export type StepLogits = tf.Tensor2D | Float32Array[];

/** The rows of a step's logits (a tensor is read asynchronously, then disposed). */
async function logitRows(logits: StepLogits): Promise<ArrayLike<number>[]> {
  if (Array.isArray(logits)) return logits;
  // read asynchronously: webgpu's synchronous read is unreliable
  try {
    return (await logits.array()) as number[][];
  } finally {
    logits.dispose();
  }
}

/** What the loop needs besides the step. */
export interface DecodeLoopOptions extends SamplerOptions {
  /** Each row's prompt length: positions before it keep their ids. */
  lengths: readonly number[];
  /** A row stops after choosing one of these tokens. */
  endIds: readonly number[];
  /**
   * Called after each position that chose tokens, with the token each row chose there (null for
   * a row that chose none: still in its prompt, or stopped).
   */
  onStep?: (position: number, tokens: ReadonlyArray<number | null>) => void;
}

/**
 * Fills `ids` (`[batch, maxLength]`: prompts, then `padId`) in place, position by position from
 * the shortest prompt on; disposes `step` at the end.
 */
export async function decodeLoop(
  step: DecodeStep,
  ids: number[][],
  options: DecodeLoopOptions,
  rng: () => number,
): Promise<void> {
  const {lengths, endIds} = options;
  const B = ids.length;
  const maxLength = ids[0]?.length ?? 0;
  const done = new Array<boolean>(B).fill(false);
  try {
    for (let t = Math.min(...lengths); t < maxLength; t++) {
      if (done.every(Boolean)) break; // no row can take a token again
      const active = ids.map((_, b) => t >= lengths[b] && !done[b]);
      const logits = step.next(ids, t, active);
      if (logits == null) continue;
      if (!active.some(Boolean)) {
        if (!Array.isArray(logits)) logits.dispose();
        continue;
      }
      const values = await logitRows(logits);
      for (let b = 0; b < B; b++) {
        if (!active[b]) continue;
        ids[b][t] = sampleNext(values[b], options, rng, `row ${b} at position ${t}`);
        if (endIds.includes(ids[b][t])) done[b] = true;
      }
      options.onStep?.(
        t,
        active.map((a, b) => (a ? ids[b][t] : null)),
      );
    }
  } finally {
    step.dispose();
  }
}
