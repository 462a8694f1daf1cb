/** keras-hub's `CachedMistralAttention`: Llama's grouped-query rotary attention under Mistral's name. */
import * as tf from '@tensorflow/tfjs-core';

import {defineContract, LayerContract} from '../../layers/engine/contract';
import {formatShape, Shape, singleShape} from '../../layers/engine/shapes';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {LlamaAttention} from '../llama3/llama_attention';
import type {LlamaAttentionArgs} from '../llama3/llama_attention';
import {mistralOptions, refuseHeadDim} from './mistral_options';
import type {MistralOptions} from './mistral_options';

/** Options of {@link CachedMistralAttention} (keras-hub's arguments, camelCase). */
export interface CachedMistralAttentionArgs
  extends
    Omit<
      LlamaAttentionArgs,
      | 'ropeFrequencyAdjustmentFactor'
      | 'ropeLowFreqFactor'
      | 'ropeHighFreqFactor'
      | 'ropePretrainingSequenceLength'
    >,
    MistralOptions {}

/**
 * keras-hub's `CachedMistralAttention` (keras_hub/src/models/mistral/mistral_attention.py):
 * grouped-query attention without biases, keras-hub's `RotaryEmbedding` on queries and keys, the
 * mask given by the caller ({@link MistralTransformerDecoder} builds it, its sliding window
 * included; the attention keeps `slidingWindow` in its config as keras-hub does), a key / value
 * cache in eager calls: {@link LlamaAttention}'s computation. Sublayers (EinsumDense, no bias):
 * `query`, `key`, `value`, `attention_output`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {CachedMistralAttention} from 'tfjs-attention';
 *
 * const attention = new CachedMistralAttention({numQueryHeads: 4, numKeyValueHeads: 2});
 * const y = attention.apply(tf.randomNormal([1, 5, 16])); // [1, 5, 16]
 * ```
 */
export class CachedMistralAttention extends LlamaAttention {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'CachedMistralAttention';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    ...LlamaAttention.contract,
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.mistral.mistral_attention',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'CachedMistralAttention',
        keys: [
          'num_query_heads',
          'num_key_value_heads',
          'rope_max_wavelength',
          'rope_scaling_factor',
          'kernel_initializer',
          'sliding_window',
          'dropout',
          'head_dim',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
    configKeys: [
      'numQueryHeads',
      'numKeyValueHeads',
      'ropeMaxWavelength',
      'ropeScalingFactor',
      'slidingWindow',
      'headDim',
      'dropout',
      'kernelInitializer',
    ],
  });

  /** The `slidingWindow` option (the decoder's mask applies it). */
  readonly slidingWindow: number | null;
  /** The `headDim` option (null: the width / numQueryHeads). */
  readonly headDimOption: number | null;
  /** The `ropeScalingFactor` option (1). */
  readonly ropeScalingFactor: number;

  constructor(args: CachedMistralAttentionArgs) {
    const {slidingWindow, headDim, ropeScalingFactor, ...llama} = args ?? ({} as typeof args);
    super(llama as LlamaAttentionArgs);
    const options = mistralOptions(
      {slidingWindow, headDim, ropeScalingFactor},
      'CachedMistralAttention',
    );
    this.slidingWindow = options.slidingWindow;
    this.headDimOption = options.headDim;
    this.ropeScalingFactor = options.ropeScalingFactor;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    const hidden = shape[shape.length - 1];
    const why = refuseHeadDim(this.headDimOption, hidden ?? 0, this.numQueryHeads);
    if (why != null) {
      throw new Error(`Layer '${this.name}': ${why} for input ${formatShape(shape)}`);
    }
    super.build(inputShape);
  }

  override getConfig(): tf.serialization.ConfigDict {
    const {
      ropeFrequencyAdjustmentFactor,
      ropeLowFreqFactor,
      ropeHighFreqFactor,
      ropePretrainingSequenceLength,
      ...rest
    } = super.getConfig();
    void [
      ropeFrequencyAdjustmentFactor,
      ropeLowFreqFactor,
      ropeHighFreqFactor,
      ropePretrainingSequenceLength,
    ];
    return {
      ...rest,
      ropeScalingFactor: this.ropeScalingFactor,
      slidingWindow: this.slidingWindow,
      headDim: this.headDimOption,
    };
  }
}
