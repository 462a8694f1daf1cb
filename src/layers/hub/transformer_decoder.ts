import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {causalMask, combineMasks} from '../../ops/masking';
import {CachedMultiHeadAttention} from './cached_multi_head_attention';
import {formatShape, Shape} from '../engine/shapes';
import {kerasMaskOf, TransformerBlock, TransformerBlockArgs} from './transformer_block';
import {defineContract, GraphLayer, LayerContract} from '../engine/contract';
import {
  DECODER_DECODING,
  DECODER_ROLES,
  HUB_NEEDS_KERAS3,
  TRANSFORMER_KERAS3_KEYS,
  TRANSFORMER_WEIGHTS,
  TRANSFORMER_CONFIG_KEYS,
} from './hub_contract';

/** Options of {@link TransformerDecoder}. */
export interface TransformerDecoderArgs extends TransformerBlockArgs {
  /** Causal self-attention (keras-hub's call argument `use_causal_mask`). Default true. */
  useCausalMask?: boolean;
  /** keras-hub writes the build shapes into its config; accepted and unused here. */
  decoderSequenceShape?: Shape | null;
  /** keras-hub writes the build shapes into its config; accepted and unused here. */
  encoderSequenceShape?: Shape | null;
}

/** Call options of {@link TransformerDecoder}: `T` is `tf.Tensor` (eager) or `SymbolicTensor`. */
export interface TransformerDecoderCallArgs<T> {
  /** bool or int32 `[batch, T]`, true = keep (keys); replaces the Keras mask of `x`. */
  decoderPaddingMask?: T | null;
  /** bool or int32 `[batch, T, T]`, true = attend; ANDed with the causal mask. */
  decoderAttentionMask?: T | null;
  /** bool or int32 `[batch, S]`; replaces the encoder sequence's Keras mask. */
  encoderPaddingMask?: T | null;
  /** bool or int32 `[batch, T, S]` for the cross-attention. */
  encoderAttentionMask?: T | null;
  /** Causal self-attention for this call (overrides the layer's `useCausalMask`). */
  useCausalMask?: boolean;
  /**
   * The self-attention key / value cache `[batch, 2, maxLength, numHeads, hidden / numHeads]`
   * (eager calls only); the call returns `[output, updatedCache]`.
   */
  selfAttentionCache?: tf.Tensor | null;
  /** Where this call's positions go in the self-attention cache. */
  selfAttentionCacheUpdateIndex?: number | null;
  /** The cross-attention key / value cache (eager calls only), returned updated after it. */
  crossAttentionCache?: tf.Tensor | null;
  /** Where this call's positions go in the cross-attention cache (null: read it as is). */
  crossAttentionCacheUpdateIndex?: number | null;
  /** Training mode: dropout is applied. Default false. */
  training?: boolean;
  /** Keras masks of the inputs, when given by hand. */
  mask?: tf.Tensor | Array<tf.Tensor | null> | null;
}

/** Decoder call options with a self-attention cache. */
type SelfCacheArgs = TransformerDecoderCallArgs<tf.Tensor> & {selfAttentionCache: tf.Tensor};
/** Decoder call options with a cross-attention cache. */
type CrossCacheArgs = TransformerDecoderCallArgs<tf.Tensor> & {crossAttentionCache: tf.Tensor};
/** Decoder call options without caches. */
type NoCacheArgs<T> = TransformerDecoderCallArgs<T> & {
  selfAttentionCache?: null;
  crossAttentionCache?: null;
};

/** The sublayers of a decoder-only call ({@link TransformerDecoder.selfAttentionParts}). */
export interface TransformerDecoderParts {
  /** The causal self-attention. */
  attention: GraphLayer;
  /** Its layer normalization. */
  attentionNorm: GraphLayer;
  /** The feed-forward's inner product (with its activation). */
  inner: GraphLayer;
  /** The feed-forward's outer product. */
  outer: GraphLayer;
  /** The feed-forward's layer normalization. */
  ffNorm: GraphLayer;
}

/**
 * keras-hub's `TransformerDecoder` (0.32): causal self-attention, optional cross-attention to an
 * encoder sequence, and a feed-forward network, each with a residual and layer normalization
 * (post-norm by default, pre-norm with `normalizeFirst`).
 *
 * - Decoder-only: `decoder.apply(x)`; with cross-attention: `decoder.apply([x, encoderSequence])`
 *   (the number of inputs is fixed by the first call). Output `[batch, T, hidden]`.
 * - Masks (bool or int32, true = keep): `decoderPaddingMask [batch, T]` (keys; it replaces the
 *   Keras mask of `x`), `decoderAttentionMask [batch, T, T]`, both ANDed with the causal mask;
 *   `encoderPaddingMask [batch, S]` (replaces the encoder sequence's Keras mask),
 *   `encoderAttentionMask [batch, T, S]` for the cross-attention. Queries are never masked.
 * - Cached decoding (eager): `decoder.apply(x, {selfAttentionCache, selfAttentionCacheUpdateIndex})`
 *   returns `[output, cache]`; the cache is `[batch, 2, maxLength, numHeads, hidden / numHeads]`
 *   and `x` holds the positions from `selfAttentionCacheUpdateIndex` on. With cross-attention,
 *   `crossAttentionCache` (and `crossAttentionCacheUpdateIndex`) too: `[output, self, cross]`.
 * - Sublayers (keras-hub's names): `self_attention` (CachedMultiHeadAttention),
 *   `self_attention_layer_norm`, `cross_attention`, `cross_attention_layer_norm`,
 *   `feedforward_intermediate_dense`, `feedforward_output_dense`, `feedforward_layer_norm`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {TransformerDecoder} from 'tfjs-attention';
 *
 * const decoder = new TransformerDecoder({intermediateDim: 64, numHeads: 4});
 * const x = tf.randomNormal([1, 4, 16]); // [batch, T, hidden]
 * const y = decoder.apply(x); // [1, 4, 16]
 * // cached decoding, one position at a time
 * const cache = tf.zeros([1, 2, 4, 4, 4]); // [batch, 2, maxLength, numHeads, hidden / numHeads]
 * const first = x.slice([0, 0, 0], [1, 1, 16]);
 * const [step, updated] = decoder.apply(first, {
 *   selfAttentionCache: cache,
 *   selfAttentionCacheUpdateIndex: 0,
 * }); // step [1, 1, 16], updated [1, 2, 4, 4, 4]
 * ```
 */
export class TransformerDecoder extends TransformerBlock {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'TransformerDecoder';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {pkg: 'keras_hub', keys: TRANSFORMER_KERAS3_KEYS},
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {
        kind: 'keyword',
        roles: DECODER_ROLES,
        positional: 2,
        // keras-hub's decoder is causal unless told otherwise
        options: {training: null, use_causal_mask: 'use_causal_mask'},
      },
      // the build shapes Keras 3 records
      kerasOnlyKeys: ['decoder_sequence_shape', 'encoder_sequence_shape'],
    },
    configKeys: [...TRANSFORMER_CONFIG_KEYS, 'useCausalMask'],
    weights: TRANSFORMER_WEIGHTS,
    decoding: DECODER_DECODING,
  });

  /**
   * The sublayers of one decoder-only call in call order (self-attention and its norm, the
   * feed-forward's two products and its norm), or null before build: what the compiled decoding
   * step's rule reads (generate/step_rules/transformer_decoder.ts).
   */
  get selfAttentionParts(): TransformerDecoderParts | null {
    const parts = [
      this.selfAttention,
      this.selfAttentionNorm,
      this.feedforwardIntermediate,
      this.feedforwardOutput,
      this.feedforwardNorm,
    ];
    if (parts.some((p) => p == null)) return null;
    const [attention, attentionNorm, inner, outer, ffNorm] = parts as GraphLayer[];
    return {attention, attentionNorm, inner, outer, ffNorm};
  }

  protected readonly roleNames = DECODER_ROLES;
  protected readonly positionalRoles = 2;
  protected readonly tensorOptions = [
    'decoderPaddingMask',
    'decoderAttentionMask',
    'encoderPaddingMask',
    'encoderAttentionMask',
  ] as const;
  protected readonly otherOptions = [
    'useCausalMask',
    'selfAttentionCache',
    'selfAttentionCacheUpdateIndex',
    'crossAttentionCache',
    'crossAttentionCacheUpdateIndex',
  ] as const;

  /** Whether the self-attention is causal (the `useCausalMask` option, or a functional call's). */
  useCausalMask: boolean;
  /** The self-attention sublayer (`self_attention`), created at build. */
  selfAttention: CachedMultiHeadAttention | null = null;
  /** The cross-attention sublayer (`cross_attention`), created at build when there is an encoder sequence. */
  crossAttention: CachedMultiHeadAttention | null = null;
  private selfAttentionNorm: layers.Layer | null = null;
  private crossAttentionNorm: layers.Layer | null = null;

  constructor(args: TransformerDecoderArgs) {
    super(args, ['useCausalMask', 'decoderSequenceShape', 'encoderSequenceShape']);
    this.useCausalMask = args.useCausalMask ?? true;
  }

  /**
   * Eager calls return a `tf.Tensor`; with `selfAttentionCache` `[output, selfCache]`, with
   * `crossAttentionCache` too `[output, selfCache, crossCache]`. Symbolic calls (functional
   * models) return a `SymbolicTensor`.
   */
  override apply(
    inputs: tf.Tensor | tf.Tensor[],
    kwargs: SelfCacheArgs & CrossCacheArgs,
  ): [tf.Tensor, tf.Tensor, tf.Tensor];
  override apply(
    inputs: tf.Tensor | tf.Tensor[],
    kwargs:
      | (SelfCacheArgs & {crossAttentionCache?: null})
      | (CrossCacheArgs & {selfAttentionCache?: null}),
  ): [tf.Tensor, tf.Tensor];
  override apply(inputs: tf.Tensor | tf.Tensor[], kwargs?: NoCacheArgs<tf.Tensor>): tf.Tensor;
  override apply(
    inputs: SymbolicTensor | SymbolicTensor[],
    kwargs?: NoCacheArgs<SymbolicTensor>,
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

  /** Whether this decoder attends to an encoder sequence (known once built). */
  get hasCrossAttention(): boolean {
    return this.crossAttention != null;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shapes = this.shapesByRole(inputShape);
    const shape = this.sequenceShape(shapes, 'decoderSequence') as Shape;
    const encoder = this.sequenceShape(shapes, 'encoderSequence');
    const headDim = this.headSize(shape[2]);
    const attention = (name: string, index: number) =>
      new CachedMultiHeadAttention({
        name,
        numHeads: this.numHeads,
        keyDim: headDim,
        valueDim: headDim,
        dropout: this.dropout,
        seed: this.sublayerSeed(index),
        kernelInitializer: this.kernelInitializer,
        biasInitializer: this.biasInitializer,
        kernelRegularizer: this.kernelRegularizer,
        biasRegularizer: this.biasRegularizer,
      });
    this.selfAttention = this.addSublayer(attention('self_attention', 0), shape);
    this.selfAttentionNorm = this.addSublayer(this.layerNorm('self_attention_layer_norm'), shape);
    if (encoder != null) {
      this.crossAttention = this.addSublayer(attention('cross_attention', 1), [shape, encoder]);
      this.crossAttentionNorm = this.addSublayer(
        this.layerNorm('cross_attention_layer_norm'),
        shape,
      );
    }
    this.buildFeedForward(shape, false);
    this.built = true;
  }

  private sequenceShape(shapes: Map<string, Shape>, role: string): Shape | null {
    const shape = shapes.get(role) ?? null;
    if (shape != null && shape.length !== 3) {
      throw new Error(
        `Layer '${this.name}' expected ${role} of shape [batch, length, hidden], received ${formatShape(shape)}`,
      );
    }
    return shape;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return this.sequenceShape(this.shapesByRole(inputShape), 'decoderSequence') as Shape;
  }

  protected override recordOption(name: string, value: unknown): void {
    if (name === 'useCausalMask') {
      this.useCausalMask = Boolean(value); // kept in the config: tfjs replays no call options
      return;
    }
    super.recordOption(name, value);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    this.checkOptions(kwargs);
    return tf.tidy(() => {
      const list = Array.isArray(inputs) ? inputs : [inputs];
      const roles = this.rolesOf(list.length);
      const parts = new Map(roles.map((r, i) => [r, list[i]]));
      const option = (name: string) =>
        (kwargs[name] as tf.Tensor | undefined) ?? parts.get(name) ?? null;
      const x = parts.get('decoderSequence') as tf.Tensor;
      const encoder = parts.get('encoderSequence') ?? null;
      for (const [what, t] of [
        ['decoderSequence', x],
        ['encoderSequence', encoder],
      ] as const) {
        if (t != null && (t.rank !== 3 || t.dtype !== 'float32')) {
          throw new Error(
            `Layer '${this.name}' expected a float32 ${what} of shape [batch, length, hidden], ` +
              `received ${t.dtype} of shape ${formatShape(t.shape)}`,
          );
        }
      }
      if ((encoder != null) !== this.hasCrossAttention) {
        throw new Error(
          `Layer '${this.name}' was built ${this.hasCrossAttention ? 'with' : 'without'} ` +
            `cross-attention but is called ${encoder != null ? 'with' : 'without'} an encoder ` +
            'sequence; the number of inputs must not change between calls',
        );
      }
      const selfCache = (kwargs.selfAttentionCache as tf.Tensor | undefined) ?? null;
      const selfIndex = (kwargs.selfAttentionCacheUpdateIndex as number | undefined) ?? null;
      const crossCache = (kwargs.crossAttentionCache as tf.Tensor | undefined) ?? null;
      if (this.hasCrossAttention && (selfCache == null) !== (crossCache == null)) {
        throw new Error(
          `Layer '${this.name}': with cross-attention, selfAttentionCache and crossAttentionCache ` +
            'must both be given or both be omitted',
        );
      }
      if (selfCache == null && selfIndex != null) {
        throw new Error(
          `Layer '${this.name}': selfAttentionCacheUpdateIndex was given without a selfAttentionCache`,
        );
      }
      const [B, T] = x.shape;
      const training = kwargs.training === true;

      // self-attention mask: key padding AND attention mask AND causal (shifted in cached calls)
      const padding =
        option('decoderPaddingMask') ??
        kerasMaskOf(x, kwargs.mask, roles.indexOf('decoderSequence'));
      const attentionMask = option('decoderAttentionMask');
      this.checkMaskShape(padding, [B, T], 'decoderPaddingMask');
      const S = selfCache == null ? T : (selfCache.shape[2] as number);
      this.checkMaskShape(attentionMask, [B, T, S], 'decoderAttentionMask');
      const selfMask = combineMasks(
        padding && tf.expandDims(padding, 1),
        attentionMask,
        this.useCausalMask ? tf.expandDims(causalMask(T, S, selfIndex ?? 0), 0) : null,
      );
      let newSelfCache: tf.Tensor | null = null;
      let newCrossCache: tf.Tensor | null = null;
      let y = this.residual(
        x,
        this.selfAttentionNorm as layers.Layer,
        (h) => {
          const out = (this.selfAttention as CachedMultiHeadAttention).call(h, {
            attentionMask: selfMask ?? undefined,
            cache: selfCache ?? undefined,
            cacheUpdateIndex: selfIndex ?? undefined,
            training,
          });
          if (!Array.isArray(out)) return out;
          newSelfCache = out[1];
          return out[0];
        },
        training,
      );
      if (encoder != null) {
        const Se = encoder.shape[1] as number;
        const encPadding =
          option('encoderPaddingMask') ??
          kerasMaskOf(encoder, kwargs.mask, roles.indexOf('encoderSequence'));
        const encAttention = option('encoderAttentionMask');
        this.checkMaskShape(encPadding, [B, Se], 'encoderPaddingMask');
        this.checkMaskShape(encAttention, [B, T, Se], 'encoderAttentionMask');
        const crossMask = combineMasks(encPadding && tf.expandDims(encPadding, 1), encAttention);
        y = this.residual(
          y,
          this.crossAttentionNorm as layers.Layer,
          (h) => {
            const out = (this.crossAttention as CachedMultiHeadAttention).call([h, encoder], {
              attentionMask: crossMask ?? undefined,
              cache: crossCache ?? undefined,
              cacheUpdateIndex: kwargs.crossAttentionCacheUpdateIndex as number | undefined,
              training,
            });
            if (!Array.isArray(out)) return out;
            newCrossCache = out[1];
            return out[0];
          },
          training,
        );
      }
      const output = this.feedForward(y, training);
      const outputs = [output, newSelfCache, newCrossCache].filter(
        (t): t is tf.Tensor => t != null,
      );
      this.lastOutputCount = outputs.length;
      return outputs.length === 1 ? outputs[0] : outputs;
    });
  }

  override computeMask(
    inputs: tf.Tensor | tf.Tensor[],
    mask?: tf.Tensor | tf.Tensor[],
  ): tf.Tensor | tf.Tensor[] {
    return this.outputMasks(inputs, mask, 'decoderSequence');
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...this.blockConfig(), useCausalMask: this.useCausalMask};
  }
}
