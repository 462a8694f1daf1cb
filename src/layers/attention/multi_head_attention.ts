import * as tf from '@tensorflow/tfjs-core';

import {ScoresOption} from '../engine/base_attention';
import {AttentionParts} from '../engine/call_spec';
import {EinsumDense} from '../core/einsum_dense';
import {projectionConfig} from '../core/projection_options';
import {formatShape, Shape} from '../engine/shapes';
import {intList, MultiHeadAttentionArgs} from './multi_head_attention_args';
import {
  HeadCounts,
  MultiHeadBase,
  positiveInt,
  Projection,
  ProjectionName,
  SublayerTable,
} from './multi_head_base';
import {MHA_SUBLAYERS} from './multi_head_attention_sublayers';
import {defineContract, LayerContract} from '../engine/contract';
import {multiHeadDecoding} from '../engine/decoding_checks';
import {
  ATTENTION_CONFIG_KEYS,
  MULTI_HEAD_KERAS3_KEYS,
  multiHeadImplied,
  PROJECTION_CONFIG_KEYS,
  refuseMultiHeadCache,
} from './attention_contract';
import {checkConstructorArgs} from '../engine/constructor_args';

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
export class MultiHeadAttention<S extends boolean = false> extends MultiHeadBase<S> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className: string = 'MultiHeadAttention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {keys: MULTI_HEAD_KERAS3_KEYS},
      keras2: {},
      call: {kind: 'attention', byKeyword: true},
    },
    configKeys: [
      ...ATTENTION_CONFIG_KEYS,
      'numHeads',
      'keyDim',
      'valueDim',
      'useBias',
      'outputShape',
      'attentionAxes',
      ...PROJECTION_CONFIG_KEYS,
      // the build shapes Keras writes
      'queryShape',
      'valueShape',
      'keyShape',
      'useGate',
      'slidingWindow',
      'softmaxRobustMasking',
      'chunkSize',
    ],
    weights: {sublayers: MHA_SUBLAYERS, implied: multiHeadImplied},
    decoding: {
      ...multiHeadDecoding(
        (c) => c.numHeads as number,
        (c) => c.keyDim as number,
        refuseMultiHeadCache,
      ),
    },
  });

  /** The `numHeads` option: the number of attention heads. */
  readonly numHeads: number;
  /** The `keyDim` option: the size of each head for query and key. */
  readonly keyDim: number;
  /** The size of each head for value (the `valueDim` option, or `keyDim`). */
  readonly valueDim: number;
  /** The `outputShape` option as given (null: the query's last dimension). */
  readonly outputShapeArg: number | number[] | null;
  /** The `softmaxRobustMasking` option (kept for tf-keras configs). */
  readonly softmaxRobustMasking: boolean;
  /** The `chunkSize` option (null: the scores are computed whole). */
  readonly chunkSize: number | null;
  private attentionAxesArg: number[] | null;
  private buildShapes: {query: Shape | null; value: Shape | null; key: Shape | null};
  private attentionAxes: number[] | null = null;

  constructor(args: MultiHeadAttentionArgs & ScoresOption<S>) {
    // (keras-hub's CachedMultiHeadAttention takes the same options, checked as its own)
    checkConstructorArgs((new.target as unknown as {className: string}).className, args);
    super(args, 'MultiHeadAttention', '{numHeads, keyDim, ...}');
    this.numHeads = positiveInt(args.numHeads, 'numHeads', false) as number;
    this.keyDim = positiveInt(args.keyDim, 'keyDim', false) as number;
    this.valueDim = positiveInt(args.valueDim, 'valueDim', true) ?? this.keyDim;
    const os = args.outputShape ?? null;
    if (os !== null && intList(os, 'outputShape')?.some((d) => d <= 0)) {
      throw new Error(
        `MultiHeadAttention: invalid outputShape ${JSON.stringify(os)}: dimensions must be positive`,
      );
    }
    this.outputShapeArg = os;
    this.attentionAxesArg = intList(args.attentionAxes, 'attentionAxes');
    this.softmaxRobustMasking = Boolean(args.softmaxRobustMasking ?? false);
    const chunk = args.chunkSize ?? null;
    if (chunk !== null && !(Number.isInteger(chunk) && chunk >= 0)) {
      throw new Error(
        `MultiHeadAttention: expected chunkSize to be a non-negative integer or null, received ${JSON.stringify(chunk)}`,
      );
    }
    this.chunkSize = chunk;
    this.buildShapes = {
      query: args.queryShape ?? null,
      value: args.valueShape ?? null,
      key: args.keyShape ?? null,
    };
  }

  /** The query projection (Keras' `query` sublayer), created at build. */
  get queryDense(): EinsumDense | null {
    return this.dense.query ?? null;
  }
  /** The key projection (Keras' `key` sublayer), created at build. */
  get keyDense(): EinsumDense | null {
    return this.dense.key ?? null;
  }
  /** The value projection (Keras' `value` sublayer), created at build. */
  get valueDense(): EinsumDense | null {
    return this.dense.value ?? null;
  }
  /** The gate projection, created at build when `useGate` is set. */
  get gateDense(): EinsumDense | null {
    return this.dense.gate ?? null;
  }
  /** The output projection (Keras' `attention_output` sublayer), created at build. */
  get outputDense(): EinsumDense | null {
    return this.dense.attention_output ?? null;
  }

  protected override sublayerTable(): SublayerTable {
    return MHA_SUBLAYERS;
  }

  protected override heads(): HeadCounts {
    const {numHeads, keyDim, valueDim} = this;
    return {query: numHeads, keyValue: numHeads, keyDim, valueDim};
  }

  protected override coreChunkSize(): number | null {
    return this.chunkSize;
  }

  protected override attentionAxesOf(queryRank: number): number[] {
    return this.attentionAxes ?? resolveAttentionAxes(this.attentionAxesArg, queryRank + 1);
  }

  /** The output's last axes: `outputShape` when given, else the query's (known) last dimension. */
  protected override outputDims(query: Shape): number[] {
    if (this.outputShapeArg != null) return intList(this.outputShapeArg, 'outputShape') as number[];
    const d = query[query.length - 1];
    if (d == null) {
      throw new Error(
        `Layer '${this.name}': the query's last dimension must be known, received ${formatShape(query)}`,
      );
    }
    return [d];
  }

  /** Query, value and key of one rank (any rank >= 3, with `attentionAxes`). */
  protected override checkRanks({query, value, key}: {query: Shape; value: Shape; key: Shape}) {
    if (query.length !== value.length || key.length !== value.length) {
      throw new Error(
        `Layer '${this.name}': query, value and key must have the same rank; received query ` +
          `${formatShape(query)}, value ${formatShape(value)}, key ${formatShape(key)}`,
      );
    }
  }

  protected override buildParts(parts: AttentionParts<Shape>): void {
    this.checkShapes(parts);
    this.buildShapes = {query: parts.query, value: parts.value, key: parts.key};
    this.attentionAxes = this.attentionAxesOf(parts.query.length);
    super.buildParts(parts);
  }

  /** Keras' equations (`_build_proj_equation`): the rank of the inputs decides their letters. */
  protected override projections(parts: AttentionParts<Shape>): Record<ProjectionName, Projection> {
    const {query, value, key} = parts;
    const free = query.length - 1;
    const dense = (bound: number, outDims: number[], input: Shape): Projection => {
      const p = buildProjectionEquation(free, bound, outDims.length);
      const outputShape = [...new Array(p.outputRank - 1 - outDims.length).fill(null), ...outDims];
      return {equation: p.equation, biasAxes: p.biasAxes, outputShape, input};
    };
    const heads = (w: number) => [this.numHeads, w];
    return {
      query: dense(1, heads(this.keyDim), query),
      key: dense(1, heads(this.keyDim), key),
      gate: dense(1, heads(this.valueDim), query),
      value: dense(1, heads(this.valueDim), value),
      attention_output: dense(2, this.outputDims(query), [
        ...query.slice(0, -1),
        this.numHeads,
        this.valueDim,
      ]),
    };
  }

  /** The layer's options, for serialization (tfjs' `getConfig`). */
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

// ---- Keras' projection equations and attention axes -------------------------------------------

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

function letter(i: number): string {
  if (i >= LETTERS.length) {
    throw new Error(
      `MultiHeadAttention: inputs of this rank need more than ${LETTERS.length} einsum indices`,
    );
  }
  return LETTERS[i];
}

interface ProjectionEquation {
  equation: string;
  biasAxes: string;
  outputRank: number;
}

/** `free` axes pass through, `bound` axes are contracted with the kernel, `output` axes are new. */
function buildProjectionEquation(free: number, bound: number, output: number): ProjectionEquation {
  let input = '';
  let kernel = '';
  let out = '';
  let bias = '';
  let offset = 0;
  for (let i = 0; i < free; i++) {
    const c = letter(i + offset);
    input += c;
    out += c;
  }
  offset += free;
  for (let i = 0; i < bound; i++) {
    const c = letter(i + offset);
    input += c;
    kernel += c;
  }
  offset += bound;
  for (let i = 0; i < output; i++) {
    const c = letter(i + offset);
    kernel += c;
    out += c;
    bias += c;
  }
  return {equation: `${input},${kernel}->${out}`, biasAxes: bias, outputRank: out.length};
}

/**
 * Resolves `attentionAxes` as Keras 3.12+ does: default all axes between batch and features;
 * negative axes count from the input rank (`(rank - 1) + axis` on the projected rank).
 *
 * @param projectedRank rank of the projected query (input rank + 1).
 */
function resolveAttentionAxes(axes: number[] | null, projectedRank: number): number[] {
  if (axes == null) {
    const out: number[] = [];
    for (let i = 1; i < projectedRank - 2; i++) {
      out.push(i);
    }
    return out;
  }
  const resolved = axes.map((a) => (a >= 0 ? a : projectedRank - 1 + a));
  for (const a of resolved) {
    if (!(a >= 1 && a < projectedRank - 2)) {
      throw new Error(
        `MultiHeadAttention: attentionAxes ${JSON.stringify(axes)} must name axes between the batch ` +
          `axis and the feature axis of a rank-${projectedRank - 1} query (1 to ${projectedRank - 3}, or negative)`,
      );
    }
  }
  if (new Set(resolved).size !== resolved.length) {
    throw new Error(`MultiHeadAttention: attentionAxes ${JSON.stringify(axes)} repeats an axis`);
  }
  return resolved;
}
