/** keras-hub's `SmolLM3DecoderLayer`: Llama's pre-norm block under SmolLM3's names. */
import * as tf from '@tensorflow/tfjs-core';

import {configNumber, defineContract, LayerContract} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {refuseUnknownOptions} from '../../layers/hub/layer_options';
import type {LlamaAttention} from '../llama3/llama_attention';
import {LlamaTransformerDecoder} from '../llama3/llama_decoder';
import type {LlamaLayerNorm} from '../llama3/llama_layer_norm';
import {RMSNormalization} from './rms_normalization';
import {SmolLM3Attention} from './smollm3_attention';
import {SMOLLM3_ATTENTION_KEYS, SmolLM3AttentionOptions, smolLM3Options} from './smollm3_options';

/** Options of {@link SmolLM3DecoderLayer} (keras-hub's arguments, camelCase). */
export interface SmolLM3DecoderLayerArgs extends SmolLM3AttentionOptions {
  /** The feed-forward's inner width. */
  intermediateSize: number;
  /** Biases on the feed-forward's projections: only false is implemented. Default false. */
  mlpBias?: boolean;
  /** The RMS norms' epsilon. Default 1e-6. */
  layerNormEpsilon?: number;
  /** Layer name. */
  name?: string;
  /** Trainable. */
  trainable?: boolean;
}

const OWN = [...SMOLLM3_ATTENTION_KEYS, 'intermediateSize', 'mlpBias', 'layerNormEpsilon'];

/**
 * keras-hub's `SmolLM3DecoderLayer` (keras_hub/src/models/smollm3/smollm3_layers.py):
 * `h = x + self_attn(input_layernorm(x))`, then `h + mlp(post_attention_layernorm(h))` with the
 * gated SiLU feed-forward `down_proj(silu(gate_proj(y)) * up_proj(y))` (no biases), causal and
 * keys masked by `decoderPaddingMask`: {@link LlamaTransformerDecoder}'s computation with
 * {@link SmolLM3Attention} (rotary or not, by `ropeLayerEnabledList[layerIdx]`) and Keras'
 * {@link RMSNormalization}, its weights under keras-hub's names (`self_attn`, `input_layernorm`,
 * `post_attention_layernorm`, `mlp/gate_proj`, `mlp/up_proj`, `mlp/down_proj`).
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {SmolLM3DecoderLayer} from 'tfjs-attention';
 *
 * const decoder = new SmolLM3DecoderLayer({
 *   hiddenSize: 16, numAttentionHeads: 4, numKeyValueHeads: 2, intermediateSize: 32,
 *   ropeLayerEnabledList: [true], layerTypes: ['full_attention'], layerIdx: 0,
 * });
 * const y = decoder.apply(tf.randomNormal([1, 6, 16])); // [1, 6, 16]
 * ```
 */
export class SmolLM3DecoderLayer extends LlamaTransformerDecoder {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'SmolLM3DecoderLayer';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    ...LlamaTransformerDecoder.contract,
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.smollm3.smollm3_layers',
        registeredName: 'SmolLM3DecoderLayer',
        keys: [
          'hidden_size',
          'num_attention_heads',
          'num_key_value_heads',
          'attention_bias',
          'attention_dropout',
          'rope_layer_enabled_list',
          'layer_types',
          'layer_idx',
          'intermediate_size',
          'mlp_bias',
          'layer_norm_epsilon',
          'max_position_embeddings',
          'rope_theta',
          'partial_rotary_factor',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: LlamaTransformerDecoder.contract.keras.call,
    },
    configKeys: [...OWN, 'inputRoles'],
    weights: {
      ...LlamaTransformerDecoder.contract.weights,
      keras3Folders: {
        self_attention: 'self_attn',
        self_attention_layernorm: 'input_layernorm',
        feedforward_layernorm: 'post_attention_layernorm',
        feedforward_gate_dense: 'mlp/gate_proj',
        feedforward_intermediate_dense: 'mlp/up_proj',
        feedforward_output_dense: 'mlp/down_proj',
      },
      implied: (c) => ({
        values: 3 * configNumber(c, 'intermediateSize'),
        option: 'intermediateSize',
      }),
    },
    decoding: {
      ...LlamaTransformerDecoder.contract.decoding,
      cacheShape: (config, input, batch, maxLength) => {
        const q = config.numAttentionHeads as number;
        const kv = config.numKeyValueHeads as number;
        return [batch, 2, maxLength, kv, Math.floor((input[input.length - 1] as number) / q)];
      },
    } as LayerContract['decoding'],
  });

  /** The attention options (keras-hub's defaults filled in). */
  readonly options: Required<SmolLM3AttentionOptions>;
  /** The `intermediateSize` option. */
  readonly intermediateSize: number;
  /** The `mlpBias` option (false). */
  readonly mlpBias: boolean;

  constructor(args: SmolLM3DecoderLayerArgs) {
    const cls = 'SmolLM3DecoderLayer';
    const options = smolLM3Options(args, cls);
    if ((args.mlpBias ?? false) !== false) {
      throw new Error(
        `${cls}: mlpBias=${JSON.stringify(args.mlpBias)} is not implemented (expected false, ` +
          `every SmolLM3 preset's)`,
      );
    }
    const rest = Object.fromEntries(
      Object.entries(args).filter(([k]) => !(OWN as string[]).includes(k)),
    );
    refuseUnknownOptions(rest, ['inputRoles'], cls); // tfjs' layer options pass through
    super({
      ...rest,
      intermediateDim: args.intermediateSize,
      numQueryHeads: options.numAttentionHeads,
      numKeyValueHeads: options.numKeyValueHeads,
      ropeMaxWavelength: options.ropeTheta,
      layerNormEpsilon: args.layerNormEpsilon ?? 1e-6,
      activation: 'silu',
    });
    this.options = options;
    this.intermediateSize = args.intermediateSize;
    this.mlpBias = false;
  }

  protected override makeSelfAttention(): LlamaAttention {
    return new SmolLM3Attention({name: 'self_attention', ...this.options});
  }

  protected override makeNorm(name: string): LlamaLayerNorm {
    return new RMSNormalization({name, epsilon: this.layerNormEpsilon});
  }

  override getConfig(): tf.serialization.ConfigDict {
    const base = super.getConfig();
    return {
      name: base.name,
      trainable: base.trainable,
      inputRoles: base.inputRoles,
      ...(base.quantizationMode != null ? {quantizationMode: base.quantizationMode} : {}),
      ...(this.options as unknown as tf.serialization.ConfigDict),
      intermediateSize: this.intermediateSize,
      mlpBias: this.mlpBias,
      layerNormEpsilon: this.layerNormEpsilon,
    };
  }
}
