import * as tf from '@tensorflow/tfjs-core';
import {initializers, LayerVariable} from '@tensorflow/tfjs-layers';

import {AttentionParts} from './attention_inputs';
import {AttendContext, AttendResult, BaseAttention, BaseAttentionArgs} from './base_attention';
import {formatShape, Shape} from './shapes';

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
 * ```js
 * const att = new Attention({useScale: true});
 * const out = att.apply([query, value]); // [batch, Tq, dimV]
 * ```
 */
export class Attention extends BaseAttention {
  /** @nocollapse */
  static readonly className: string = 'Attention';

  readonly useScale: boolean;
  readonly scoreMode: ScoreMode;
  scale: LayerVariable | null = null;
  concatScoreWeight: LayerVariable | null = null;
  /** Whether returned scores are taken after dropout (Keras) or before (d2l). */
  protected scoresAfterDropout = true;

  constructor(args: AttentionArgs = {}) {
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

  /** Attention logits `[batch, ..., Tq, Tv]` from query and key. */
  protected computeScores(query: tf.Tensor, key: tf.Tensor): tf.Tensor {
    if (this.scoreMode === 'dot') {
      const s = tf.matMul(query, key, false, true); // [batch, ..., Tq, Tv]
      return this.scale == null ? s : tf.mul(s, this.scale.read());
    }
    const q = tf.expandDims(query, -2); // [batch, ..., Tq, 1, dim]
    const k = tf.expandDims(key, -3); // [batch, ..., 1, Tv, dim]
    let sum = tf.add(q, k); // [batch, ..., Tq, Tv, dim]
    if (this.scale != null) {
      sum = tf.mul(sum, this.scale.read());
    }
    return tf.mul(tf.sum(tf.tanh(sum), -1), (this.concatScoreWeight as LayerVariable).read());
  }

  protected override attend(parts: AttentionParts<tf.Tensor>, ctx: AttendContext): AttendResult {
    this.checkShapes(
      {
        query: parts.query.shape,
        value: parts.value.shape,
        key: parts.key.shape,
        validLens: null,
        attentionMask: null,
      },
      this.requiresSameFeatures(),
    );
    const logits = this.computeScores(parts.query, parts.key); // [batch, ..., Tq, Tv]
    const mask = this.combinedMask(logits.shape, ctx, {
      numAxes: 1,
      headsAxis: false,
      queryMaskInScores: false,
    });
    const {weights, dropped} = this.attentionWeights(logits, mask, 1, ctx.training);
    let output = tf.matMul(dropped, parts.value); // [batch, ..., Tq, dimV]
    if (ctx.queryMask != null) {
      output = tf.mul(output, tf.expandDims(tf.cast(ctx.queryMask, output.dtype), -1));
    }
    return {output, scores: this.scoresAfterDropout ? dropped : weights};
  }

  protected requiresSameFeatures(): boolean {
    return true;
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...super.getConfig(), useScale: this.useScale, scoreMode: this.scoreMode};
  }
}

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
 * ```js
 * const att = new DotProductAttention({dropout: 0.1});
 * const out = att.apply([queries, values, keys], {validLens}); // d2l: attention(q, k, v, valid_lens)
 * ```
 */
export class DotProductAttention extends Attention {
  /** @nocollapse */
  static override readonly className: string = 'DotProductAttention';

  constructor(args: DotProductAttentionArgs = {}) {
    super({...args, useScale: false, scoreMode: 'dot'});
    this.scoresAfterDropout = false;
  }

  protected override computeScores(query: tf.Tensor, key: tf.Tensor): tf.Tensor {
    const d = query.shape[query.rank - 1];
    return tf.div(tf.matMul(query, key, false, true), Math.sqrt(d)); // [batch, ..., Tq, Tv]
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config = super.getConfig();
    delete config.useScale;
    delete config.scoreMode;
    return config;
  }
}
