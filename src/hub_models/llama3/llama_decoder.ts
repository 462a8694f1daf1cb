import * as tf from '@tensorflow/tfjs-core';

import {configNumber, defineContract, LayerContract} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';
import {LlamaLayerNorm} from './llama_layer_norm';
import {GATED_ROTARY_DECODER_ROLES, GatedRotaryDecoder} from '../gated_rotary_decoder';
import type {TransformerBlockArgs} from '../../layers/hub/transformer_block_args';
import {checkHeads, LlamaAttention} from './llama_attention';
import {
  LLAMA31_ROPE,
  LlamaRopeSmoothing,
  refuseLlamaRope,
  refuseRopeConfig,
  ropeSmoothing,
} from './llama_rope';

/** Options of {@link LlamaTransformerDecoder} (keras-hub's arguments, camelCase). */
export interface LlamaTransformerDecoderArgs extends Omit<
  TransformerBlockArgs,
  'numHeads' | 'normalizeFirst'
> {
  /** Query heads; the head size is the input width / numQueryHeads. */
  numQueryHeads: number;
  /** Key / value heads (numQueryHeads a multiple of it). */
  numKeyValueHeads: number;
  /** The rotary embedding's longest wavelength. Default 10000. */
  ropeMaxWavelength?: number;
  /** keras-hub 0.32 ignores it (LlamaRotaryEmbedding drops it); only 1 or null is accepted. */
  ropePositionScalingFactor?: number | null;
  /** Llama 3.1's rope smoothing: long wavelengths' frequencies are divided by it. */
  ropeFrequencyAdjustmentFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropeLowFreqFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropeHighFreqFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropePretrainingSequenceLength?: number | null;
}

/** The decoder's inputs, in its call's argument order (camelCase). */

const LLAMA_OWN = [
  'numQueryHeads',
  'numKeyValueHeads',
  'ropeMaxWavelength',
  'ropePositionScalingFactor',
  ...LLAMA31_ROPE,
];

/**
 * keras-hub's `LlamaTransformerDecoder` (keras_hub/src/models/llama/llama_decoder.py): pre-norm
 * blocks with RMS norms ({@link LlamaLayerNorm}), causal grouped-query self-attention with
 * rotary embeddings ({@link LlamaAttention}), and a gated feed-forward
 * `down(up(x) * silu(gate(x)))` without biases; keys masked by `decoderPaddingMask [B, T]`.
 * Cached decoding (eager): `apply(x, {selfAttentionCache, selfAttentionCacheUpdateIndex})`
 * returns `[output, cache]`, the cache `[B, 2, maxLength, numKeyValueHeads, headDim]`.
 * Sublayers (keras-hub's names): `self_attention`, `self_attention_layernorm`,
 * `feedforward_intermediate_dense`, `feedforward_gate_dense`, `feedforward_output_dense`,
 * `feedforward_layernorm`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {LlamaTransformerDecoder} from 'tfjs-attention';
 *
 * const decoder = new LlamaTransformerDecoder({
 *   intermediateDim: 32,
 *   numQueryHeads: 4,
 *   numKeyValueHeads: 2,
 * });
 * const y = decoder.apply(tf.randomNormal([1, 6, 16])); // [1, 6, 16]
 * ```
 */
export class LlamaTransformerDecoder extends GatedRotaryDecoder<LlamaAttention, LlamaLayerNorm> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className: string = 'LlamaTransformerDecoder';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.llama.llama_decoder',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'LlamaTransformerDecoder',
        keys: [
          'intermediate_dim',
          'num_query_heads',
          'num_key_value_heads',
          'rope_max_wavelength',
          'rope_position_scaling_factor',
          'rope_frequency_adjustment_factor',
          'rope_low_freq_factor',
          'rope_high_freq_factor',
          'rope_pretraining_sequence_length',
          'activation',
          'layer_norm_epsilon',
          'kernel_initializer',
          'dropout',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {
        kind: 'keyword',
        roles: GATED_ROTARY_DECODER_ROLES,
        positional: 1,
        options: {training: null},
      },
      refuseConfig: (c) => refuseRopeConfig(c),
    },
    configKeys: [
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
      ...LLAMA31_ROPE,
    ],
    weights: {
      keras3Folders: {self_attention: '_self_attention_layer'},
      // the three feed-forward kernels have intermediate_dim columns or rows, at least
      implied: (c) => ({
        values: 3 * configNumber(c, 'intermediateDim'),
        option: 'intermediateDim',
      }),
    },
    decoding: {
      kind: 'cached',
      refuse: (_config, node) =>
        node.inputTensors.length > 2 || node.inputTensors[1]?.dtype === 'float32'
          ? `it is called on ${node.inputTensors.length} inputs (masks beyond a padding mask)`
          : null,
      cacheShape: (config, input, batch, maxLength) => {
        const q = config.numQueryHeads as number;
        const kv = config.numKeyValueHeads as number;
        return [batch, 2, maxLength, kv, Math.floor((input[input.length - 1] as number) / q)];
      },
      cacheKwargs: (cache, index, keyMask) => ({
        selfAttentionCache: cache,
        selfAttentionCacheUpdateIndex: index,
        ...(keyMask != null ? {decoderAttentionMask: keyMask} : {}),
      }),
      readsKerasMasks: true,
      masksQueries: false,
      paddingMaskRole: 'decoderPaddingMask',
    },
  });

  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The `ropeMaxWavelength` option. */
  readonly ropeMaxWavelength: number;
  /** Llama 3.1's rope smoothing options (all null when unset). */
  readonly rope: Required<LlamaRopeSmoothing>;

  constructor(args: LlamaTransformerDecoderArgs) {
    const cls = 'LlamaTransformerDecoder';
    if (args == null) throw new Error(`${cls}: expected {intermediateDim, numQueryHeads, ...}`);
    for (const key of LLAMA_OWN) {
      const why = refuseLlamaRope(key, (args as unknown as Record<string, unknown>)[key]);
      if (why != null) {
        throw new Error(
          `${cls}: ${key}=${JSON.stringify((args as unknown as Record<string, unknown>)[key])} ` +
            `is not accepted: ${why}`,
        );
      }
    }
    refuseUnknownOptions(
      {...args, numHeads: undefined, normalizeFirst: undefined},
      [
        ...LLAMA_OWN,
        'intermediateDim',
        'dropout',
        'activation',
        'layerNormEpsilon',
        'kernelInitializer',
        'kernelRegularizer',
        'seed',
        'inputRoles',
        'numHeads',
        'normalizeFirst',
      ],
      cls,
    );
    const {
      numQueryHeads,
      numKeyValueHeads,
      ropeMaxWavelength,
      ropePositionScalingFactor,
      ropeFrequencyAdjustmentFactor,
      ropeLowFreqFactor,
      ropeHighFreqFactor,
      ropePretrainingSequenceLength,
      ...block
    } = args;
    void ropePositionScalingFactor;
    const rope = ropeSmoothing(
      {
        ropeFrequencyAdjustmentFactor,
        ropeLowFreqFactor,
        ropeHighFreqFactor,
        ropePretrainingSequenceLength,
      },
      cls,
    );
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
    this.rope = rope;
  }

  /** The self-attention sublayer `self_attention` (a family's decoder gives its own class). */
  protected makeSelfAttention(): LlamaAttention {
    return new LlamaAttention({
      name: 'self_attention',
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      ropeMaxWavelength: this.ropeMaxWavelength,
      ...this.rope,
      dropout: this.dropout,
      kernelInitializer: this.kernelInitializer,
    });
  }

  /** An RMS norm sublayer named `name` (a family's decoder gives its own class). */
  protected makeNorm(name: string): LlamaLayerNorm {
    return new LlamaLayerNorm({name, epsilon: this.layerNormEpsilon});
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...this.rotaryBlockConfig(), ...this.rope};
  }
}
