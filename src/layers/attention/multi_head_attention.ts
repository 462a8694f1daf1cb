import * as tf from '@tensorflow/tfjs-core';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {dotProductAttention} from '../../ops/attention_core';
import type {
  AnyTensor,
  AttentionOutput,
  CacheCallArgs,
  CachedOutput,
  EagerCallArgs,
  EagerInputs,
  SymbolicCallArgs,
  SymbolicInputs,
} from '../engine/base_attention';
import {AttendResult, BaseAttention, ScoresOption, TensorSpec} from '../engine/base_attention';
import {AttentionParts, CallSettings} from '../engine/call_spec';
import {EinsumDense} from '../core/einsum_dense';
import {projectionConfig, projectionOptions, ProjectionOptions} from '../core/projection_options';
import {keysAndValues} from './kv_cache';
import {intList, MultiHeadAttentionArgs, positiveInt} from './multi_head_attention_args';
import {buildProjectionEquation, resolveAttentionAxes} from './multi_head_attention_equations';
import {
  fromCoreLayout,
  headLayout,
  HeadLayout,
  maskToCoreLayout,
  scoresShape,
  toCoreLayout,
} from './multi_head_attention_layout';
import {checkAttentionShapes, outputDimsOf} from './multi_head_attention_shapes';
import {multiHeadAttentionMask} from './multi_head_attention_mask';
import {MHA_SUBLAYERS, MhaSublayer} from './multi_head_attention_sublayers';
import {Shape} from '../engine/shapes';
import {LayerContract, NO_KERAS_MASK} from '../engine/contract';
import {multiHeadDecoding} from '../engine/decoding_checks';
import {
  EVERY_CALL_SETTING,
  MULTI_HEAD_KERAS3_KEYS,
  multiHeadImplied,
  refuseMultiHeadCache,
} from './attention_contract';

export type {MultiHeadAttentionArgs} from './multi_head_attention_args';

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
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {MultiHeadAttention} from 'tfjs-attention';
 *
 * const x = tf.randomNormal([2, 5, 16]); // [batch, T, dim]
 * const memory = tf.randomNormal([2, 7, 16]);
 * const mha = new MultiHeadAttention({numHeads: 4, keyDim: 8});
 * const y = mha.apply(x); // self-attention: [2, 5, 16]
 * const [z, scores] = mha.apply([x, memory], {
 *   validLens: tf.tensor1d([7, 3], 'int32'), // the second memory is padded after 3 steps
 *   returnAttentionScores: true,
 * }); // z [2, 5, 16], scores [2, 4, 5, 7]
 * ```
 */
export class MultiHeadAttention<S extends boolean = false> extends BaseAttention<S> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className: string = 'MultiHeadAttention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = {
    keras: {
      keras3: {keys: MULTI_HEAD_KERAS3_KEYS},
      keras2: {},
      call: {kind: 'attention', byKeyword: true},
      kerasOnlyKeys: [],
      refuseConfig: null,
    },
    configSample: () =>
      new MultiHeadAttention({
        ...EVERY_CALL_SETTING,
        numHeads: 1,
        keyDim: 1,
        useGate: true,
        slidingWindow: 1,
        softmaxRobustMasking: true,
        chunkSize: 1,
      }),
    weights: {sublayers: MHA_SUBLAYERS, keras3Folders: {}, implied: multiHeadImplied},
    decoding: multiHeadDecoding(
      (c) => c.numHeads as number,
      (c) => c.keyDim as number,
      refuseMultiHeadCache,
    ),
    makesKerasMask: NO_KERAS_MASK,
  };

  /** The `numHeads` option: the number of attention heads. */
  readonly numHeads: number;
  /** The `keyDim` option: the size of each head for query and key. */
  readonly keyDim: number;
  /** The size of each head for value (the `valueDim` option, or `keyDim`). */
  readonly valueDim: number;
  /** The `useBias` option: whether the projections have biases. */
  readonly useBias: boolean;
  /** The `outputShape` option as given (null: the query's last dimension). */
  readonly outputShapeArg: number | number[] | null;
  /** The `useGate` option: gated attention. */
  readonly useGate: boolean;
  /** The `slidingWindow` option (null: attend to every key). */
  readonly slidingWindow: number | null;
  /** The `softmaxRobustMasking` option (kept for tf-keras configs). */
  readonly softmaxRobustMasking: boolean;
  /** The `chunkSize` option (null: the scores are computed whole). */
  readonly chunkSize: number | null;
  /** Initializers, regularizers and constraints of the projections' kernels and biases. */
  readonly projection: ProjectionOptions;
  private attentionAxesArg: number[] | null;
  private buildShapes: {query: Shape | null; value: Shape | null; key: Shape | null};
  private attentionAxes: number[] | null = null;

  /** The query projection (Keras' `query` sublayer), created at build. */
  queryDense: EinsumDense | null = null;
  /** The key projection (Keras' `key` sublayer), created at build. */
  keyDense: EinsumDense | null = null;
  /** The value projection (Keras' `value` sublayer), created at build. */
  valueDense: EinsumDense | null = null;
  /** The gate projection, created at build when `useGate` is set. */
  gateDense: EinsumDense | null = null;
  /** The output projection (Keras' `attention_output` sublayer), created at build. */
  outputDense: EinsumDense | null = null;

  constructor(args: MultiHeadAttentionArgs & ScoresOption<S>) {
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
    this.projection = projectionOptions(args, 'MultiHeadAttention');
    this.buildShapes = {
      query: args.queryShape ?? null,
      value: args.valueShape ?? null,
      key: args.keyShape ?? null,
    };
  }

  /**
   * As {@link BaseAttention.apply}, and a cache call (`{cache, cacheUpdateIndex}`, eager) returns
   * `[output, cache]`, or `[output, scores, cache]` with scores.
   */
  override apply(
    inputs: EagerInputs,
    kwargs: CacheCallArgs & {returnAttentionScores: true},
  ): [tf.Tensor, tf.Tensor, tf.Tensor];
  override apply(
    inputs: EagerInputs,
    kwargs: CacheCallArgs & {returnAttentionScores: false},
  ): [tf.Tensor, tf.Tensor];
  override apply(
    inputs: EagerInputs,
    kwargs: CacheCallArgs & {returnAttentionScores?: undefined},
  ): CachedOutput<S>;
  override apply(
    inputs: EagerInputs,
    kwargs: EagerCallArgs & {returnAttentionScores: true},
  ): [tf.Tensor, tf.Tensor];
  override apply(
    inputs: SymbolicInputs,
    kwargs: SymbolicCallArgs & {returnAttentionScores: true},
  ): [SymbolicTensor, SymbolicTensor];
  override apply(
    inputs: EagerInputs,
    kwargs: EagerCallArgs & {returnAttentionScores: false},
  ): tf.Tensor;
  override apply(
    inputs: SymbolicInputs,
    kwargs: SymbolicCallArgs & {returnAttentionScores: false},
  ): SymbolicTensor;
  override apply(
    inputs: EagerInputs,
    kwargs?: EagerCallArgs & {returnAttentionScores?: undefined},
  ): AttentionOutput<S, tf.Tensor>;
  override apply(
    inputs: SymbolicInputs,
    kwargs?: SymbolicCallArgs & {returnAttentionScores?: undefined},
  ): AttentionOutput<S, SymbolicTensor>;
  override apply(
    inputs: AnyTensor | AnyTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: AnyTensor | AnyTensor[],
    kwargs: Kwargs = {},
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    return super.apply(inputs, kwargs);
  }

  /** A projection sublayer; `free` axes pass, `bound` are contracted, `outDims` are made. */
  private dense(name: MhaSublayer, free: number, bound: number, outDims: number[]): EinsumDense {
    const p = buildProjectionEquation(free, bound, outDims.length);
    return new EinsumDense({
      name,
      equation: p.equation,
      outputShape: [...new Array(p.outputRank - 1 - outDims.length).fill(null), ...outDims],
      biasAxes: this.useBias ? p.biasAxes : null,
      activation: name === 'gate' ? 'sigmoid' : null,
      ...this.projection,
      kernelInitializer:
        (this.projection.defaultKernels &&
          this.seededGlorot(MHA_SUBLAYERS.findIndex((s) => s.name === name))) ||
        this.projection.kernelInitializer,
    });
  }

  private outputDims(query: Shape): number[] {
    return outputDimsOf(this.name, this.outputShapeArg, query);
  }

  private checkShapes(parts: {query: Shape; value: Shape; key: Shape}): void {
    checkAttentionShapes(this.name, parts);
  }

  private axes(queryRank: number): number[] {
    return this.attentionAxes ?? resolveAttentionAxes(this.attentionAxesArg, queryRank + 1);
  }

  protected override buildParts(parts: AttentionParts<Shape>): void {
    this.checkShapes(parts);
    const {query, value, key} = parts;
    this.buildShapes = {query, value, key};
    this.attentionAxes = this.axes(query.length);
    const free = query.length - 1;
    const heads = (w: number) => [this.numHeads, w];
    const plan: Record<MhaSublayer, () => [EinsumDense, Shape] | null> = {
      query: () => [this.dense('query', free, 1, heads(this.keyDim)), query],
      key: () => [this.dense('key', free, 1, heads(this.keyDim)), key],
      gate: () =>
        this.useGate ? [this.dense('gate', free, 1, heads(this.valueDim)), query] : null,
      value: () => [this.dense('value', free, 1, heads(this.valueDim)), value],
      attention_output: () => [
        this.dense('attention_output', free, 2, this.outputDims(query)),
        [...query.slice(0, -1), this.numHeads, this.valueDim],
      ],
    };
    // Keras' build order, which is also the weight order (see MHA_SUBLAYERS)
    for (const {name} of MHA_SUBLAYERS) {
      const made = plan[name]();
      if (made == null) continue;
      const layer = this.addSublayer(made[0], made[1]);
      if (name === 'query') this.queryDense = layer;
      else if (name === 'key') this.keyDense = layer;
      else if (name === 'gate') this.gateDense = layer;
      else if (name === 'value') this.valueDense = layer;
      else this.outputDense = layer;
    }
  }

  protected override callSettings(): CallSettings {
    return {...super.callSettings(), extraOptions: ['cache', 'cacheUpdateIndex']};
  }

  protected override inputsFixedByWeights(): Array<'query' | 'value' | 'key'> {
    return ['query', 'value', 'key']; // each has its projection
  }

  protected override outputShapeOf(parts: AttentionParts<Shape>): Shape {
    this.checkShapes(parts);
    return [...parts.query.slice(0, -1), ...this.outputDims(parts.query)];
  }

  protected override scoresShapeOf(parts: AttentionParts<Shape>): Shape {
    const axes = this.axes(parts.query.length);
    return scoresShape(parts.query, parts.key, [this.numHeads, this.keyDim], axes);
  }

  protected override attend(spec: TensorSpec): AttendResult {
    if (this.attentionAxes == null || this.outputDense == null) {
      throw new Error(`Layer '${this.name}' is not built: apply it to inputs first`);
    }
    const {query, value, key} = spec.parts;
    this.checkShapes({query: query.shape, value: value.shape, key: key.shape});
    const axes = this.attentionAxes;
    const layout: HeadLayout = headLayout(query.rank + 1, axes);
    // projections, with 1/sqrt(keyDim) folded into the query's kernel and bias
    const q = (this.queryDense as EinsumDense).project(query, 1 / Math.sqrt(this.keyDim)); // [B, ..., N, K]
    if (spec.cache != null && (query.rank !== 3 || this.keyDim !== this.valueDim)) {
      throw new Error(
        `Layer '${this.name}': a key / value cache needs 3-D inputs and keyDim = valueDim ` +
          `(keras-hub's layout); received a query of rank ${query.rank}, keyDim ${this.keyDim}, ` +
          `valueDim ${this.valueDim}`,
      );
    }
    // this call's projections, or (cached decoding) the cache with them written in
    const kv = keysAndValues(
      spec,
      () => (this.keyDense as EinsumDense).project(key), // [B, ..., N, K]
      () => (this.valueDense as EinsumDense).project(value), // [B, ..., N, V]
      `Layer '${this.name}'`,
    );
    const [k, v] = [kv.keys, kv.values];
    const scoresShape = this.scoresShapeOf({
      query: query.shape,
      value: value.shape,
      key: k.shape.slice(0, -1), // [B, ..., S, (features)]: the cache's length with a cache
      validLens: null,
      attentionMask: null,
    }) as number[];
    // every mask of the call, ANDed, in Keras' score layout (broadcastable)
    const mask = multiHeadAttentionMask(
      spec,
      scoresShape,
      axes.length,
      this.slidingWindow,
      this.name,
    );
    const core = dotProductAttention(
      toCoreLayout(q, layout), // [...L, T, K], L = batch-like axes (heads included)
      toCoreLayout(k, layout), // [...L, S, K]
      toCoreLayout(v, layout), // [...L, S, V]
      {
        ...this.dropoutOptions(spec),
        mask: mask && maskToCoreLayout(mask, scoresShape, axes.length),
        queryBlock: this.chunkSize,
      },
    );
    let attended = fromCoreLayout(
      core.output,
      layout,
      axes.map((a) => q.shape[a]),
    ); // [B, ..., N, V]
    if (this.gateDense != null) {
      attended = tf.mul(attended, this.gateDense.project(query)); // [B, ..., N, V]
    }
    const output = this.outputDense.project(attended); // [B, ..., ...outputShape]
    const scores = core.scores && tf.reshape(core.scores, scoresShape); // Keras layout
    return {output, scores, cache: kv.cache};
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {
      numHeads: this.numHeads,
      keyDim: this.keyDim,
      valueDim: this.valueDim,
      useBias: this.useBias,
      outputShape: this.outputShapeArg,
      attentionAxes: this.attentionAxes ?? this.attentionAxesArg,
      ...projectionConfig(this.projection),
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
