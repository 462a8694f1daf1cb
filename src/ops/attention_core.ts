/**
 * The one attention core of the package, as Keras layers share `ops.dot_product_attention`:
 * `softmax(mask(scale · q kᵀ)) v`, with dropout on the weights, optional returned weights, and
 * blocks of queries for long sequences (the scores then never exist whole).
 *
 * Every layer that computes softmax(q kᵀ) v calls {@link dotProductAttention}; layers whose
 * scores are not a dot product (additive, concat) call {@link attendToScores} with their logits.
 *
 * Shapes: any number of leading (batch-like) axes `L`, then queries `T` or keys `S`, then
 * features: `query [...L, T, K]`, `key [...L, S, K]`, `value [...L, S, V]` -> output
 * `[...L, T, V]`, weights `[...L, T, S]`. The mask has the weights' rank and broadcasts to them.
 *
 * Grouped key / value heads (grouped-query attention, as Keras' `ops.dot_product_attention` and
 * Flax): a query with one axis more than the key, `query [...L, G, T, K]` against
 * `key [...L, S, K]`, `value [...L, S, V]`: the G query slices share one key / value slice (one
 * product of G * T rows each; keys and values are not copied); output `[...L, G, T, V]`, weights
 * and mask `[...L, G, T, S]`.
 */
import * as tf from '@tensorflow/tfjs-core';

import {blockThresholds, ownKernels} from '../kernels/flags';
import {softmaxWithFill} from '../kernels/fused_softmax';
import {fanOut} from '../kernels/fan_out';
import {maskFill} from './masking';
import {matMul, mm} from '../kernels/matmul';
import {reshapeTo} from './reshape';
import {swapAxes12} from '../kernels/swap_axes';

export interface AttentionCoreOptions {
  /** bool (or 0/1) mask of the weights' rank, broadcastable to `[...L, T, S]`; true = attend. */
  mask?: tf.Tensor | null;
  /** Multiplies the logits (a number, or a scalar tensor such as a trainable scale). */
  scale?: number | tf.Tensor | null;
  /** Dropout rate on the weights, applied when `training`. */
  dropout?: number;
  training?: boolean;
  /** Seed of the next dropout mask (called once per mask); undefined = unseeded. */
  nextSeed?: () => number | undefined;
  /** Compute and return the weights (the layers' `returnAttentionScores`). */
  returnAttentionScores?: boolean;
  /** Return the weights after dropout (Keras `Attention`) rather than before. */
  scoresAfterDropout?: boolean;
  /**
   * Queries per block (MultiHeadAttention's `chunkSize`): null = automatic (see flags.ts), 0 = one
   * block.
   */
  chunkSize?: number | null;
  /**
   * Weights of a query with no allowed key: uniform (false, the default, as tf-keras and Keras'
   * fused path) or 0 (true, as Keras >= 3.10's explicit path: the output row is then 0).
   */
  zeroFullyMaskedRows?: boolean;
}

export interface AttentionCoreResult {
  output: tf.Tensor;
  /** The weights `[...L, T, S]`, or null unless `returnAttentionScores`. */
  scores: tf.Tensor | null;
}

function dropWeights(weights: tf.Tensor, o: AttentionCoreOptions): tf.Tensor {
  if (o.training !== true || !o.dropout) return weights;
  return tf.dropout(weights, o.dropout, undefined, o.nextSeed?.());
}

/**
 * The dropout multiplier of the whole weights `shape` (tf.dropout's own formula, one seed per
 * call), so query blocks drop exactly what one block would: results never depend on blocking.
 */
function dropoutMultiplier(shape: number[], o: AttentionCoreOptions): tf.Tensor | null {
  if (o.training !== true || !o.dropout) return null;
  const keep = 1 - o.dropout;
  const uniform = tf.randomUniform(shape, 0, 1, 'float32', o.nextSeed?.());
  return tf.div(tf.floor(tf.add(uniform, keep)), keep); // [...L, T, S]
}

function scaled(logits: tf.Tensor, scale: AttentionCoreOptions['scale']): tf.Tensor {
  return scale == null || scale === 1 ? logits : tf.mul(logits, scale);
}

/** With `zeroFullyMaskedRows`, 1 for query rows with an allowed key and 0 for the others. */
function maskedRows(o: AttentionCoreOptions, rank: number): tf.Tensor | null {
  if (!o.zeroFullyMaskedRows || o.mask == null) return null;
  let m = o.mask.dtype === 'bool' ? o.mask : tf.cast(o.mask, 'bool');
  while (m.rank < rank) m = tf.expandDims(m, 0);
  return tf.cast(tf.any(m, -1, true), 'float32'); // [...L|1, T|1, 1]
}

/** Query blocks `[start, end)` for `n` leading slices of `T x S` scores. */
export function queryBlocks(
  n: number,
  T: number,
  S: number,
  chunkSize: number | null | undefined,
): Array<[number, number]> {
  let size = chunkSize ?? 0;
  if (chunkSize == null) {
    const {above, target} = blockThresholds();
    size = n * T * S > above ? Math.max(1, Math.floor(target / (n * S))) : 0;
  }
  const step = size > 0 ? size : Math.max(T, 1);
  const blocks: Array<[number, number]> = [];
  for (let start = 0; start < T; start += step) blocks.push([start, Math.min(T, start + step)]);
  return blocks.length > 0 ? blocks : [[0, T]];
}

/**
 * Splits `x` `[n, R, X]` along axis 1 into parts of `sizes` rows, by one split (its gradient is
 * one concat; a slice's is a pad to the whole `x`, then an add per part). tfjs' cpu split copies
 * a piece that is not contiguous element by element (~45 ms for [4, 512, 32] of [4, 2048, 32];
 * 641 ms of a 719 ms cached decoding step at batch 300): on cpu with the package's kernels, `x` is
 * laid out once as `[R, n, X]` (a head swap, a copy of contiguous rows), where each part is
 * contiguous, and each part swapped back. Query blocks and the key / value cache use it.
 */
export function splitRows(x: tf.Tensor, sizes: number[]): tf.Tensor[] {
  const [n, R, X] = x.shape as [number, number, number];
  if (!(n > 1 && ownKernels() && tf.getBackend() === 'cpu')) return tf.split(x, sizes, 1);
  const rows = swapAxes12(tf.reshape(x, [1, n, R, X])); // [1, R, n, X]
  return tf.split(rows, sizes, 1).map((part, i) => tf.reshape(swapAxes12(part), [n, sizes[i], X])); // [n, c, X]
}

/**
 * The blocks' outputs `[n, c, V]` joined along axis 1 into `[n, T, V]`. On cpu with the package's
 * kernels they are joined in the `[T, n, V]` layout (between head swaps), so that the gradient
 * (a split) cuts contiguous rows: tfjs' cpu split of `[n, T, V]` along axis 1 copies element by
 * element (~120 ms at 2048 tokens).
 */
function concatRows(outputs: tf.Tensor[]): tf.Tensor {
  const [n, , V] = (outputs[0] as tf.Tensor).shape;
  if (!(n > 1 && ownKernels() && tf.getBackend() === 'cpu')) return tf.concat(outputs, 1);
  const rows = outputs.map((o) => swapAxes12(tf.reshape(o, [1, n, o.shape[1] as number, V])));
  const joined = swapAxes12(tf.concat(rows, 1)); // [1, n, T, V]
  return tf.reshape(joined, joined.shape.slice(1)); // [n, T, V]
}

/** Rows `[start, end)` of axis `rank - 2` of the fill (unless it broadcasts there). */
function fillRows(fill: tf.Tensor | null, start: number, end: number, whole: boolean) {
  if (fill == null || whole || fill.shape[fill.rank - 2] === 1) return fill;
  const begin = fill.shape.map(() => 0);
  begin[fill.rank - 2] = start;
  const size = [...fill.shape];
  size[fill.rank - 2] = end - start;
  return tf.slice(fill, begin, size);
}

/**
 * Scaled dot-product attention over the last two axes, in blocks of queries.
 *
 * @param query `[...L, T, K]` (scaled already, or see `options.scale`), or `[...L, G, T, K]`
 *   for G query slices per key / value slice (grouped heads).
 * @param key `[...L, S, K]`.
 * @param value `[...L, S, V]`.
 */
export function dotProductAttention(
  query: tf.Tensor,
  key: tf.Tensor,
  value: tf.Tensor,
  options: AttentionCoreOptions = {},
): AttentionCoreResult {
  const [output, scores] = tf.tidy(() => {
    const r = dotProduct(query, key, value, options);
    return r.scores == null ? [r.output] : [r.output, r.scores];
  });
  return {output, scores: scores ?? null};
}

function dotProduct(
  query: tf.Tensor,
  key: tf.Tensor,
  value: tf.Tensor,
  options: AttentionCoreOptions,
): AttentionCoreResult {
  const rank = query.rank;
  const grouped = key.rank === rank - 1;
  checkGrouping(query, key, value, grouped);
  const lead = query.shape.slice(0, rank - 2); // [...L] or, grouped, [...L, G]
  const m = lead.reduce((p, d) => p * d, 1); // query slices
  const G = grouped ? lead[lead.length - 1] : 1; // query slices per key / value slice
  const n = m / G; // key / value slices
  const [T, K] = query.shape.slice(rank - 2);
  const S = key.shape[key.rank - 2];
  const V = value.shape[value.rank - 1];
  const q = tf.reshape(query, [m, T, K]); // [m, T, K]
  const k = tf.reshape(key, [n, S, K]); // [n, S, K]
  const v = tf.reshape(value, [n, S, V]); // [n, S, V]
  const fill = options.mask == null ? null : maskFill(options.mask, rank); // [...L|1, T|1, S|1]
  const rowsAllowed = maskedRows(options, rank); // [...L|1, T|1, 1]
  const blocks = queryBlocks(m, T, S, options.chunkSize);
  const whole = blocks.length === 1;
  const multiplier = whole ? null : dropoutMultiplier([...lead, T, S], options); // [...L, T, S]
  const qs = whole
    ? [q]
    : splitRows(
        q,
        blocks.map(([start, end]) => end - start),
      ); // [m, c, K] each
  // the keys and values of each block: one gradient sum for them (see fan_out.ts)
  const ks = fanOut(k, blocks.length); // [n, S, K] each
  const vs = fanOut(v, blocks.length); // [n, S, V] each
  const outputs: tf.Tensor[] = [];
  const scores: tf.Tensor[] = [];
  for (const [i, [start, end]] of blocks.entries()) {
    const c = end - start;
    const [out, weights] = tf.tidy(() => {
      // grouped: the G query slices of one key / value slice as G * c rows of one product
      const rows = reshapeTo(qs[i], [n, G * c, K]); // [n, G * c, K]
      const logits = tf.reshape(scaled(mm(rows, ks[i], false, true), options.scale), [
        ...lead,
        c,
        S,
      ]); // [...L, c, S]
      let w = softmaxWithFill(logits, fillRows(fill, start, end, whole)); // [...L, c, S]
      if (rowsAllowed != null) w = tf.mul(w, fillRows(rowsAllowed, start, end, whole) as tf.Tensor);
      const dropped = whole
        ? dropWeights(w, options)
        : multiplier == null
          ? w
          : tf.mul(w, fillRows(multiplier, start, end, false) as tf.Tensor);
      const o = reshapeTo(mm(tf.reshape(dropped, [n, G * c, S]), vs[i]), [m, c, V]); // [m, c, V]
      const kept = options.scoresAfterDropout ? dropped : w;
      return [o, options.returnAttentionScores ? kept : tf.zeros([0])];
    });
    outputs.push(out);
    scores.push(weights);
  }
  const output = tf.reshape(whole ? outputs[0] : concatRows(outputs), [...lead, T, V]); // [...L, T, V]
  let all: tf.Tensor | null = null;
  if (options.returnAttentionScores) all = whole ? scores[0] : tf.concat(scores, rank - 2); // [...L, T, S]
  return {output, scores: all};
}

/** Throws unless key and value fit the query (grouped: one axis fewer, the group axis). */
function checkGrouping(query: tf.Tensor, key: tf.Tensor, value: tf.Tensor, grouped: boolean) {
  const lead = query.shape.slice(0, query.rank - (grouped ? 3 : 2));
  const fits = (x: tf.Tensor) =>
    x.rank === lead.length + 2 && lead.every((d, i) => x.shape[i] === d);
  if (!fits(key) || !fits(value) || key.shape[key.rank - 2] !== value.shape[value.rank - 2]) {
    const shape = (x: tf.Tensor) => `[${x.shape.join(', ')}]`;
    throw new Error(
      `dotProductAttention: expected query [...L, T, K] with key [...L, S, K] and value ` +
        `[...L, S, V], or (grouped heads) query [...L, G, T, K] with key [...L, S, K] and value ` +
        `[...L, S, V]; received query ${shape(query)}, key ${shape(key)}, value ${shape(value)}`,
    );
  }
}

/**
 * The second half of attention for layers with their own scores: masked softmax of `logits`
 * `[...L, T, S]`, dropout, and the weighted sum of `value` `[...L, S, V]`.
 */
export function attendToScores(
  logits: tf.Tensor,
  value: tf.Tensor,
  options: AttentionCoreOptions = {},
): AttentionCoreResult {
  const [output, scores] = tf.tidy(() => {
    const r = scoresToOutput(logits, value, options);
    return r.scores == null ? [r.output] : [r.output, r.scores];
  });
  return {output, scores: scores ?? null};
}

function scoresToOutput(
  logits: tf.Tensor,
  value: tf.Tensor,
  options: AttentionCoreOptions,
): AttentionCoreResult {
  const fill = options.mask == null ? null : maskFill(options.mask, logits.rank);
  let weights = softmaxWithFill(scaled(logits, options.scale), fill); // [...L, T, S]
  const rowsAllowed = maskedRows(options, logits.rank);
  if (rowsAllowed != null) weights = tf.mul(weights, rowsAllowed);
  const dropped = dropWeights(weights, options);
  const output = matMul(dropped, value); // [...L, T, V] (zeros when S = 0)
  const kept = options.scoresAfterDropout ? dropped : weights;
  return {output, scores: options.returnAttentionScores ? kept : null};
}
