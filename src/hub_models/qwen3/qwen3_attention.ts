/**
 * keras-hub's `Qwen3Attention`: Qwen's grouped-query rotary attention without biases, each head of
 * its queries and keys RMS-normalised before the rotation, a head size of its own.
 */
import * as tf from '@tensorflow/tfjs-core';

import {InitializerIdentifier} from '../../layers/engine/config_objects';
import {configNumber, defineContract, LayerContract} from '../../layers/engine/contract';
import {Shape} from '../../layers/engine/shapes';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {positiveNumber} from '../../layers/hub/layer_options';
import {QwenAttention, windowSize} from '../qwen/qwen_attention';
import {Qwen3LayerNorm} from './qwen3_layer_norm';

/** Options of {@link Qwen3Attention} (keras-hub's arguments, camelCase). */
export interface Qwen3AttentionArgs {
  /** Layer name. */
  name?: string;
  /** Query heads. */
  numQueryHeads: number;
  /** Key / value heads (numQueryHeads a multiple of it). */
  numKeyValueHeads: number;
  /** The size of each head (null: the input width / numQueryHeads). */
  headDim?: number | null;
  /** The rotary embedding's longest wavelength. Default 10000. */
  ropeMaxWavelength?: number;
  /** Positions are divided by it in the rotary embedding (linear scaling). Default 1. */
  ropeScalingFactor?: number;
  /** Dropout of the attention output while training. Default 0. */
  dropout?: number;
  /** Initializer of the kernels. Default glorotUniform. */
  kernelInitializer?: InitializerIdentifier;
  /** The query / key norms' epsilon. Default 1e-5. */
  layerNormEpsilon?: number;
  /** A sliding window's width (keys at distance < it), or null: none. Default null. */
  slidingWindowSize?: number | null;
  /** Trainable. */
  trainable?: boolean;
}

/**
 * keras-hub's `Qwen3Attention` (keras_hub/src/models/qwen3/qwen3_attention.py): as
 * {@link QwenAttention} without biases, with `headDim` (Qwen 3's heads need not split the width
 * evenly: `query [width, heads, headDim]`), a {@link Qwen3LayerNorm} on each head of the projected
 * queries (`query_dense_layernorm`) and keys (`key_dense_layernorm`) before the rotation, and a
 * sliding window whenever `slidingWindowSize` is set (keras-hub's TensorFlow path).
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Qwen3Attention} from 'tfjs-attention';
 *
 * const attention = new Qwen3Attention({numQueryHeads: 4, numKeyValueHeads: 2, headDim: 8});
 * const y = attention.apply(tf.randomNormal([1, 5, 24])); // [1, 5, 24]
 * ```
 */
export class Qwen3Attention extends QwenAttention {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'Qwen3Attention';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.qwen3.qwen3_attention',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'Qwen3Attention',
        keys: [
          'num_query_heads',
          'num_key_value_heads',
          'head_dim',
          'rope_max_wavelength',
          'rope_scaling_factor',
          'kernel_initializer',
          'dropout',
          'layer_norm_epsilon',
          'sliding_window_size',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
    configKeys: [
      'numQueryHeads',
      'numKeyValueHeads',
      'headDim',
      'ropeMaxWavelength',
      'ropeScalingFactor',
      'dropout',
      'kernelInitializer',
      'layerNormEpsilon',
      'slidingWindowSize',
    ],
    weights: {
      // Keras' folders of each sublayer (its norms' `scale` too, which a `sublayers` list of
      // projections would not number)
      keras3Folders: {
        query: '_query_dense',
        query_dense_layernorm: '_query_dense_layer_norm',
        key: '_key_dense',
        key_dense_layernorm: '_key_dense_layer_norm',
        value: '_value_dense',
        attention_output: '_output_dense',
      },
      implied: (c) => ({
        values: 2 * configNumber(c, 'numQueryHeads') + 2 * configNumber(c, 'numKeyValueHeads'),
        option: 'numQueryHeads',
      }),
    },
    decoding: {
      kind: 'refused',
      reason:
        'it applies no causal mask of its own (Qwen3TransformerDecoder builds the mask and ' +
        'holds the cache)',
    },
  });

  /** The `headDim` option (null: the input width / numQueryHeads). */
  readonly headDimOption: number | null;
  /** The `layerNormEpsilon` option. */
  readonly layerNormEpsilon: number;
  /** The query norm (`query_dense_layernorm`), created at build. */
  queryNorm: Qwen3LayerNorm | null = null;
  /** The key norm (`key_dense_layernorm`), created at build. */
  keyNorm: Qwen3LayerNorm | null = null;

  constructor(args: Qwen3AttentionArgs) {
    const cls = 'Qwen3Attention';
    const {headDim, layerNormEpsilon, slidingWindowSize, ...rest} =
      args ?? ({} as Qwen3AttentionArgs);
    const window = slidingWindowSize == null || slidingWindowSize === 0 ? null : slidingWindowSize;
    super(
      {
        ...rest,
        useSlidingWindowAttention: window != null,
        slidingWindowSize:
          window == null ? undefined : windowSize(window, 'slidingWindowSize', cls, 1),
      },
      cls,
    );
    if ('useSlidingWindowAttention' in rest || 'biasInitializer' in rest) {
      throw new Error(
        `${cls}: useSlidingWindowAttention and biasInitializer are not options of Qwen 3's ` +
          'attention (it has no biases; slidingWindowSize alone sets its window)',
      );
    }
    this.headDimOption = headDim == null ? null : windowSize(headDim, 'headDim', cls, 1);
    this.layerNormEpsilon = positiveNumber(layerNormEpsilon, 'layerNormEpsilon', cls, 1e-5);
  }

  protected override get projectionBias(): boolean {
    return false;
  }

  protected override headDimOf(hidden: number): number {
    return this.headDimOption ?? Math.floor(hidden / this.numQueryHeads);
  }

  protected override buildHeadParts(shape: Shape): void {
    const heads: Shape = [shape[0], shape[1], this.numQueryHeads, this.headDim];
    const norm = (name: string) => new Qwen3LayerNorm({name, epsilon: this.layerNormEpsilon});
    this.queryNorm = this.addSublayer(norm('query_dense_layernorm'), heads);
    this.keyNorm = this.addSublayer(norm('key_dense_layernorm'), [
      shape[0],
      shape[1],
      this.numKeyValueHeads,
      this.headDim,
    ]);
  }

  protected override beforeRotation(x: tf.Tensor, which: 'query' | 'key'): tf.Tensor {
    const norm = which === 'query' ? this.queryNorm : this.keyNorm;
    return (norm as Qwen3LayerNorm).call(x, {});
  }

  override getConfig(): tf.serialization.ConfigDict {
    const {useSlidingWindowAttention, slidingWindowSize, biasInitializer, ...rest} =
      super.getConfig();
    void [useSlidingWindowAttention, slidingWindowSize, biasInitializer];
    return {
      ...rest,
      headDim: this.headDimOption,
      layerNormEpsilon: this.layerNormEpsilon,
      slidingWindowSize: this.window,
    };
  }
}
