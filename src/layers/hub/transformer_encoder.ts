import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {combineMasks} from '../../ops/masking';
import {MultiHeadAttention} from '../attention/multi_head_attention';
import {formatShape, Shape} from '../engine/shapes';
import {kerasMaskOf, TransformerBlock, TransformerBlockArgs} from './transformer_block';
import {defineContract, LayerContract} from '../engine/contract';
import {
  ENCODER_ROLES,
  HUB_NEEDS_KERAS3,
  TRANSFORMER_KERAS3_KEYS,
  TRANSFORMER_WEIGHTS,
  TRANSFORMER_CONFIG_KEYS,
} from './hub_contract';

/** Options of {@link TransformerEncoder}. */
export interface TransformerEncoderArgs extends TransformerBlockArgs {
  /** keras-hub's option; only null is accepted (tfjs-layers refuses activity regularizers). */
  activityRegularizer?: null;
}

/** Call options of {@link TransformerEncoder}: `T` is `tf.Tensor` (eager) or `SymbolicTensor`. */
export interface TransformerEncoderCallArgs<T> {
  /** bool or int32 `[batch, T]`, true = keep (keys); replaces the input's Keras mask. */
  paddingMask?: T | null;
  /** bool or int32 `[batch, T, T]`, true = attend; ANDed with the padding mask. */
  attentionMask?: T | null;
  /** Return `[output, scores]`, the scores `[batch, numHeads, T, T]` (eager calls only). */
  returnAttentionScores?: boolean;
  /** Training mode: dropout is applied. Default false. */
  training?: boolean;
  /** The input's Keras mask `[batch, T]`, when given by hand. */
  mask?: tf.Tensor | null;
}

/**
 * keras-hub's `TransformerEncoder` (0.32): self-attention and a feed-forward network, each with
 * a residual and layer normalization (post-norm by default, pre-norm with `normalizeFirst`).
 *
 * - Input: `[batch, T, hidden]`; output the same shape (and Keras mask).
 * - Masks (bool or int32, true = keep): `paddingMask [batch, T]` (keys; it replaces the input's
 *   Keras mask) combined with `attentionMask [batch, T, T]`. The input's Keras mask (e.g. from
 *   `TokenAndPositionEmbedding({maskZero: true})`) also masks queries, as in Keras: padded rows
 *   attend uniformly over all keys.
 * - Sublayers (keras-hub's names): `self_attention_layer` (MultiHeadAttention, head size
 *   hidden / numHeads), `self_attention_layer_norm`, `feedforward_layer_norm`,
 *   `feedforward_intermediate_dense`, `feedforward_output_dense`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {TransformerEncoder} from 'tfjs-attention';
 *
 * const encoder = new TransformerEncoder({intermediateDim: 64, numHeads: 4});
 * const x = tf.randomNormal([2, 5, 16]); // [batch, T, hidden]
 * const paddingMask = tf.tensor2d([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], [2, 5], 'int32');
 * const y = encoder.apply(x, {paddingMask}); // [2, 5, 16]
 * const [z, scores] = encoder.apply(x, {returnAttentionScores: true}); // scores [2, 4, 5, 5]
 * ```
 */
export class TransformerEncoder extends TransformerBlock {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'TransformerEncoder';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {pkg: 'keras_hub', keys: TRANSFORMER_KERAS3_KEYS},
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'keyword', roles: ENCODER_ROLES, positional: 1, options: {training: null}},
      // the build shape Keras 3 records
      kerasOnlyKeys: ['inputs_shape'],
    },
    configKeys: TRANSFORMER_CONFIG_KEYS,
    weights: TRANSFORMER_WEIGHTS,
    decoding: {
      kind: 'refused',
      reason: 'not known to compute each position alone (an encoder attends both ways)',
    },
  });

  protected readonly roleNames = ENCODER_ROLES;
  protected readonly positionalRoles = 1;
  protected readonly tensorOptions = ['paddingMask', 'attentionMask'] as const;
  protected readonly otherOptions = ['returnAttentionScores'] as const;

  /** The self-attention sublayer (`self_attention_layer`), created at build. */
  selfAttention: MultiHeadAttention | null = null;
  private selfAttentionNorm: layers.Layer | null = null;

  constructor(args: TransformerEncoderArgs) {
    super(args, ['activityRegularizer']);
    if (args.activityRegularizer != null) {
      throw new Error(
        "TransformerEncoder: activityRegularizer is not supported (tfjs-layers' Layer.apply " +
          'refuses activity regularizers)',
      );
    }
  }

  /**
   * Eager calls return a `tf.Tensor`, or `[output, scores]` with `{returnAttentionScores: true}`;
   * symbolic calls (functional models) a `SymbolicTensor`.
   */
  override apply(
    inputs: tf.Tensor,
    kwargs: TransformerEncoderCallArgs<tf.Tensor> & {returnAttentionScores: true},
  ): [tf.Tensor, tf.Tensor];
  override apply(
    inputs: tf.Tensor,
    kwargs?: TransformerEncoderCallArgs<tf.Tensor> & {returnAttentionScores?: false},
  ): tf.Tensor;
  override apply(
    inputs: SymbolicTensor,
    kwargs?: TransformerEncoderCallArgs<SymbolicTensor> & {returnAttentionScores?: false},
  ): SymbolicTensor;
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs: Kwargs = {},
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    return super.apply(inputs, kwargs);
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = this.mainShape(inputShape);
    const width = shape[2] as number;
    const keyDim = this.headSize(width);
    this.selfAttention = this.addSublayer(
      new MultiHeadAttention({
        name: 'self_attention_layer',
        numHeads: this.numHeads,
        keyDim,
        dropout: this.dropout,
        seed: this.sublayerSeed(0),
        kernelInitializer: this.kernelInitializer,
        biasInitializer: this.biasInitializer,
        kernelRegularizer: this.kernelRegularizer,
        biasRegularizer: this.biasRegularizer,
      }),
      shape,
    );
    this.selfAttentionNorm = this.addSublayer(this.layerNorm('self_attention_layer_norm'), shape);
    this.buildFeedForward(shape, true);
    this.built = true;
  }

  private mainShape(inputShape: Shape | Shape[]): Shape {
    const shape = this.shapesByRole(inputShape).get('inputs') as Shape;
    if (shape.length !== 3) {
      throw new Error(
        `Layer '${this.name}' expected inputs of shape [batch, length, hidden], received ${formatShape(shape)}`,
      );
    }
    return shape;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return this.mainShape(inputShape);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    this.checkOptions(kwargs);
    return tf.tidy(() => {
      const list = Array.isArray(inputs) ? inputs : [inputs];
      const parts = this.byRole(list);
      const x = parts.get('inputs') as tf.Tensor;
      if (x.rank !== 3 || x.dtype !== 'float32') {
        throw new Error(
          `Layer '${this.name}' expected float32 inputs of shape [batch, length, hidden], received ` +
            `${x.dtype} of shape ${formatShape(x.shape)}`,
        );
      }
      const [B, T] = x.shape;
      const keras = kerasMaskOf(x, kwargs.mask, 0);
      const padding = (kwargs.paddingMask as tf.Tensor) ?? parts.get('paddingMask') ?? keras;
      const attention = (kwargs.attentionMask as tf.Tensor) ?? parts.get('attentionMask') ?? null;
      this.checkMaskShape(padding, [B, T], 'paddingMask');
      this.checkMaskShape(attention, [B, T, T], 'attentionMask');
      // keras-hub's merge_padding_and_attention_mask: keys of the padding mask AND the mask
      const mask = combineMasks(padding && tf.expandDims(padding, 1), attention);
      const training = kwargs.training === true;
      const withScores = kwargs.returnAttentionScores === true;
      let scores: tf.Tensor | null = null;
      const attended = this.residual(
        x,
        this.selfAttentionNorm as layers.Layer,
        (y) => {
          // the query's Keras mask reaches the attention too (Keras passes it as query / value mask)
          const out = (this.selfAttention as MultiHeadAttention).call(y, {
            mask: keras == null ? undefined : [keras],
            attentionMask: mask ?? undefined,
            returnAttentionScores: withScores,
            training,
          });
          if (!Array.isArray(out)) return out;
          scores = out[1];
          return out[0];
        },
        training,
      );
      const output = this.feedForward(attended, training);
      this.lastOutputCount = scores == null ? 1 : 2;
      return scores == null ? output : [output, scores];
    });
  }

  override computeMask(
    inputs: tf.Tensor | tf.Tensor[],
    mask?: tf.Tensor | tf.Tensor[],
  ): tf.Tensor | tf.Tensor[] {
    return this.outputMasks(inputs, mask, 'inputs');
  }

  override getConfig(): tf.serialization.ConfigDict {
    return this.blockConfig();
  }
}
