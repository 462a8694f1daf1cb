/**
 * What the pre-norm rotary decoder blocks of keras-hub's Llama-like families share (Llama 3 and,
 * through it, Mistral and SmolLM3; Qwen 2.5 and Qwen 3): an RMS norm, a causal grouped-query
 * self-attention with rotary positions, an RMS norm and a gated feed-forward
 * `down(up(x) * silu(gate(x)))` without biases, with keras-hub's sublayer names; the masks
 * (`decoderPaddingMask [B, T]`, `decoderAttentionMask [B, T, S]`, causal) and the eager cached
 * call (`[output, cache]`). A family's block gives its attention and norm classes and its options
 * (constructor, contract, config); a block may narrow the causal mask (Mistral's window).
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {causalMask, combineMasks} from '../ops/masking';
import {reshapeTo} from '../ops/reshape';
import {denseRows} from '../layers/core/dense_rows';
import {formatShape, Shape} from '../layers/engine/shapes';
import {kerasMaskOf, TransformerBlock} from '../layers/hub/transformer_block';
import {Dense} from '../layers/core/dense';

/** The inputs of a gated rotary decoder block, by role. */
export const GATED_ROTARY_DECODER_ROLES = [
  'decoderSequence',
  'decoderPaddingMask',
  'decoderAttentionMask',
];

/** A sublayer called eagerly with keyword options (the attention: a tensor or `[output, cache]`). */
interface EagerSublayer extends layers.Layer {
  call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[];
}

/** The sublayers of one call in call order: what the compiled step's rules read. */
export interface GatedRotaryParts<A, N> {
  /** The self-attention's norm (`self_attention_layernorm`). */
  attentionNorm: N;
  /** The self-attention (`self_attention`). */
  attention: A;
  /** The feed-forward's norm (`feedforward_layernorm`). */
  ffNorm: layers.Layer;
  /** The gate projection (`feedforward_gate_dense`). */
  gate: layers.Layer;
  /** The up projection (`feedforward_intermediate_dense`). */
  up: layers.Layer;
  /** The down projection (`feedforward_output_dense`). */
  down: layers.Layer;
}

/**
 * The shared block: `A` its attention class, `N` its norm class. Subclasses set
 * `numQueryHeads`, `numKeyValueHeads` and `ropeMaxWavelength` in their constructors and give
 * {@link makeSelfAttention} and {@link makeNorm}.
 */
export abstract class GatedRotaryDecoder<
  A extends EagerSublayer,
  N extends EagerSublayer,
> extends TransformerBlock {
  protected readonly roleNames = GATED_ROTARY_DECODER_ROLES;
  protected readonly positionalRoles = 1;
  protected readonly tensorOptions = ['decoderPaddingMask', 'decoderAttentionMask'] as const;
  protected readonly otherOptions = [
    'selfAttentionCache',
    'selfAttentionCacheUpdateIndex',
  ] as const;

  /** The `numQueryHeads` option. */
  abstract readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  abstract readonly numKeyValueHeads: number;
  /** The `ropeMaxWavelength` option. */
  abstract readonly ropeMaxWavelength: number;
  /** The self-attention sublayer (`self_attention`), created at build. */
  selfAttention: A | null = null;
  /** The norm before the attention (`self_attention_layernorm`), created at build. */
  selfAttentionNorm: N | null = null;
  /** The feed-forward gate (`feedforward_gate_dense`), created at build. */
  gate: layers.Layer | null = null;

  /** The self-attention sublayer `self_attention` (each family its own class). */
  protected abstract makeSelfAttention(): A;

  /** An RMS norm sublayer named `name` (each family its own class). */
  protected abstract makeNorm(name: string): N;

  /** Checks the input width at build (keras-hub's: width >= numHeads; Qwen's blocks: none). */
  protected checkWidth(width: number | null): void {
    this.headSize(width);
  }

  /**
   * Which keys each of `T` queries (the first at position `start`) attends to among `S`:
   * `[T, S]` bool, causal (a family's block may narrow it: Mistral's sliding window).
   */
  protected selfAttentionMask(T: number, S: number, start: number): tf.Tensor {
    return causalMask(T, S, start);
  }

  override build(inputShape: Shape | Shape[]): void {
    const shapes = this.shapesByRole(inputShape);
    const shape = shapes.get('decoderSequence') as Shape;
    if (shape == null || shape.length !== 3) {
      throw new Error(
        `Layer '${this.name}' expected decoderSequence of shape [batch, length, hidden], ` +
          `received ${shape == null ? 'none' : formatShape(shape)}`,
      );
    }
    this.checkWidth(shape[2]);
    const width = shape[2] as number;
    this.selfAttention = this.addSublayer(this.makeSelfAttention(), shape);
    this.selfAttentionNorm = this.addSublayer(this.makeNorm('self_attention_layernorm'), shape);
    const dense = (name: string, units: number) =>
      new Dense({
        name,
        units,
        useBias: false,
        kernelInitializer: this.kernelInitializer,
        kernelRegularizer: this.kernelRegularizer ?? undefined,
      });
    const inner = [shape[0], shape[1], this.intermediateDim];
    this.feedforwardIntermediate = this.addSublayer(
      dense('feedforward_intermediate_dense', this.intermediateDim),
      shape,
    );
    this.gate = this.addSublayer(dense('feedforward_gate_dense', this.intermediateDim), shape);
    this.feedforwardOutput = this.addSublayer(dense('feedforward_output_dense', width), inner);
    this.feedforwardNorm = this.addSublayer(this.makeNorm('feedforward_layernorm'), shape);
    this.built = true;
  }

  /** The feed-forward up projection (`feedforward_intermediate_dense`). */
  get up(): layers.Layer | null {
    return this.feedforwardIntermediate;
  }

  /** The feed-forward down projection (`feedforward_output_dense`). */
  get down(): layers.Layer | null {
    return this.feedforwardOutput;
  }

  /** The norm before the feed-forward (`feedforward_layernorm`). */
  get feedForwardNorm(): layers.Layer | null {
    return this.feedforwardNorm;
  }

  /** The sublayers of one call in call order, or null before build. */
  get stepParts(): GatedRotaryParts<A, N> | null {
    const {selfAttentionNorm: attentionNorm, selfAttention: attention, gate} = this;
    const [ffNorm, up, down] = [
      this.feedforwardNorm,
      this.feedforwardIntermediate,
      this.feedforwardOutput,
    ];
    if (attentionNorm == null || attention == null || gate == null) return null;
    if (ffNorm == null || up == null || down == null) return null;
    return {attentionNorm, attention, ffNorm, gate, up, down};
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return this.shapesByRole(inputShape).get('decoderSequence') as Shape;
  }

  /** Eager calls return a tensor, or `[output, cache]` with `selfAttentionCache`. */
  override apply(
    inputs: tf.Tensor | tf.Tensor[],
    kwargs: Kwargs & {selfAttentionCache: tf.Tensor},
  ): [tf.Tensor, tf.Tensor];
  override apply(inputs: tf.Tensor | tf.Tensor[], kwargs?: Kwargs): tf.Tensor;
  override apply(inputs: SymbolicTensor | SymbolicTensor[], kwargs?: Kwargs): SymbolicTensor;
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

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    this.checkOptions(kwargs);
    return tf.tidy(() => {
      const list = Array.isArray(inputs) ? inputs : [inputs];
      const roles = this.rolesOf(list.length);
      const parts = new Map(roles.map((r, i) => [r, list[i]]));
      const option = (name: string) =>
        (kwargs[name] as tf.Tensor | undefined) ?? parts.get(name) ?? null;
      const x = parts.get('decoderSequence') as tf.Tensor;
      if (x.rank !== 3 || x.dtype !== 'float32') {
        throw new Error(
          `Layer '${this.name}' expected a float32 decoderSequence of shape [batch, length, ` +
            `hidden], received ${x.dtype} of shape ${formatShape(x.shape)}`,
        );
      }
      const cache = (kwargs.selfAttentionCache as tf.Tensor | undefined) ?? null;
      const index = (kwargs.selfAttentionCacheUpdateIndex as number | undefined) ?? null;
      if (cache == null && index != null) {
        throw new Error(
          `Layer '${this.name}': selfAttentionCacheUpdateIndex was given without a selfAttentionCache`,
        );
      }
      const [B, T] = x.shape;
      const training = kwargs.training === true;
      const padding =
        option('decoderPaddingMask') ??
        kerasMaskOf(x, kwargs.mask, roles.indexOf('decoderSequence'));
      const attentionMask = option('decoderAttentionMask');
      this.checkMaskShape(padding, [B, T], 'decoderPaddingMask');
      const S = cache == null ? T : (cache.shape[2] as number);
      this.checkMaskShape(attentionMask, [B, T, S], 'decoderAttentionMask');
      const mask = combineMasks(
        padding && tf.expandDims(padding, 1),
        attentionMask,
        tf.expandDims(this.selfAttentionMask(T, S, index ?? 0), 0),
      ) as tf.Tensor;
      const attended = (this.selfAttention as A).call(
        (this.selfAttentionNorm as N).call(x, {}) as tf.Tensor,
        {
          attentionMask: mask,
          cache: cache ?? undefined,
          cacheUpdateIndex: index ?? undefined,
          training,
        },
      );
      const [a, newCache] = Array.isArray(attended) ? attended : [attended, null];
      const h = tf.add(x, this.drop(a, training));
      const normed = (this.feedforwardNorm as layers.Layer).call(h, {}) as tf.Tensor;
      const width = normed.shape[2] as number;
      const rows = reshapeTo(normed, [-1, width]);
      const g = denseRows(this.gate as layers.Layer, rows);
      const up = denseRows(this.feedforwardIntermediate as layers.Layer, rows);
      const down = denseRows(
        this.feedforwardOutput as layers.Layer,
        tf.mul(up, tf.mul(g, tf.sigmoid(g))),
      );
      const output = tf.add(h, this.drop(reshapeTo(down, [B, T, width]), training));
      this.lastOutputCount = newCache == null ? 1 : 2;
      return newCache == null ? output : [output, newCache];
    });
  }

  override computeMask(
    inputs: tf.Tensor | tf.Tensor[],
    mask?: tf.Tensor | tf.Tensor[],
  ): tf.Tensor | tf.Tensor[] {
    return this.outputMasks(inputs, mask, 'decoderSequence');
  }

  /** The block's config without TransformerBlock's options it fixes, and the heads and rope base. */
  protected rotaryBlockConfig(): tf.serialization.ConfigDict {
    const {numHeads, normalizeFirst, biasInitializer, biasRegularizer, ...rest} =
      this.blockConfig();
    void [numHeads, normalizeFirst, biasInitializer, biasRegularizer];
    return {
      ...rest,
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      ropeMaxWavelength: this.ropeMaxWavelength,
    };
  }
}
