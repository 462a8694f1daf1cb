import * as tf from '@tensorflow/tfjs-core';

import {configNumber, defineContract, LayerContract} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {windowSize} from '../qwen/qwen_attention';
import {
  QWEN_BLOCK_OPTIONS,
  QWEN_DECODER_ROLES,
  qwenDecoding,
  QwenTransformerDecoder,
  QwenTransformerDecoderArgs,
} from '../qwen/qwen_decoder';
import {Qwen3Attention} from './qwen3_attention';
import {Qwen3LayerNorm} from './qwen3_layer_norm';

/** Options of {@link Qwen3TransformerDecoder} (keras-hub's arguments, camelCase). */
export interface Qwen3TransformerDecoderArgs extends Omit<
  QwenTransformerDecoderArgs,
  'useSlidingWindowAttention' | 'slidingWindowSize'
> {
  /** The size of each head (null: the input width / numQueryHeads). */
  headDim?: number | null;
  /** A sliding window's width, or null: none. Default null. */
  slidingWindowSize?: number | null;
}

/**
 * keras-hub's `Qwen3TransformerDecoder` (keras_hub/src/models/qwen3/qwen3_decoder.py): Qwen's
 * decoder block ({@link QwenTransformerDecoder}: pre-norm RMS norms, causal grouped-query rotary
 * attention, gated SiLU feed-forward) with Qwen 3's attention ({@link Qwen3Attention}: no biases,
 * per-head query / key norms, `headDim`, a sliding window whenever `slidingWindowSize` is set) and
 * {@link Qwen3LayerNorm}s (the attention's query / key norms with epsilon 1e-5, Qwen3Attention's
 * default: keras-hub 0.32's decoder does not pass its `layerNormEpsilon` on). Cached decoding as Qwen's, the cache
 * `[B, 2, maxLength, numKeyValueHeads, headDim]`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Qwen3TransformerDecoder} from 'tfjs-attention';
 *
 * const decoder = new Qwen3TransformerDecoder({
 *   intermediateDim: 32,
 *   numQueryHeads: 4,
 *   numKeyValueHeads: 2,
 *   headDim: 8,
 * });
 * const y = decoder.apply(tf.randomNormal([1, 6, 24])); // [1, 6, 24]
 * ```
 */
export class Qwen3TransformerDecoder extends QwenTransformerDecoder {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'Qwen3TransformerDecoder';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.qwen3.qwen3_decoder',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'Qwen3TransformerDecoder',
        keys: [
          'intermediate_dim',
          'num_query_heads',
          'num_key_value_heads',
          'head_dim',
          'rope_max_wavelength',
          'rope_scaling_factor',
          'activation',
          'layer_norm_epsilon',
          'kernel_initializer',
          'dropout',
          'sliding_window_size',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'keyword', roles: QWEN_DECODER_ROLES, positional: 1, options: {training: null}},
    },
    configKeys: [...QWEN_BLOCK_OPTIONS, 'headDim', 'slidingWindowSize'],
    weights: {
      keras3Folders: {self_attention: '_self_attention_layer'},
      implied: (c) => ({
        values: 3 * configNumber(c, 'intermediateDim'),
        option: 'intermediateDim',
      }),
    },
    decoding: qwenDecoding(
      (config, width) =>
        (config.headDim as number | null) ?? Math.floor(width / (config.numQueryHeads as number)),
    ),
  });

  /** The `headDim` option (null: the input width / numQueryHeads). */
  readonly headDim: number | null;

  constructor(args: Qwen3TransformerDecoderArgs) {
    const cls = 'Qwen3TransformerDecoder';
    if (args == null) throw new Error(`${cls}: expected {intermediateDim, numQueryHeads, ...}`);
    const window =
      args.slidingWindowSize == null || args.slidingWindowSize === 0
        ? null
        : windowSize(args.slidingWindowSize, 'slidingWindowSize', cls, 1);
    super(
      {
        ...args,
        useSlidingWindowAttention: window != null,
        slidingWindowSize: window ?? undefined,
      } as QwenTransformerDecoderArgs,
      cls,
      ['headDim', 'slidingWindowSize', 'useSlidingWindowAttention'],
    );
    this.headDim = args.headDim == null ? null : windowSize(args.headDim, 'headDim', cls, 1);
  }

  protected override makeSelfAttention(): Qwen3Attention {
    return new Qwen3Attention({
      name: 'self_attention',
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      headDim: this.headDim,
      ropeMaxWavelength: this.ropeMaxWavelength,
      ropeScalingFactor: this.ropeScalingFactor,
      dropout: this.dropout,
      kernelInitializer: this.kernelInitializer,
      // keras-hub 0.32's decoder does not pass its layer_norm_epsilon to the attention, whose
      // query / key norms keep Qwen3Attention's default
      layerNormEpsilon: 1e-5,
      slidingWindowSize: this.useSlidingWindowAttention ? this.slidingWindowSize : null,
    });
  }

  protected override makeNorm(name: string): Qwen3LayerNorm {
    return new Qwen3LayerNorm({name, epsilon: this.layerNormEpsilon});
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...this.qwenBlockConfig(),
      headDim: this.headDim,
      slidingWindowSize: this.useSlidingWindowAttention ? this.slidingWindowSize : null,
    };
  }
}
