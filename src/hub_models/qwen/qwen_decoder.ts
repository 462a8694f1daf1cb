import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {causalMask, combineMasks} from '../../ops/masking';
import {reshapeTo} from '../../ops/reshape';
import {
  CachedDecoding,
  configNumber,
  defineContract,
  LayerContract,
} from '../../layers/engine/contract';
import {formatShape, Shape} from '../../layers/engine/shapes';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';
import {kerasMaskOf, TransformerBlock} from '../../layers/hub/transformer_block';
import type {TransformerBlockArgs} from '../../layers/hub/transformer_block_args';
import {checkHeads} from '../llama3/llama_attention';
import {QwenAttention, windowSize} from './qwen_attention';
import {QwenLayerNorm} from './qwen_layer_norm';

/** Options of {@link QwenTransformerDecoder} (keras-hub's arguments, camelCase). */
export interface QwenTransformerDecoderArgs extends Omit<
  TransformerBlockArgs,
  'numHeads' | 'normalizeFirst'
> {
  /** Query heads; the head size is the input width / numQueryHeads. */
  numQueryHeads: number;
  /** Key / value heads (numQueryHeads a multiple of it). */
  numKeyValueHeads: number;
  /** The rotary embedding's longest wavelength. Default 10000. */
  ropeMaxWavelength?: number;
  /** Positions are divided by it in the rotary embedding. Default 1. */
  ropeScalingFactor?: number;
  /** Attend only to the last `slidingWindowSize` positions. Default false. */
  useSlidingWindowAttention?: boolean;
  /** The sliding window's width. Default 4096. */
  slidingWindowSize?: number;
}

/** The decoder's inputs, in its call's argument order (camelCase). */
export const QWEN_DECODER_ROLES = ['decoderSequence', 'decoderPaddingMask', 'decoderAttentionMask'];

/** The options every rotary decoder block of the Qwen families accepts. */
export const QWEN_BLOCK_OPTIONS = [
  'intermediateDim',
  'dropout',
  'activation',
  'layerNormEpsilon',
  'kernelInitializer',
  'kernelRegularizer',
  'seed',
  'inputRoles',
  'numQueryHeads',
  'numKeyValueHeads',
  'ropeMaxWavelength',
  'ropeScalingFactor',
] as const;

const QWEN_OWN = ['useSlidingWindowAttention', 'slidingWindowSize'] as const;

/** The cached decoding of the Qwen families' decoder blocks (`headDim` read by `headDimOf`). */
export function qwenDecoding(
  headDimOf: (config: Record<string, unknown>, width: number) => number,
): CachedDecoding {
  return {
    kind: 'cached',
    refuse: (_config, node) =>
      node.inputTensors.length > 2 || node.inputTensors[1]?.dtype === 'float32'
        ? `it is called on ${node.inputTensors.length} inputs (masks beyond a padding mask)`
        : null,
    cacheShape: (config, input, batch, maxLength) => [
      batch,
      2,
      maxLength,
      config.numKeyValueHeads as number,
      headDimOf(config, input[input.length - 1] as number),
    ],
    cacheKwargs: (cache, index, keyMask) => ({
      selfAttentionCache: cache,
      selfAttentionCacheUpdateIndex: index,
      ...(keyMask != null ? {decoderAttentionMask: keyMask} : {}),
    }),
    readsKerasMasks: true,
    masksQueries: false,
    paddingMaskRole: 'decoderPaddingMask',
  };
}

/**
 * keras-hub's `QwenTransformerDecoder` (keras_hub/src/models/qwen/qwen_decoder.py): pre-norm
 * blocks with RMS norms ({@link QwenLayerNorm}), causal grouped-query self-attention with rotary
 * embeddings and query / key / value biases ({@link QwenAttention}, an optional sliding window),
 * and a gated feed-forward `down(up(x) * silu(gate(x)))` without biases; keys masked by
 * `decoderPaddingMask [B, T]`. Cached decoding (eager): `apply(x, {selfAttentionCache,
 * selfAttentionCacheUpdateIndex})` returns `[output, cache]`, the cache
 * `[B, 2, maxLength, numKeyValueHeads, headDim]`. Sublayers (keras-hub's names):
 * `self_attention`, `self_attention_layernorm`, `feedforward_intermediate_dense`,
 * `feedforward_gate_dense`, `feedforward_output_dense`, `feedforward_layernorm`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {QwenTransformerDecoder} from 'tfjs-attention';
 *
 * const decoder = new QwenTransformerDecoder({
 *   intermediateDim: 32,
 *   numQueryHeads: 4,
 *   numKeyValueHeads: 2,
 * });
 * const y = decoder.apply(tf.randomNormal([1, 6, 16])); // [1, 6, 16]
 * ```
 */
export class QwenTransformerDecoder extends TransformerBlock {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className: string = 'QwenTransformerDecoder';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.qwen.qwen_decoder',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'QwenTransformerDecoder',
        keys: [
          'intermediate_dim',
          'num_query_heads',
          'num_key_value_heads',
          'rope_max_wavelength',
          'rope_scaling_factor',
          'activation',
          'layer_norm_epsilon',
          'kernel_initializer',
          'dropout',
          'use_sliding_window_attention',
          'sliding_window_size',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'keyword', roles: QWEN_DECODER_ROLES, positional: 1, options: {training: null}},
    },
    configKeys: [...QWEN_BLOCK_OPTIONS, ...QWEN_OWN],
    weights: {
      keras3Folders: {self_attention: '_self_attention_layer'},
      // the three feed-forward kernels have intermediate_dim columns or rows, at least
      implied: (c) => ({
        values: 3 * configNumber(c, 'intermediateDim'),
        option: 'intermediateDim',
      }),
    },
    decoding: qwenDecoding(
      (config, width) => Math.floor(width / (config.numQueryHeads as number)) as number,
    ),
  });

  protected readonly roleNames = QWEN_DECODER_ROLES;
  protected readonly positionalRoles = 1;
  protected readonly tensorOptions = ['decoderPaddingMask', 'decoderAttentionMask'] as const;
  protected readonly otherOptions = [
    'selfAttentionCache',
    'selfAttentionCacheUpdateIndex',
  ] as const;

  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The `ropeMaxWavelength` option. */
  readonly ropeMaxWavelength: number;
  /** The `ropeScalingFactor` option. */
  readonly ropeScalingFactor: number;
  /** The `useSlidingWindowAttention` option. */
  readonly useSlidingWindowAttention: boolean;
  /** The `slidingWindowSize` option. */
  readonly slidingWindowSize: number;
  /** The self-attention sublayer (`self_attention`), created at build. */
  selfAttention: QwenAttention | null = null;
  /** The norm before the attention (`self_attention_layernorm`), created at build. */
  selfAttentionNorm: QwenLayerNorm | null = null;
  /** The feed-forward gate (`feedforward_gate_dense`), created at build. */
  gate: layers.Layer | null = null;

  constructor(
    args: QwenTransformerDecoderArgs,
    cls = 'QwenTransformerDecoder',
    own: readonly string[] = QWEN_OWN,
  ) {
    if (args == null) throw new Error(`${cls}: expected {intermediateDim, numQueryHeads, ...}`);
    refuseUnknownOptions(
      {...args, numHeads: undefined, normalizeFirst: undefined},
      [...QWEN_BLOCK_OPTIONS, ...own, 'numHeads', 'normalizeFirst'],
      cls,
    );
    const {
      numQueryHeads,
      numKeyValueHeads,
      ropeMaxWavelength,
      ropeScalingFactor,
      useSlidingWindowAttention,
      slidingWindowSize,
      ...block
    } = args;
    for (const k of own.filter((o) => !(QWEN_OWN as readonly string[]).includes(o))) {
      delete (block as Record<string, unknown>)[k];
    }
    checkHeads(cls, numQueryHeads, numKeyValueHeads);
    super({
      activation: 'silu',
      layerNormEpsilon: 1e-5,
      ...block,
      numHeads: numQueryHeads,
      normalizeFirst: true,
    });
    this.numQueryHeads = numQueryHeads;
    this.numKeyValueHeads = numKeyValueHeads;
    this.ropeMaxWavelength = positiveNumber(ropeMaxWavelength, 'ropeMaxWavelength', cls, 1e4);
    this.ropeScalingFactor = positiveNumber(ropeScalingFactor, 'ropeScalingFactor', cls, 1);
    const use = useSlidingWindowAttention ?? false;
    if (typeof use !== 'boolean') {
      throw new Error(
        `${cls}: expected useSlidingWindowAttention to be true or false, received ${JSON.stringify(use)}`,
      );
    }
    this.useSlidingWindowAttention = use;
    this.slidingWindowSize = windowSize(slidingWindowSize, 'slidingWindowSize', cls, 4096);
  }

  /** The self-attention sublayer this block builds (Qwen 3: its own class). */
  protected makeAttention(): QwenAttention {
    return new QwenAttention({
      name: 'self_attention',
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      ropeMaxWavelength: this.ropeMaxWavelength,
      ropeScalingFactor: this.ropeScalingFactor,
      dropout: this.dropout,
      kernelInitializer: this.kernelInitializer,
      useSlidingWindowAttention: this.useSlidingWindowAttention,
      slidingWindowSize: this.slidingWindowSize,
    });
  }

  /** A norm sublayer of this block (Qwen 3: its own class). */
  protected makeNorm(name: string): QwenLayerNorm {
    return new QwenLayerNorm({name, epsilon: this.layerNormEpsilon});
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
    const width = shape[2] as number;
    this.selfAttention = this.addSublayer(this.makeAttention(), shape);
    this.selfAttentionNorm = this.addSublayer(this.makeNorm('self_attention_layernorm'), shape);
    const dense = (name: string, units: number) =>
      layers.dense({
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
        tf.expandDims(causalMask(T, S, index ?? 0), 0),
      ) as tf.Tensor;
      const attended = (this.selfAttention as QwenAttention).call(
        (this.selfAttentionNorm as QwenLayerNorm).call(x, {}),
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
      const g = (this.gate as layers.Layer).call(rows, {}) as tf.Tensor;
      const up = (this.feedforwardIntermediate as layers.Layer).call(rows, {}) as tf.Tensor;
      const down = (this.feedforwardOutput as layers.Layer).call(
        tf.mul(up, tf.mul(g, tf.sigmoid(g))),
        {},
      ) as tf.Tensor;
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

  /** The options every Qwen decoder block writes (Qwen 3 adds its own). */
  protected qwenBlockConfig(): tf.serialization.ConfigDict {
    const {numHeads, normalizeFirst, biasInitializer, biasRegularizer, ...rest} =
      this.blockConfig();
    void [numHeads, normalizeFirst, biasInitializer, biasRegularizer];
    return {
      ...rest,
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      ropeMaxWavelength: this.ropeMaxWavelength,
      ropeScalingFactor: this.ropeScalingFactor,
    };
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...this.qwenBlockConfig(),
      useSlidingWindowAttention: this.useSlidingWindowAttention,
      slidingWindowSize: this.slidingWindowSize,
    };
  }
}
