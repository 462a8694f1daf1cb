import * as tf from '@tensorflow/tfjs-core';
import {initializers, LayerVariable} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {attendToScores, AttentionCoreOptions, dotProductAttention} from '../../ops/attention_core';
import {callMask} from '../engine/call_mask';
import {
  AttendResult,
  BaseAttention,
  BaseAttentionArgs,
  ScoresOption,
  TensorSpec,
} from '../engine/base_attention';
import {AttentionParts} from '../engine/call_spec';
import {formatShape, Shape} from '../engine/shapes';
import {defineContract, LayerContract} from '../engine/contract';
import {ATTENTION_CONFIG_KEYS, NO_CACHE, NO_KERAS_DOT_PRODUCT} from './attention_contract';
import {checkConstructorArgs} from '../engine/constructor_args';

/** How `Attention` scores a query against a key: `'dot'` (dot product) or `'concat'` (`tanh(q + k)`). */
export type ScoreMode = 'dot' | 'concat';

export interface AttentionArgs extends BaseAttentionArgs {
  /** Multiply the scores by a trainable scalar `scale` (ones-initialised). Default false. */
  useScale?: boolean;
  /** `'dot'`: `q·kᵀ`; `'concat'`: `w · Σ tanh(q + k)`. Default `'dot'`. */
  scoreMode?: ScoreMode;
}

/**
 * Keras' dot-product (Luong) attention layer, `Attention`.
 *
 * - Inputs: `query [batch, Tq, dim]`, `value [batch, Tv, dimV]`, optional `key [batch, Tv, dim]`
 *   (default: value); also N-D `[batch, ..., T, dim]`. Optional lengths / mask inputs: see
 *   {@link BaseAttention}.
 * - Output: `[batch, Tq, dimV]`; with `returnAttentionScores`, also the weights `[batch, Tq, Tv]`
 *   (after dropout, as in Keras).
 * - Weights: `scale` (scalar) if `useScale`; `concat_score_weight` (scalar) for `'concat'`.
 *
 * Keras semantics: masked keys get weight 0; rows of the output whose query is masked (a Keras
 * query mask) are zeroed.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Attention} from 'tfjs-attention';
 *
 * const query = tf.randomNormal([2, 3, 8]);
 * const value = tf.randomNormal([2, 5, 8]);
 * const att = new Attention({useScale: true});
 * const [out, weights] = att.apply([query, value], {returnAttentionScores: true});
 * // out [2, 3, 8], weights [2, 3, 5]
 * ```
 */
export class Attention<S extends boolean = false> extends BaseAttention<S> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className: string = 'Attention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {keys: ['use_scale', 'score_mode', 'dropout', 'seed']},
      keras2: {},
      call: {kind: 'attention', byKeyword: false},
      // Keras <= 2.9 wrote `causal` (rewritten to use_causal_mask by the loader)
      kerasOnlyKeys: ['causal'],
    },
    configKeys: [...ATTENTION_CONFIG_KEYS, 'useScale', 'scoreMode'],
    decoding: NO_CACHE,
  });

  /** The `useScale` option: whether the scores are multiplied by a trainable scalar. */
  readonly useScale: boolean;
  /** The `scoreMode` option. */
  readonly scoreMode: ScoreMode;
  /** The trainable scalar `scale`, created at build when `useScale` is set. */
  scale: LayerVariable | null = null;
  /** The trainable scalar of the `'concat'` score mode, created at build. */
  concatScoreWeight: LayerVariable | null = null;
  /** Whether returned scores are taken after dropout (Keras) or before (d2l). */
  protected scoresAfterDropout = true;

  constructor(args: AttentionArgs & ScoresOption<S> = {}) {
    // its subclasses check their own options (they hand this constructor their own settings)
    if (new.target === Attention) checkConstructorArgs('Attention', args);
    super(args);
    const mode = args.scoreMode ?? 'dot';
    if (mode !== 'dot' && mode !== 'concat') {
      throw new Error(
        `${this.getClassName()}: invalid value for argument scoreMode. Expected one of ` +
          `{'dot', 'concat'}, received ${JSON.stringify(args.scoreMode)}`,
      );
    }
    this.useScale = Boolean(args.useScale ?? false);
    this.scoreMode = mode;
  }

  protected checkShapes(parts: AttentionParts<Shape>, sameFeatures: boolean): void {
    const {query, value, key} = parts;
    const kLen = key[key.length - 2];
    const vLen = value[value.length - 2];
    if (kLen != null && vLen != null && kLen !== vLen) {
      throw new Error(
        `Layer '${this.name}': key and value must have the same length (axis -2); received key ` +
          `${formatShape(key)} and value ${formatShape(value)}`,
      );
    }
    const qd = query[query.length - 1];
    const kd = key[key.length - 1];
    if (sameFeatures && qd != null && kd != null && qd !== kd) {
      throw new Error(
        `Layer '${this.name}': query and key must have the same last dimension; received query ` +
          `${formatShape(query)} and key ${formatShape(key)}`,
      );
    }
    if (query.length !== value.length || key.length !== value.length) {
      throw new Error(
        `Layer '${this.name}': query, value and key must have the same rank; received ` +
          `${formatShape(query)}, ${formatShape(value)} and ${formatShape(key)}`,
      );
    }
  }

  protected override buildParts(parts: AttentionParts<Shape>): void {
    this.checkShapes(parts, true);
    if (this.useScale) {
      this.scale = this.addWeight('scale', [], 'float32', initializers.ones());
    }
    if (this.scoreMode === 'concat') {
      this.concatScoreWeight = this.addWeight(
        'concat_score_weight',
        [],
        'float32',
        initializers.ones(),
      );
    }
  }

  protected override outputShapeOf(parts: AttentionParts<Shape>): Shape {
    return [...parts.query.slice(0, -1), parts.value[parts.value.length - 1]];
  }

  protected override scoresShapeOf(parts: AttentionParts<Shape>): Shape {
    return [...parts.query.slice(0, -1), parts.value[parts.value.length - 2]];
  }

  /**
   * Logits `[batch, ..., Tq, Tv]` of layers whose scores are not a (scaled) dot product; null:
   * the dot product `q kᵀ` times {@link dotScale}, computed by the attention core.
   */
  protected computeScores(query: tf.Tensor, key: tf.Tensor): tf.Tensor | null {
    if (this.scoreMode === 'dot') return null;
    const q = tf.expandDims(query, -2); // [batch, ..., Tq, 1, dim]
    const k = tf.expandDims(key, -3); // [batch, ..., 1, Tv, dim]
    let sum = tf.add(q, k); // [batch, ..., Tq, Tv, dim]
    if (this.scale != null) {
      sum = tf.mul(sum, this.scale.read());
    }
    return tf.mul(tf.sum(tf.tanh(sum), -1), (this.concatScoreWeight as LayerVariable).read());
  }

  /** The factor of the dot-product logits: Keras' trainable `scale`, or none. */
  protected dotScale(_query: tf.Tensor): number | tf.Tensor | null {
    return this.scale == null ? null : this.scale.read();
  }

  protected override attend(spec: TensorSpec): AttendResult {
    const {query, value, key} = spec.parts;
    const shapes = {query: query.shape, value: value.shape, key: key.shape};
    this.checkShapes(
      {...shapes, validLens: null, attentionMask: null},
      this.requiresSameFeatures(),
    );
    const scoresShape = [...query.shape.slice(0, -1), key.shape[key.rank - 2]]; // [batch, ..., Tq, Tv]
    const options: AttentionCoreOptions = {
      ...this.dropoutOptions(spec),
      // the query's Keras mask is applied to the output, as Keras' Attention does
      mask: callMask(spec, scoresShape, {
        layerName: this.name,
        missingAxesAt: null,
        queryMaskRows: false,
      }),
      scoresAfterDropout: this.scoresAfterDropout,
    };
    const logits = this.computeScores(query, key);
    const {output, scores} =
      logits == null
        ? dotProductAttention(query, key, value, {
            ...options,
            scale: this.dotScale(query),
            chunkSize: 0,
          })
        : attendToScores(logits, value, options);
    // Keras: output rows of masked queries are zero
    const rows = spec.queryMask && tf.expandDims(tf.cast(spec.queryMask, output.dtype), -1);
    return {output: rows ? tf.mul(output, rows) : output, scores};
  }

  /** Whether Keras has this form of the layer, which Keras calls on a list only. */
  protected kerasForm(): boolean {
    return true;
  }

  /** Keras' `_validate_inputs`: the Keras forms must be called on `[query, value]` (or `key`). */
  protected override checkSingleTensorCall(input: tf.Tensor): void {
    if (!this.kerasForm()) return;
    throw new Error(
      `Layer '${this.name}' (${this.getClassName()}): ${this.getClassName()} layer must be ` +
        `called on a list of inputs, namely [query, value] or [query, value, key]; received ` +
        `a single tensor of shape ${formatShape(input.shape)} (for self-attention pass [x, x])`,
    );
  }

  protected requiresSameFeatures(): boolean {
    return true;
  }

  /**
   * Keras' `mask` argument of these layers is a list `[queryMask, valueMask]` (or with a
   * `keyMask`); Keras raises for anything else, and so does this layer, rather than ignore the
   * mask or take a one-element list as the query's. One exception: in a functional model tfjs'
   * `predict` passes the first input's mask alone (a tensor, not a list) to every masked layer,
   * so a layer that belongs to a model leaves a lone tensor to be ignored, as before (its masks
   * are read off its inputs).
   */
  private checkMaskList(mask: unknown, inputCount: number): void {
    if (mask == null) return;
    const layer = `Layer '${this.name}' (${this.getClassName()})`;
    const what = (m: unknown) =>
      m instanceof tf.Tensor
        ? `a ${m.dtype} tensor of shape ${formatShape(m.shape)}`
        : Array.isArray(m)
          ? `a list of length ${m.length}`
          : (JSON.stringify(m) ?? typeof m);
    if (!Array.isArray(mask)) {
      if (mask instanceof tf.Tensor && this.inboundNodes.length > 0) return; // tfjs' predict
      throw new Error(
        `${layer}: mask must be a list, namely [queryMask, valueMask] (or [queryMask, ` +
          `valueMask, keyMask]); received ${what(mask)}`,
      );
    }
    if (mask.length < 2 || mask.length > Math.max(3, inputCount)) {
      throw new Error(
        `${layer}: expected a mask list of length 2 or 3, namely [queryMask, valueMask] or ` +
          `[queryMask, valueMask, keyMask]; received a list of length ${mask.length}`,
      );
    }
    mask.forEach((m: unknown, i) => {
      if (m != null && !(m instanceof tf.Tensor)) {
        throw new Error(
          `${layer}: expected mask[${i}] to be a tensor or null, received ${what(m)}`,
        );
      }
    });
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    this.checkMaskList(kwargs?.mask, Array.isArray(inputs) ? inputs.length : 1);
    return super.call(inputs, kwargs);
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...super.getConfig(), useScale: this.useScale, scoreMode: this.scoreMode};
  }
}

/** Options of {@link DotProductAttention}: those every attention layer takes. */
export type DotProductAttentionArgs = BaseAttentionArgs;

/**
 * Scaled dot-product attention as in d2l: `softmax(q kᵀ / sqrt(d)) v`, with valid-length masking.
 *
 * - Inputs: `query [batch, Tq, d]`, `value [batch, Tv, dimV]`, optional `key [batch, Tv, d]`;
 *   lengths `[batch]` or `[batch, Tq]` as a kwarg (`validLens`) or a trailing input.
 * - Output: `[batch, Tq, dimV]`; with `returnAttentionScores`, also the weights `[batch, Tq, Tv]`
 *   (before dropout, as d2l stores them).
 * - No weights.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {DotProductAttention} from 'tfjs-attention';
 *
 * const queries = tf.randomNormal([2, 1, 2]);
 * const keys = tf.randomNormal([2, 10, 2]);
 * const values = tf.randomNormal([2, 10, 4]);
 * const att = new DotProductAttention({dropout: 0.1});
 * // d2l's attention(queries, keys, values, valid_lens); note the Keras order q, v, k
 * const out = att.apply([queries, values, keys], {validLens: tf.tensor1d([2, 6], 'int32')});
 * // out [2, 1, 4]
 * ```
 */
export class DotProductAttention<S extends boolean = false> extends Attention<S> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'DotProductAttention';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = {
    ...Attention.contract,
    keras: {
      ...Attention.contract.keras,
      keras3: {refused: NO_KERAS_DOT_PRODUCT},
      keras2: {refused: NO_KERAS_DOT_PRODUCT},
      kerasOnlyKeys: [],
    },
    configKeys: ATTENTION_CONFIG_KEYS,
  };

  constructor(args: DotProductAttentionArgs & ScoresOption<S> = {}) {
    checkConstructorArgs('DotProductAttention', args);
    super({...args, useScale: false, scoreMode: 'dot'});
    this.scoresAfterDropout = false;
  }

  /** The d2l layer, which Keras does not have: a single tensor is self-attention. */
  protected override kerasForm(): boolean {
    return false;
  }

  protected override dotScale(query: tf.Tensor): number {
    return 1 / Math.sqrt(query.shape[query.rank - 1]); // d2l: q kᵀ / sqrt(d)
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config = super.getConfig();
    delete config.useScale;
    delete config.scoreMode;
    return config;
  }
}
