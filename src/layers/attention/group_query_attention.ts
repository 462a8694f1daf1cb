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
import {
  AttendResult,
  BaseAttention,
  BaseAttentionArgs,
  ScoresOption,
  TensorSpec,
} from '../engine/base_attention';
import {AttentionParts, CallSettings} from '../engine/call_spec';
import {EinsumDense} from '../core/einsum_dense';
import {
  projectionConfig,
  ProjectionArgs,
  projectionOptions,
  ProjectionOptions,
} from '../core/projection_options';
import {keysAndValues} from './kv_cache';
import {positiveInt} from './multi_head_attention_args';
import {fromCoreLayout, headLayout, toCoreLayout} from './multi_head_attention_layout';
import {multiHeadAttentionMask} from './multi_head_attention_mask';
import {formatShape, Shape} from '../engine/shapes';
import {configNumber, largestOption, LayerContract, NO_KERAS_MASK} from '../engine/contract';
import {multiHeadDecoding} from '../engine/decoding_checks';
import {EVERY_CALL_SETTING, PROJECTION_KERAS3_KEYS} from './attention_contract';

export interface GroupQueryAttentionArgs extends BaseAttentionArgs, ProjectionArgs {
  /** Size of each attention head (query, key and value). */
  headDim: number;
  /** Number of query heads `U`. */
  numQueryHeads: number;
  /** Number of key / value heads `V`; `U` must be a multiple of it (1: multi-query attention). */
  numKeyValueHeads: number;
  /** Biases in the projections. Default true. */
  useBias?: boolean;
  /** Gated attention: the heads' output times `sigmoid(gate(query))` before the output projection. */
  useGate?: boolean;
  /** Local attention: only keys with `|i - j| < slidingWindow` (and `j <= i` if causal). */
  slidingWindow?: number | null;
  /** Keras' flash-attention switch: accepted for configs, the results are the same here. */
  flashAttention?: boolean | null;
}

/** The sublayers in Keras' build order (the weight order), with Keras 3's attribute names. */
export const GQA_SUBLAYERS = [
  {name: 'query', keras3: '_query_dense'},
  {name: 'key', keras3: '_key_dense'},
  {name: 'value', keras3: '_value_dense'},
  {name: 'gate', keras3: '_gate_dense'},
  {name: 'attention_output', keras3: '_output_dense'},
] as const;

type GqaSublayer = (typeof GQA_SUBLAYERS)[number]['name'];

/**
 * Grouped-query attention with Keras 3 semantics and weight layout
 * (`keras.layers.GroupQueryAttention`): `U` query heads share `V` key / value heads; query head
 * `u` uses key / value head `floor(u * V / U)` (heads are repeated, not tiled).
 *
 * - Inputs: `query [batch, T, dim]`, `value [batch, S, dimV]`, optional `key [batch, S, dimK]`;
 *   masks and lengths as for every attention layer.
 * - Output: `[batch, T, dim]`; with `returnAttentionScores` also the weights `[batch, U, T, S]`.
 * - Weights: `query/kernel [dim, U, headDim]`, `key/kernel [dimK, V, headDim]`,
 *   `value/kernel [dimV, V, headDim]`, (`gate/kernel [dim, U, headDim]`),
 *   `attention_output/kernel [U, headDim, dim]`, each with a bias when `useBias`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {GroupQueryAttention} from 'tfjs-attention';
 *
 * const gqa = new GroupQueryAttention({headDim: 16, numQueryHeads: 8, numKeyValueHeads: 2});
 * const x = tf.randomNormal([2, 6, 32]);
 * const y = gqa.apply(x, {useCausalMask: true}); // [2, 6, 32]
 * ```
 */
export class GroupQueryAttention<S extends boolean = false> extends BaseAttention<S> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'GroupQueryAttention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = {
    keras: {
      keras3: {
        keys: [
          'head_dim',
          'num_query_heads',
          'num_key_value_heads',
          'dropout',
          'use_bias',
          'seed',
        ].concat(PROJECTION_KERAS3_KEYS),
        // the Python class is GroupedQueryAttention, which names its weight folder
        pathPrefix: 'grouped_query_attention',
      },
      keras2: {
        refused:
          'tf-keras 2 does not have (Keras 3 does); use MultiHeadAttention for a model that ' +
          'tf-keras must load',
      },
      call: {kind: 'attention', byKeyword: true},
      kerasOnlyKeys: [],
      refuseConfig: null,
    },
    configSample: () =>
      new GroupQueryAttention({
        ...EVERY_CALL_SETTING,
        headDim: 1,
        numQueryHeads: 1,
        numKeyValueHeads: 1,
        useGate: true,
        slidingWindow: 1,
      }),
    weights: {
      sublayers: GQA_SUBLAYERS,
      keras3Folders: {},
      implied: (c) => ({
        values:
          configNumber(c, 'head_dim') *
          2 *
          (configNumber(c, 'num_query_heads') + configNumber(c, 'num_key_value_heads')),
        option: largestOption(c, ['head_dim', 'num_query_heads', 'num_key_value_heads']),
      }),
    },
    decoding: multiHeadDecoding(
      (c) => c.numKeyValueHeads as number,
      (c) => c.headDim as number,
    ),
    makesKerasMask: NO_KERAS_MASK,
  };

  /** The `headDim` option: the size of each head. */
  readonly headDim: number;
  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The `useBias` option: whether the projections have biases. */
  readonly useBias: boolean;
  /** The `useGate` option: gated attention. */
  readonly useGate: boolean;
  /** The `slidingWindow` option (null: attend to every key). */
  readonly slidingWindow: number | null;
  /** The `flashAttention` option (kept for Keras configs; no effect). */
  readonly flashAttention: boolean | null;
  /** Initializers, regularizers and constraints of the projections' kernels and biases. */
  readonly projection: ProjectionOptions;
  /** The projection sublayers by Keras name, created at build. */
  readonly dense: Partial<Record<GqaSublayer, EinsumDense>> = {};

  constructor(args: GroupQueryAttentionArgs & ScoresOption<S>) {
    super(args);
    if (args == null) {
      throw new Error(
        'GroupQueryAttention: expected {headDim, numQueryHeads, numKeyValueHeads, ...}, received nothing',
      );
    }
    const name = 'GroupQueryAttention';
    this.headDim = positiveInt(args.headDim, 'headDim', false, name) as number;
    this.numQueryHeads = positiveInt(args.numQueryHeads, 'numQueryHeads', false, name) as number;
    this.numKeyValueHeads = positiveInt(
      args.numKeyValueHeads,
      'numKeyValueHeads',
      false,
      name,
    ) as number;
    if (this.numQueryHeads % this.numKeyValueHeads !== 0) {
      throw new Error(
        `GroupQueryAttention: expected numQueryHeads to be a multiple of numKeyValueHeads, ` +
          `received numQueryHeads ${this.numQueryHeads} and numKeyValueHeads ${this.numKeyValueHeads}`,
      );
    }
    this.useBias = args.useBias ?? true;
    this.useGate = Boolean(args.useGate ?? false);
    this.slidingWindow = positiveInt(args.slidingWindow, 'slidingWindow', true, name);
    this.flashAttention = args.flashAttention ?? null;
    this.projection = projectionOptions(args, 'GroupQueryAttention');
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

  private make(name: GqaSublayer, equation: string, outputShape: Array<number | null>) {
    const index = GQA_SUBLAYERS.findIndex((s) => s.name === name);
    return new EinsumDense({
      name,
      equation,
      outputShape,
      // bias over the output letters after batch and sequence ('uh', 'vh', 'm'), as in Keras
      biasAxes: this.useBias ? equation.slice(equation.indexOf('->') + 4) : null,
      activation: name === 'gate' ? 'sigmoid' : null,
      ...this.projection,
      kernelInitializer:
        (this.projection.defaultKernels && this.seededGlorot(index)) ||
        this.projection.kernelInitializer,
    });
  }

  private checkShapes({query, value, key}: AttentionParts<Shape>): void {
    for (const [role, shape] of Object.entries({query, value, key})) {
      if (shape.length !== 3) {
        throw new Error(
          `Layer '${this.name}': expected a ${role} of rank 3 ([batch, length, features]), ` +
            `received ${formatShape(shape)}`,
        );
      }
    }
    if (value[1] != null && key[1] != null && value[1] !== key[1]) {
      throw new Error(
        `Layer '${this.name}': value and key must have the same length; received value ` +
          `${formatShape(value)} and key ${formatShape(key)}`,
      );
    }
  }

  protected override buildParts(parts: AttentionParts<Shape>): void {
    this.checkShapes(parts);
    const {query, value, key} = parts;
    const [U, V, H] = [this.numQueryHeads, this.numKeyValueHeads, this.headDim];
    const dim = query[2];
    if (dim == null) {
      throw new Error(`Layer '${this.name}': the query's last dimension must be known`);
    }
    const plan: Record<GqaSublayer, () => [EinsumDense, Shape] | null> = {
      query: () => [this.make('query', 'bqm,muh->bquh', [null, U, H]), query],
      key: () => [this.make('key', 'bkm,mvh->bkvh', [null, V, H]), key],
      value: () => [this.make('value', 'bkm,mvh->bkvh', [null, V, H]), value],
      gate: () => (this.useGate ? [this.make('gate', 'bqm,muh->bquh', [null, U, H]), query] : null),
      attention_output: () => [
        this.make('attention_output', 'bquh,uhm->bqm', [null, dim]),
        [null, null, U, H],
      ],
    };
    for (const {name} of GQA_SUBLAYERS) {
      const made = plan[name]();
      if (made != null) this.dense[name] = this.addSublayer(made[0], made[1]);
    }
  }

  protected override callSettings(): CallSettings {
    return {...super.callSettings(), extraOptions: ['cache', 'cacheUpdateIndex']};
  }

  protected override inputsFixedByWeights(): Array<'query' | 'value' | 'key'> {
    return ['query', 'value', 'key'];
  }

  protected override outputShapeOf(parts: AttentionParts<Shape>): Shape {
    this.checkShapes(parts);
    return [...parts.query];
  }

  protected override scoresShapeOf({query, key}: AttentionParts<Shape>): Shape {
    return [query[0], this.numQueryHeads, query[1], key[1]];
  }

  /** `[B, S, V, H]` -> `[B, S, U, H]`: each key / value head repeated U / V times in a row. */
  private repeatHeads(x: tf.Tensor): tf.Tensor {
    const r = this.numQueryHeads / this.numKeyValueHeads;
    if (r === 1) return x;
    const [B, S, V, H] = x.shape;
    // rank 4: tfjs has no Tile gradient above rank 4
    const tiled = tf.tile(tf.reshape(x, [B * S, V, 1, H]), [1, 1, r, 1]); // [B * S, V, r, H]
    return tf.reshape(tiled, [B, S, V * r, H]); // [B, S, U, H]
  }

  protected override attend(spec: TensorSpec): AttendResult {
    const d = this.dense as Record<GqaSublayer, EinsumDense>;
    if (d.attention_output == null) {
      throw new Error(`Layer '${this.name}' is not built: apply it to inputs first`);
    }
    const {query, value, key} = spec.parts;
    this.checkShapes({
      query: query.shape,
      value: value.shape,
      key: key.shape,
    } as AttentionParts<Shape>);
    const layout = headLayout(4, [1]); // [B, T, heads, H] <-> [B, heads, T, H]
    const q = d.query.project(query, 1 / Math.sqrt(this.headDim)); // [B, T, U, H]
    // this call's projections, or (cached decoding) the cache with them written in; the cache
    // holds the V key / value heads, repeated to U heads after it
    const kv = keysAndValues(
      spec,
      () => d.key.project(key), // [B, S, V, H]
      () => d.value.project(value), // [B, S, V, H]
      `Layer '${this.name}'`,
    );
    const k = this.repeatHeads(kv.keys); // [B, S, U, H]
    const v = this.repeatHeads(kv.values); // [B, S, U, H]
    const scoresShape = this.scoresShapeOf({
      query: query.shape,
      key: k.shape.slice(0, 2),
    } as AttentionParts<Shape>) as number[];
    const mask = multiHeadAttentionMask(spec, scoresShape, 1, this.slidingWindow, this.name);
    const core = dotProductAttention(
      toCoreLayout(q, layout), // [B, U, T, H]
      toCoreLayout(k, layout), // [B, U, S, H]
      toCoreLayout(v, layout), // [B, U, S, H]
      {...this.dropoutOptions(spec), mask},
    );
    let attended = fromCoreLayout(core.output, layout, [query.shape[1] as number]); // [B, T, U, H]
    if (d.gate != null) attended = tf.mul(attended, d.gate.project(query)); // [B, T, U, H]
    const output = d.attention_output.project(attended); // [B, T, dim]
    return {output, scores: core.scores, cache: kv.cache};
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {
      headDim: this.headDim,
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      useBias: this.useBias,
      flashAttention: this.flashAttention,
      ...projectionConfig(this.projection),
    };
    if (this.useGate) config.useGate = true;
    if (this.slidingWindow != null) config.slidingWindow = this.slidingWindow;
    return {...super.getConfig(), ...config};
  }
}
