/**
 * What MultiHeadAttention and GroupQueryAttention share, once: the typed `apply` (with the cache
 * call), the projection sublayers built from a table in Keras' build order, the shape rules of
 * query, value and key, and the attend pipeline (project, cache, mask, attention core with
 * grouped key / value heads, gate, output projection). A subclass gives its sublayer table, its
 * projection equations with their bias axes written out (as Keras does), and its head counts.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {dotProductAttention} from '../../ops/attention_core';
import {reshapeTo} from '../../ops/reshape';
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
import {ProjectionArgs, projectionOptions, ProjectionOptions} from '../core/projection_options';
import {formatShape, Shape} from '../engine/shapes';
import {keysAndValues} from './kv_cache';
import {
  fromCoreLayout,
  groupHeads,
  groupMask,
  headLayout,
  maskToCoreLayout,
  scoresShape,
  toCoreLayout,
  ungroupHeads,
} from './multi_head_layout';
import {callMask} from '../engine/call_mask';

/** The projection sublayers of a multi-head layer. */
export type ProjectionName = 'query' | 'key' | 'value' | 'gate' | 'attention_output';

/**
 * One row of a multi-head layer's sublayer table: its name here (and in tf-keras 2, which uses
 * the same), its Keras 3 attribute and, for MultiHeadAttention, where PyTorch's
 * `nn.MultiheadAttention` keeps it. Build order, weight order, the Keras 3 weight mapping and
 * the torch loader all read the table.
 */
export interface SublayerNames {
  /** Sublayer name here and in tf-keras 2 (weights `<layer>/<name>/kernel`, `.../bias`). */
  name: ProjectionName;
  /** Keras 3's attribute, the folder of its weights (`layers/<layer>/<keras3>/vars/0`). */
  keras3: string;
  /**
   * PyTorch: the `Linear`-layout weight `[out, in]` and bias (`out_proj.*`), or the slice of the
   * packed `in_proj_weight [3E, E]` / `in_proj_bias [3E]` with its unpacked name; null: none.
   */
  torch: {packed: number; weight: string} | {packed: null; weight: string; bias: string} | null;
}

/** A layer's sublayer table, in Keras' build order (the weight order). */
export type SublayerTable = readonly SublayerNames[];

/** One projection: its einsum equation, bias axes (Keras' `bias_axes`) and output shape. */
export interface Projection {
  equation: string;
  /** The output letters the bias spans (used when `useBias`). */
  biasAxes: string;
  /** The output shape without the batch axis. */
  outputShape: Array<number | null>;
  /** The input shape the sublayer is built for. */
  input: Shape;
}

/** Heads of a multi-head layer. */
export interface HeadCounts {
  /** Query heads `U`. */
  query: number;
  /** Key / value heads `V` (`U` is a multiple of it; equal for MultiHeadAttention). */
  keyValue: number;
  /** Size of each query / key head (the query is scaled by its inverse square root). */
  keyDim: number;
  /** Size of each value head. */
  valueDim: number;
}

/** Options every multi-head layer has. */
export interface MultiHeadArgs extends BaseAttentionArgs, ProjectionArgs {
  /** Biases in the projections. Default true. */
  useBias?: boolean;
  /** Gated attention: the heads' output times `sigmoid(gate(query))` before the output projection. */
  useGate?: boolean;
  /** Local attention: only keys with `|i - j| < slidingWindow` (and `j <= i` if causal). */
  slidingWindow?: number | null;
}

/** Throws, naming class `cls`, unless `value` is a positive integer (or absent and `optional`). */
export function positiveInt(
  value: unknown,
  name: string,
  optional: boolean,
  cls = 'MultiHeadAttention',
): number | null {
  if (optional && value == null) {
    return null;
  }
  if (!(typeof value === 'number' && Number.isInteger(value) && value > 0)) {
    throw new Error(
      `${cls}: expected ${name} to be a positive integer, received ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/**
 * The base of MultiHeadAttention and GroupQueryAttention (see the file's notes). Sublayers are
 * in {@link MultiHeadBase.dense} by name once built.
 */
export abstract class MultiHeadBase<S extends boolean = false> extends BaseAttention<S> {
  /** The `useBias` option: whether the projections have biases. */
  readonly useBias: boolean;
  /** The `useGate` option: gated attention. */
  readonly useGate: boolean;
  /** The `slidingWindow` option (null: attend to every key). */
  readonly slidingWindow: number | null;
  /** Initializers, regularizers and constraints of the projections' kernels and biases. */
  readonly projection: ProjectionOptions;
  /** The projection sublayers by name, created at build. */
  readonly dense: Partial<Record<ProjectionName, EinsumDense>> = {};

  /**
   * @param cls the class name errors give.
   * @param expected what the constructor expects, for the error when it receives nothing.
   */
  constructor(args: MultiHeadArgs & ScoresOption<S>, cls: string, expected: string) {
    super(args);
    if (args == null) {
      throw new Error(`${cls}: expected ${expected}, received nothing`);
    }
    this.useBias = args.useBias ?? true;
    this.useGate = Boolean(args.useGate ?? false);
    this.slidingWindow = positiveInt(args.slidingWindow, 'slidingWindow', true, cls);
    this.projection = projectionOptions(args, cls);
  }

  // ---- what subclasses provide ------------------------------------------------------------------

  /** The sublayer table, in Keras' build order. */
  protected abstract sublayerTable(): SublayerTable;
  /** Each projection for these input shapes (the gate's is used only with `useGate`). */
  protected abstract projections(parts: AttentionParts<Shape>): Record<ProjectionName, Projection>;
  /** The layer's heads. */
  protected abstract heads(): HeadCounts;
  /** Throws unless query, value and key have ranks this layer takes. */
  protected abstract checkRanks(parts: {query: Shape; value: Shape; key: Shape}): void;

  /** The attention axes of the projected query (resolved). Default: the sequence axis. */
  protected attentionAxesOf(queryRank: number): number[] {
    void queryRank;
    return [1];
  }

  /** The output's last axes. Default: the query's last dimension. */
  protected outputDims(query: Shape): Shape {
    return [query[query.length - 1]];
  }

  /** Queries per block of the attention core (null: automatic). */
  protected coreChunkSize(): number | null {
    return null;
  }

  // ---- typed apply ------------------------------------------------------------------------------

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

  // ---- shapes -----------------------------------------------------------------------------------

  /** Throws, naming the layer, unless query, value and key fit together (as Keras states it). */
  protected checkShapes(parts: {query: Shape; value: Shape; key: Shape}): void {
    this.checkRanks(parts);
    const {value, key} = parts;
    const mismatch =
      key.length !== value.length ||
      value.slice(1, -1).some((d, i) => d != null && key[i + 1] != null && d !== key[i + 1]);
    if (mismatch) {
      throw new Error(
        `Layer '${this.name}': all dimensions of value and key, except the last one, must be ` +
          `equal; received value ${formatShape(value)} and key ${formatShape(key)}`,
      );
    }
  }

  protected override outputShapeOf(parts: AttentionParts<Shape>): Shape {
    this.checkShapes(parts);
    return [...parts.query.slice(0, -1), ...this.outputDims(parts.query)];
  }

  protected override scoresShapeOf(parts: AttentionParts<Shape>): Shape {
    const h = this.heads();
    const axes = this.attentionAxesOf(parts.query.length);
    return scoresShape(parts.query, parts.key, [h.query, h.keyDim], axes);
  }

  // ---- build ------------------------------------------------------------------------------------

  protected override buildParts(parts: AttentionParts<Shape>): void {
    this.checkShapes(parts);
    const table = this.sublayerTable();
    const plans = this.projections(parts);
    // Keras' build order, which is also the weight order
    const {defaultKernels, ...projection} = this.projection; // EinsumDense's options
    for (const [index, {name}] of table.entries()) {
      if (name === 'gate' && !this.useGate) continue;
      const p = plans[name];
      const dense = new EinsumDense({
        name,
        equation: p.equation,
        outputShape: p.outputShape,
        biasAxes: this.useBias ? p.biasAxes : null,
        activation: name === 'gate' ? 'sigmoid' : null,
        ...projection,
        kernelInitializer:
          (defaultKernels && this.seededGlorot(index)) || this.projection.kernelInitializer,
      });
      this.dense[name] = this.addSublayer(dense, p.input);
    }
  }

  protected override callSettings(): CallSettings {
    return {
      ...super.callSettings(),
      extraOptions: ['cache', 'cacheUpdateIndex'],
      maskFits: (mask, query, value) => this.maskFits(mask, query, value),
    };
  }

  /**
   * Whether a shape-only input can be this call's attention mask: expanded at the heads axis as
   * the layer expands masks, it broadcasts to the scores (null: the shapes do not say).
   */
  private maskFits(mask: Shape, query: Shape, value: Shape): boolean | null {
    let axes: number[];
    try {
      axes = this.attentionAxesOf(query.length);
    } catch {
      return null; // attention axes that do not fit this rank: the layer says so later
    }
    const h = this.heads();
    const scores = scoresShape(query, value, [h.query, h.keyDim], axes);
    if (mask.length > scores.length) return false;
    const expanded = [...mask];
    const headsAxis = -2 * axes.length - 1; // counted from the end, as expandMask inserts
    while (expanded.length < scores.length) {
      const p = expanded.length + 1 + headsAxis;
      expanded.splice(p >= 0 ? p : 0, 0, 1);
    }
    return expanded.every((d, i) => d == null || d === 1 || scores[i] == null || d === scores[i]);
  }

  protected override inputsFixedByWeights(): Array<'query' | 'value' | 'key'> {
    return ['query', 'value', 'key']; // each has its projection
  }

  // ---- the call ---------------------------------------------------------------------------------

  protected override attend(spec: TensorSpec): AttendResult {
    const d = this.dense as Record<ProjectionName, EinsumDense | undefined>;
    if (d.query == null || d.key == null || d.value == null || d.attention_output == null) {
      throw new Error(`Layer '${this.name}' is not built: apply it to inputs first`);
    }
    const {query, value, key} = spec.parts;
    this.checkShapes({query: query.shape, value: value.shape, key: key.shape});
    const heads = this.heads();
    const axes = this.attentionAxesOf(query.rank);
    const layout = headLayout(query.rank + 1, axes);
    // projections, with 1/sqrt(keyDim) folded into the query's kernel and bias
    const q = d.query.project(query, 1 / Math.sqrt(heads.keyDim)); // [B, ..., U, K]
    if (spec.cache != null && (query.rank !== 3 || heads.keyDim !== heads.valueDim)) {
      throw new Error(
        `Layer '${this.name}': a key / value cache needs 3-D inputs and keyDim = valueDim ` +
          `(keras-hub's layout); received a query of rank ${query.rank}, keyDim ${heads.keyDim}, ` +
          `valueDim ${heads.valueDim}`,
      );
    }
    // this call's projections, or (cached decoding) the cache with them written in
    const kv = keysAndValues(
      spec,
      () => (d.key as EinsumDense).project(key), // [B, ..., V, K]
      () => (d.value as EinsumDense).project(value), // [B, ..., V, K]
      {heads: heads.keyValue, headDim: heads.keyDim},
      `Layer '${this.name}'`,
    );
    const scoresShape = this.scoresShapeOf({
      query: query.shape,
      value: value.shape,
      key: kv.keys.shape.slice(0, -1), // [B, ..., S, (features)]: the cache's length with a cache
      validLens: null,
      attentionMask: null,
    }) as number[];
    // every mask of the call, ANDed, in Keras' score layout (broadcastable)
    const mask = callMask(spec, scoresShape, {
      layerName: this.name,
      missingAxesAt: -2 * axes.length - 1, // the heads axis
      attentionAxes: axes.length,
      slidingWindow: this.slidingWindow,
      queryMaskRows: true,
    });
    let coreMask = mask && maskToCoreLayout(mask, scoresShape, axes.length);
    // grouped heads: [B, V, G * T, K] against keys [B, V, S, K], no copy of keys or values
    const grouped = heads.keyValue !== heads.query;
    let coreQuery = toCoreLayout(q, layout); // [...L, T, K], L = batch-like axes (heads included)
    if (grouped) {
      const T = coreQuery.shape[2] as number;
      coreQuery = groupHeads(coreQuery, heads.keyValue); // [B, V, G * T, K]
      coreMask = coreMask && groupMask(coreMask, heads.keyValue, heads.query, T); // [B|1, V|1, G * T, S]
    }
    const core = dotProductAttention(
      coreQuery,
      toCoreLayout(kv.keys, layout), // [...L, S, K]
      toCoreLayout(kv.values, layout), // [...L, S, V]
      {...this.dropoutOptions(spec), mask: coreMask, chunkSize: this.coreChunkSize()},
    );
    let attended = fromCoreLayout(
      grouped ? ungroupHeads(core.output, heads.query) : core.output,
      layout,
      axes.map((a) => q.shape[a]),
    ); // [B, ..., U, V]
    if (d.gate != null) attended = tf.mul(attended, d.gate.project(query)); // [B, ..., U, V]
    const output = d.attention_output.project(attended); // [B, ..., ...outputShape]
    const scores = core.scores && reshapeTo(core.scores, scoresShape); // Keras layout
    return {output, scores, cache: kv.cache};
  }
}
