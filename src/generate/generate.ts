/**
 * Text generation with a causal language model (token ids `[batch, T]` -> logits
 * `[batch, T, vocab]`), token by token, as keras-hub's `generate` does: right-padded prompts,
 * a sampler, an end token, a total length.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {mulberry32} from '../ops/random';
import {checkModelInputs, modelInputs} from './model_inputs';
import {checkSampler, SamplerOptions, sampleNext} from './samplers';

export interface GenerateOptions extends SamplerOptions {
  /** Total length of each returned sequence, prompt included. */
  maxLength: number;
  /** Each prompt's length (prompts are right-padded); default: up to the first `padId`. */
  promptLengths?: number[];
  /** Generation of a row stops after this token (the rest is `padId`). */
  endId?: number | null;
  /** Padding token. Default 0. */
  padId?: number;
  /** Seed of the samplers that draw at random. */
  seed?: number;
  /**
   * Cached decoding for functional models is not available yet: `true` is an error saying so;
   * the default recomputes the whole prefix at each step.
   */
  useCache?: boolean;
}

function promptRows(prompts: tf.Tensor | number[][]): number[][] {
  if (prompts instanceof tf.Tensor) {
    if (prompts.rank !== 2 || prompts.dtype !== 'int32') {
      throw new Error(
        `generate: expected int32 prompts of shape [batch, length], received ${prompts.dtype} of ` +
          `shape [${prompts.shape.join(', ')}]`,
      );
    }
    return prompts.arraySync() as number[][];
  }
  if (
    !Array.isArray(prompts) ||
    !prompts.every((r) => Array.isArray(r) && r.every(Number.isInteger))
  ) {
    throw new Error(
      'generate: expected prompts as an int32 tensor or an array of arrays of token ids',
    );
  }
  return prompts;
}

/**
 * Generates up to `maxLength` tokens per row (prompt included) with a causal LM.
 *
 * ```js
 * const ids = await generate(model, [[5, 3, 0, 0]], {maxLength: 12, promptLengths: [2], endId: 1});
 * ```
 *
 * @returns int32 ids `[batch, maxLength]`.
 */
export async function generate(
  model: LayersModel,
  prompts: tf.Tensor | number[][],
  options: GenerateOptions,
): Promise<tf.Tensor2D> {
  checkSampler(options);
  checkModelInputs(model);
  const rows = promptRows(prompts);
  const {maxLength} = options;
  const padId = options.padId ?? 0;
  const endId = options.endId ?? null;
  if (options.useCache === true) {
    throw new Error(
      'generate: cached decoding of a functional model is not available yet; omit useCache to ' +
        'recompute the prefix at each step (MultiHeadAttention and GroupQueryAttention take a ' +
        'cache in eager calls)',
    );
  }
  const lengths =
    options.promptLengths ??
    rows.map((r) => {
      const i = r.indexOf(padId);
      return i === -1 ? r.length : i;
    });
  if (lengths.length !== rows.length) {
    throw new Error(`generate: expected ${rows.length} promptLengths, received ${lengths.length}`);
  }
  const fixed = model.inputs[0].shape[1];
  if (!(Number.isInteger(maxLength) && maxLength > 0) || (fixed != null && maxLength > fixed)) {
    throw new Error(
      `generate: expected maxLength to be a whole number in [1, ${fixed ?? 'any'}], received ${maxLength}`,
    );
  }
  lengths.forEach((n, b) => {
    if (!(Number.isInteger(n) && n >= 1 && n <= Math.min(maxLength, rows[b].length))) {
      throw new Error(
        `generate: prompt ${b} has length ${n}; expected 1 to ${Math.min(maxLength, rows[b].length)}`,
      );
    }
  });
  const B = rows.length;
  const ids = rows.map((r, b) => [
    ...r.slice(0, lengths[b]),
    ...new Array(maxLength - lengths[b]).fill(padId),
  ]);
  const done = new Array(B).fill(false);
  const rng = mulberry32(options.seed ?? Math.floor(Math.random() * 2 ** 32));
  for (let t = Math.min(...lengths); t < maxLength; t++) {
    const active = ids.map((_, b) => t >= lengths[b] && !done[b]);
    if (!active.some(Boolean)) continue;
    // logits at position t - 1 predict token t; a causal model sees only positions < t there
    const width = fixed ?? t;
    const logits = tf.tidy(() => {
      const known = lengths.map((n) => Math.max(n, t));
      const out = model.predict(modelInputs(model, ids, width, known)) as tf.Tensor;
      const V = out.shape[2] as number;
      return tf.reshape(tf.slice(out, [0, t - 1, 0], [B, 1, V]), [B, V]);
    });
    const values = (await logits.array()) as number[][];
    logits.dispose();
    for (let b = 0; b < B; b++) {
      if (!active[b]) continue;
      ids[b][t] = sampleNext(values[b], options, rng);
      if (endId != null && ids[b][t] === endId) done[b] = true;
    }
  }
  return tf.tensor2d(ids, [B, maxLength], 'int32');
}
