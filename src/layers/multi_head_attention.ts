import * as tf from '@tensorflow/tfjs-core';

import {einsum} from '../ops/einsum';
import {softmaxWithFill} from '../ops/fused_softmax';
import {maskFill} from '../ops/masking';
import {mm} from '../ops/matmul';
import {swapAxes12} from '../ops/swap_axes';
import {AttentionParts} from './attention_inputs';
import {AttendContext, AttendResult, BaseAttention, BaseAttentionArgs} from './base_attention';
import {
  Constraint,
  ConstraintIdentifier,
  getConstraint,
  getInitializer,
  getRegularizer,
  Initializer,
  InitializerIdentifier,
  Regularizer,
  RegularizerIdentifier,
  serializeObject,
} from './config_objects';
import {EinsumDense} from './einsum_dense';
import {
  AttentionEquations,
  buildAttentionEquations,
  buildProjectionEquation,
  resolveAttentionAxes,
} from './multi_head_attention_equations';
import {formatShape, Shape} from './shapes';

export interface MultiHeadAttentionArgs extends BaseAttentionArgs {
  /** Number of attention heads. */
  numHeads: number;
  /** Size of each head for query and key. */
  keyDim: number;
  /** Size of each head for value; default `keyDim`. */
  valueDim?: number | null;
  /** Biases in the four projections. Default true. */
  useBias?: boolean;
  /** Output size (or shape) without batch and sequence axes; default the query's last dim. */
  outputShape?: number | number[] | null;
  /** Axes attention runs over (default: every axis between batch and features). */
  attentionAxes?: number | number[] | null;
  kernelInitializer?: InitializerIdentifier;
  biasInitializer?: InitializerIdentifier;
  kernelRegularizer?: RegularizerIdentifier | null;
  biasRegularizer?: RegularizerIdentifier | null;
  /** Not supported by tfjs-layers; only null is accepted. */
  activityRegularizer?: RegularizerIdentifier | null;
  kernelConstraint?: ConstraintIdentifier | null;
  biasConstraint?: ConstraintIdentifier | null;
  /** Keras 3.14 gated attention: `output_dense(attended * sigmoid(gate(query)))`. */
  useGate?: boolean;
  /** Keras 3.15 local attention: only keys with `|i - j| < slidingWindow` (and `j <= i` if causal). */
  slidingWindow?: number | null;
  /** tf-keras' build shapes, kept in the config as tf-keras does (informational here). */
  queryShape?: Shape | null;
  valueShape?: Shape | null;
  keyShape?: Shape | null;
  /** tf-keras 2.21 option; masking here always replaces logits, so it changes nothing. */
  softmaxRobustMasking?: boolean;
  /**
   * Compute attention in blocks of this many queries, so the scores never exist whole (long
   * sequences). Default: automatic, blocks when the scores of one call would exceed
   * 2^23 elements (32 MiB); 0 turns blocking off. Results are the same either way.
   */
  chunkSize?: number | null;
}

/** Score elements above which attention runs in query blocks when chunkSize is not set, and
 * the score elements per block then. */
let autoChunk = {above: 2 ** 23, target: 2 ** 21};

/** Internal (tests): changes the automatic blocking thresholds; returns the previous ones. */
export function setAutoChunkThresholds(
  above: number,
  target: number,
): {above: number; target: number} {
  const previous = autoChunk;
  autoChunk = {above, target};
  return previous;
}

let fastPath = true;

/**
 * Internal: turns the fused path for 3-D inputs off (tests compare it with the einsum path).
 * @returns the previous setting.
 */
export function setMultiHeadAttentionFastPath(enabled: boolean): boolean {
  const previous = fastPath;
  fastPath = enabled;
  return previous;
}

function positiveInt(value: unknown, name: string, optional: boolean): number | null {
  if (optional && value == null) {
    return null;
  }
  if (!(typeof value === 'number' && Number.isInteger(value) && value > 0)) {
    throw new Error(
      `MultiHeadAttention: expected ${name} to be a positive integer, received ${JSON.stringify(value)}`,
    );
  }
  return value;
}

function intList(value: unknown, name: string): number[] | null {
  if (value == null) {
    return null;
  }
  const list = typeof value === 'number' ? [value] : value;
  if (!Array.isArray(list) || !list.every((d) => Number.isInteger(d))) {
    throw new Error(
      `MultiHeadAttention: invalid ${name}: expected an integer or a list of integers, received ${JSON.stringify(value)}`,
    );
  }
  return [...list];
}

/**
 * Multi-head attention with Keras semantics and weight layout (`keras.layers.MultiHeadAttention`).
 *
 * - Inputs: `query [batch, Tq, dimQ]`, `value [batch, Tv, dimV]`, optional `key [batch, Tv, dimK]`
 *   (default value); or a single tensor for self-attention. Higher ranks with `attentionAxes`.
 *   Lengths `[batch]` / `[batch, Tq]` (kwarg `validLens` or a trailing input), a bool
 *   `attentionMask [batch, Tq, Tv]`, Keras masks and `useCausalMask` are ANDed.
 * - Output: `[batch, Tq, ...outputShape]` (default `[batch, Tq, dimQ]`); with
 *   `returnAttentionScores` also the weights `[batch, numHeads, Tq, Tv]` (before dropout).
 * - Weights (Keras order and shapes): `query/kernel [dimQ, numHeads, keyDim]`, `query/bias
 *   [numHeads, keyDim]`, `key/...`, `value/kernel [dimV, numHeads, valueDim]`, `value/bias`,
 *   `attention_output/kernel [numHeads, valueDim, dimOut]`, `attention_output/bias [dimOut]`.
 *
 * The query is scaled by `1/sqrt(keyDim)` before the dot product, as in Keras.
 *
 * ```js
 * const mha = new MultiHeadAttention({numHeads: 4, keyDim: 16});
 * const y = mha.apply(x);                    // self-attention, [batch, T, dim]
 * const z = mha.apply([x, memory], {validLens}); // cross-attention with padded memory
 * ```
 */
export class MultiHeadAttention extends BaseAttention {
  /** @nocollapse */
  static readonly className = 'MultiHeadAttention';

  readonly numHeads: number;
  readonly keyDim: number;
  readonly valueDim: number;
  readonly useBias: boolean;
  readonly outputShapeArg: number | number[] | null;
  readonly useGate: boolean;
  readonly slidingWindow: number | null;
  readonly softmaxRobustMasking: boolean;
  readonly chunkSize: number | null;
  readonly kernelInitializer: Initializer;
  readonly biasInitializer: Initializer;
  readonly kernelRegularizer: Regularizer | null;
  readonly biasRegularizer: Regularizer | null;
  readonly kernelConstraint: Constraint | null;
  readonly biasConstraint: Constraint | null;
  private attentionAxesArg: number[] | null;
  private buildShapes: {query: Shape | null; value: Shape | null; key: Shape | null};

  queryDense: EinsumDense | null = null;
  keyDense: EinsumDense | null = null;
  valueDense: EinsumDense | null = null;
  gateDense: EinsumDense | null = null;
  outputDense: EinsumDense | null = null;
  private equations: AttentionEquations | null = null;
  private attentionAxes: number[] | null = null;

  constructor(args: MultiHeadAttentionArgs) {
    super(args);
    if (args == null) {
      throw new Error('MultiHeadAttention: expected {numHeads, keyDim, ...}, received nothing');
    }
    this.numHeads = positiveInt(args.numHeads, 'numHeads', false) as number;
    this.keyDim = positiveInt(args.keyDim, 'keyDim', false) as number;
    this.valueDim = positiveInt(args.valueDim, 'valueDim', true) ?? this.keyDim;
    this.useBias = args.useBias ?? true;
    const os = args.outputShape ?? null;
    if (os !== null && intList(os, 'outputShape')?.some((d) => d <= 0)) {
      throw new Error(
        `MultiHeadAttention: invalid outputShape ${JSON.stringify(os)}: dimensions must be positive`,
      );
    }
    intList(os, 'outputShape');
    this.outputShapeArg = os;
    this.attentionAxesArg = intList(args.attentionAxes, 'attentionAxes');
    this.useGate = Boolean(args.useGate ?? false);
    this.slidingWindow = positiveInt(args.slidingWindow, 'slidingWindow', true);
    this.softmaxRobustMasking = Boolean(args.softmaxRobustMasking ?? false);
    const chunk = args.chunkSize ?? null;
    if (chunk !== null && !(Number.isInteger(chunk) && chunk >= 0)) {
      throw new Error(
        `MultiHeadAttention: expected chunkSize to be a non-negative integer or null, received ${JSON.stringify(chunk)}`,
      );
    }
    this.chunkSize = chunk;
    this.kernelInitializer = getInitializer(args.kernelInitializer, 'glorotUniform');
    this.biasInitializer = getInitializer(args.biasInitializer, 'zeros');
    this.kernelRegularizer = getRegularizer(args.kernelRegularizer);
    this.biasRegularizer = getRegularizer(args.biasRegularizer);
    this.kernelConstraint = getConstraint(args.kernelConstraint);
    this.biasConstraint = getConstraint(args.biasConstraint);
    if (args.activityRegularizer != null) {
      throw new Error(
        `MultiHeadAttention: activityRegularizer is not supported (tfjs-layers' Layer.apply ` +
          `refuses activity regularizers); received ${JSON.stringify(args.activityRegularizer)}`,
      );
    }
    this.buildShapes = {
      query: args.queryShape ?? null,
      value: args.valueShape ?? null,
      key: args.keyShape ?? null,
    };
  }

  private dense(
    name: string,
    equation: string,
    outputShape: Array<number | null>,
    biasAxes: string,
    activation?: string,
  ): EinsumDense {
    return new EinsumDense({
      name,
      equation,
      outputShape,
      biasAxes: this.useBias ? biasAxes : null,
      activation: activation ?? null,
      kernelInitializer: this.kernelInitializer,
      biasInitializer: this.biasInitializer,
      kernelRegularizer: this.kernelRegularizer,
      biasRegularizer: this.biasRegularizer,
      kernelConstraint: this.kernelConstraint,
      biasConstraint: this.biasConstraint,
      trainable: this.trainable,
    });
  }

  private headProjection(
    name: string,
    input: Shape,
    width: number,
    activation?: string,
  ): EinsumDense {
    const p = buildProjectionEquation(input.length - 1, 1, 2);
    const layer = this.dense(
      name,
      p.equation,
      [...new Array(p.outputRank - 3).fill(null), this.numHeads, width],
      p.biasAxes,
      activation,
    );
    layer.buildAsSublayer(input);
    return layer;
  }

  private outputDims(query: Shape): number[] {
    if (this.outputShapeArg != null) {
      return intList(this.outputShapeArg, 'outputShape') as number[];
    }
    const d = query[query.length - 1];
    if (d == null) {
      throw new Error(
        `Layer '${this.name}': the query's last dimension must be known, received ${formatShape(query)}`,
      );
    }
    return [d];
  }

  private checkShapes({query, value, key}: AttentionParts<Shape>): void {
    if (query.length !== value.length || key.length !== value.length) {
      throw new Error(
        `Layer '${this.name}': query, value and key must have the same rank; received query ` +
          `${formatShape(query)}, value ${formatShape(value)}, key ${formatShape(key)}`,
      );
    }
    const mismatch = value
      .slice(1, -1)
      .some((d, i) => d != null && key[i + 1] != null && d !== key[i + 1]);
    if (mismatch) {
      throw new Error(
        `Layer '${this.name}': all dimensions of value and key, except the last one, must be equal; ` +
          `received value ${formatShape(value)} and key ${formatShape(key)}`,
      );
    }
  }

  protected override buildParts(parts: AttentionParts<Shape>): void {
    this.checkShapes(parts);
    const {query, value, key} = parts;
    this.buildShapes = {query, value, key};
    // Keras build order, which is also the weight order: query, key, (gate), value, output.
    this.queryDense = this.headProjection('query', query, this.keyDim);
    this.keyDense = this.headProjection('key', key, this.keyDim);
    this.gateDense = this.useGate
      ? this.headProjection('gate', query, this.valueDim, 'sigmoid')
      : null;
    this.valueDense = this.headProjection('value', value, this.valueDim);
    const projectedRank = query.length + 1;
    this.attentionAxes = resolveAttentionAxes(this.attentionAxesArg, projectedRank);
    this.equations = buildAttentionEquations(projectedRank, this.attentionAxes);
    const outDims = this.outputDims(query);
    const p = buildProjectionEquation(query.length - 1, 2, outDims.length);
    this.outputDense = this.dense(
      'attention_output',
      p.equation,
      [...new Array(p.outputRank - 1 - outDims.length).fill(null), ...outDims],
      p.biasAxes,
    );
    this.outputDense.buildAsSublayer([...query.slice(0, -1), this.numHeads, this.valueDim]);
    this.sublayers = [
      this.queryDense,
      this.keyDense,
      ...(this.gateDense ? [this.gateDense] : []),
      this.valueDense,
      this.outputDense,
    ];
  }

  protected override outputShapeOf(parts: AttentionParts<Shape>): Shape {
    this.checkShapes(parts);
    return [...parts.query.slice(0, -1), ...this.outputDims(parts.query)];
  }

  protected override scoresShapeOf(parts: AttentionParts<Shape>): Shape {
    const rank = parts.query.length + 1;
    const axes = this.attentionAxes ?? resolveAttentionAxes(this.attentionAxesArg, rank);
    const eqs = this.equations ?? buildAttentionEquations(rank, axes);
    const q = [...parts.query.slice(0, -1), this.numHeads, this.keyDim];
    const k = [...parts.key.slice(0, -1), this.numHeads, this.keyDim];
    return [...eqs.batchAxes.map((i) => q[i]), ...axes.map((i) => q[i]), ...axes.map((i) => k[i])];
  }

  protected override attend(parts: AttentionParts<tf.Tensor>, ctx: AttendContext): AttendResult {
    if (this.equations == null || this.attentionAxes == null) {
      throw new Error(`Layer '${this.name}' is not built: apply it to inputs first`);
    }
    this.checkShapes({
      query: parts.query.shape,
      value: parts.value.shape,
      key: parts.key.shape,
      validLens: null,
      attentionMask: null,
    });
    if (
      fastPath &&
      parts.query.rank === 3 &&
      this.attentionAxes.length === 1 &&
      this.attentionAxes[0] === 1
    ) {
      return this.attendFused(parts, ctx);
    }
    const numAxes = this.attentionAxes.length;
    const q = (this.queryDense as EinsumDense).project(parts.query); // [B, T, N, K]
    const k = (this.keyDense as EinsumDense).project(parts.key); // [B, S, N, K]
    const v = (this.valueDense as EinsumDense).project(parts.value); // [B, S, N, V]
    const qScaled = tf.mul(q, tf.scalar(1 / Math.sqrt(this.keyDim))); // [B, T, N, K]
    const logits = einsum(this.equations.dot, k, qScaled); // [B, N, T, S]
    let mask = this.combinedMask(logits.shape, ctx, {
      numAxes,
      headsAxis: true,
      queryMaskInScores: true,
    });
    if (this.slidingWindow != null) {
      if (numAxes !== 1) {
        throw new Error(`Layer '${this.name}': slidingWindow needs a single attention axis`);
      }
      mask = this.withSlidingWindow(mask, logits.shape);
    }
    const {weights, dropped} = this.attentionWeights(logits, mask, numAxes, ctx.training);
    let attended = einsum(this.equations.combine, dropped, v); // [B, T, N, V]
    if (this.gateDense != null) {
      attended = tf.mul(attended, this.gateDense.project(parts.query)); // [B, T, N, V]
    }
    const output = (this.outputDense as EinsumDense).project(attended); // [B, T, dimOut]
    return {output, scores: weights};
  }

  /** ANDs the sliding-window mask `|i - j| < slidingWindow` (for logits [..., T, S]). */
  private withSlidingWindow(mask: tf.Tensor | null, shape: number[]): tf.Tensor | null {
    if (this.slidingWindow == null) return mask;
    const [t, s] = shape.slice(-2);
    const rows = tf.reshape(tf.range(0, t, 1, 'int32'), [t, 1]);
    const cols = tf.reshape(tf.range(0, s, 1, 'int32'), [1, s]);
    const local = tf.less(tf.abs(tf.sub(rows, cols)), this.slidingWindow); // [T, S]
    const window = tf.reshape(local, [...new Array(shape.length - 2).fill(1), t, s]);
    return mask == null ? window : tf.logicalAnd(mask, window);
  }

  /** `x [b, t, d] · kernel` as one 2-D product (+ bias), kernel scaled by `scale`: [b, t, N, w]. */
  private project(dense: EinsumDense, x: tf.Tensor, scale = 1): tf.Tensor {
    const [b, t, d] = x.shape;
    const kernel = (dense.kernel as NonNullable<EinsumDense['kernel']>).read();
    const width = kernel.shape[2] as number;
    let w = tf.reshape(kernel, [d, this.numHeads * width]); // [d, N * w]
    if (scale !== 1) w = tf.mul(w, scale);
    let y = mm(tf.reshape(x, [b * t, d]), w); // [b * t, N * w]
    if (dense.bias != null) {
      const bias = tf.reshape(dense.bias.read(), [this.numHeads * width]);
      y = tf.add(y, scale !== 1 ? tf.mul(bias, scale) : bias);
    }
    return dense.activation.apply(tf.reshape(y, [b, t, this.numHeads, width])); // [b, t, N, w]
  }

  /**
   * The default case (3-D inputs, attention over axis 1) without einsum: 2-D products for the
   * projections with 1/sqrt(keyDim) folded into the query kernel, batched products for scores and
   * values on operands laid out for them, the masks as one small fill tensor for a fused masked
   * softmax, and query blocks for long sequences. Same results as the einsum path.
   */
  private attendFused(parts: AttentionParts<tf.Tensor>, ctx: AttendContext): AttendResult {
    const N = this.numHeads;
    const K = this.keyDim;
    const V = this.valueDim;
    const [B, T] = parts.query.shape as [number, number];
    const S = parts.key.shape[1] as number;
    const heads = (dense: EinsumDense, x: tf.Tensor, width: number, scale = 1) =>
      tf.reshape(swapAxes12(this.project(dense, x, scale)), [B * N, x.shape[1] as number, width]); // [B * N, t, w]
    const q = heads(this.queryDense as EinsumDense, parts.query, K, 1 / Math.sqrt(K)); // [B * N, T, K]
    const k = heads(this.keyDense as EinsumDense, parts.key, K); // [B * N, S, K]
    const v = heads(this.valueDense as EinsumDense, parts.value, V); // [B * N, S, V]
    const shape4 = [B, N, T, S];
    let mask = this.combinedMask(shape4, ctx, {
      numAxes: 1,
      headsAxis: true,
      queryMaskInScores: true,
    });
    mask = this.withSlidingWindow(mask, shape4);
    const fill = mask == null ? null : maskFill(mask, 4); // [B|1, 1, T|1, S|1]
    const auto =
      B * N * T * S > autoChunk.above ? Math.max(1, Math.floor(autoChunk.target / (B * N * S))) : 0;
    const chunk = this.chunkSize == null ? auto : this.chunkSize;
    const blocks: Array<[number, number]> = [];
    for (let start = 0; start < T; start += chunk > 0 ? chunk : T) {
      blocks.push([start, Math.min(T, start + (chunk > 0 ? chunk : T))]);
    }
    const attended: tf.Tensor[] = [];
    const scores: tf.Tensor[] = [];
    for (const [start, end] of blocks) {
      const c = end - start;
      const [a, w] = tf.tidy(() => {
        const qb = blocks.length === 1 ? q : tf.slice(q, [0, start, 0], [B * N, c, K]);
        const logits = tf.reshape(mm(qb, k, false, true), [B, N, c, S]); // [B, N, c, S]
        let fb = fill;
        if (fill != null && blocks.length > 1 && fill.shape[2] !== 1) {
          fb = tf.slice(
            fill,
            [0, 0, start, 0],
            [fill.shape[0] as number, fill.shape[1] as number, c, fill.shape[3] as number],
          );
        }
        const weights = softmaxWithFill(logits, fb); // [B, N, c, S]
        const {dropped} = this.dropWeights(weights, ctx.training);
        const out = mm(tf.reshape(dropped, [B * N, c, S]), v); // [B * N, c, V]
        return [out, ctx.wantScores ? weights : tf.zeros([0])];
      });
      attended.push(a);
      scores.push(w);
    }
    const att = attended.length === 1 ? attended[0] : tf.concat(attended, 1); // [B * N, T, V]
    let merged = swapAxes12(tf.reshape(att, [B, N, T, V])); // [B, T, N, V]
    if (this.gateDense != null) {
      merged = tf.mul(merged, this.project(this.gateDense, parts.query)); // [B, T, N, V]
    }
    const od = this.outputDense as EinsumDense;
    const okernel = (od.kernel as NonNullable<EinsumDense['kernel']>).read(); // [N, V, ...out]
    const outDims = okernel.shape.slice(2);
    const outSize = outDims.reduce((p, d) => p * d, 1);
    let y = mm(tf.reshape(merged, [B * T, N * V]), tf.reshape(okernel, [N * V, outSize])); // [B * T, out]
    if (od.bias != null) y = tf.add(y, tf.reshape(od.bias.read(), [outSize]));
    const output = od.activation.apply(tf.reshape(y, [B, T, ...outDims])); // [B, T, ...out]
    const all = ctx.wantScores ? (scores.length === 1 ? scores[0] : tf.concat(scores, 2)) : null;
    return {output, scores: all};
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {
      numHeads: this.numHeads,
      keyDim: this.keyDim,
      valueDim: this.valueDim,
      useBias: this.useBias,
      outputShape: this.outputShapeArg,
      attentionAxes: this.attentionAxes ?? this.attentionAxesArg,
      kernelInitializer: serializeObject(this.kernelInitializer),
      biasInitializer: serializeObject(this.biasInitializer),
      kernelRegularizer: serializeObject(this.kernelRegularizer),
      biasRegularizer: serializeObject(this.biasRegularizer),
      activityRegularizer: null,
      kernelConstraint: serializeObject(this.kernelConstraint),
      biasConstraint: serializeObject(this.biasConstraint),
      queryShape: this.buildShapes.query,
      valueShape: this.buildShapes.value,
      keyShape: this.buildShapes.key,
    };
    if (this.useGate) {
      config.useGate = true;
    }
    if (this.slidingWindow != null) {
      config.slidingWindow = this.slidingWindow;
    }
    if (this.softmaxRobustMasking) {
      config.softmaxRobustMasking = true;
    }
    if (this.chunkSize != null) {
      config.chunkSize = this.chunkSize;
    }
    return {...super.getConfig(), ...config};
  }
}
