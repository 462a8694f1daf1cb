import * as tf from '@tensorflow/tfjs-core';

import {
  CachedDecoding,
  configNumber,
  defineContract,
  LayerContract,
} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';
import {GATED_ROTARY_DECODER_ROLES, GatedRotaryDecoder} from '../gated_rotary_decoder';
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
/** The inputs of a Qwen decoder block, by role. */
export const QWEN_DECODER_ROLES = GATED_ROTARY_DECODER_ROLES;

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
export class QwenTransformerDecoder extends GatedRotaryDecoder<QwenAttention, QwenLayerNorm> {
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
  protected makeSelfAttention(): QwenAttention {
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

  /** No width check: Qwen 3's `head_dim` need not be the width / the heads. */
  protected override checkWidth(): void {}

  /** The options every Qwen decoder block writes (Qwen 3 adds its own). */
  protected qwenBlockConfig(): tf.serialization.ConfigDict {
    return {...this.rotaryBlockConfig(), ropeScalingFactor: this.ropeScalingFactor};
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...this.qwenBlockConfig(),
      useSlidingWindowAttention: this.useSlidingWindowAttention,
      slidingWindowSize: this.slidingWindowSize,
    };
  }
}
