/** keras-hub's `QwenLayerNorm`: the RMS norm of Llama, under Qwen's class name. */
import {defineContract, LayerContract} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {LlamaLayerNorm} from '../llama3/llama_layer_norm';

/**
 * keras-hub's `QwenLayerNorm` (keras_hub/src/models/qwen/qwen_layernorm.py): RMS normalization
 * over the last axis, `x / sqrt(mean(x²) + epsilon) * scale`, as {@link LlamaLayerNorm} computes
 * it (keras-hub's two classes are the same computation). Weight `scale [features]`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {QwenLayerNorm} from 'tfjs-attention';
 *
 * const norm = new QwenLayerNorm({epsilon: 1e-6});
 * const y = norm.apply(tf.randomNormal([2, 4, 8])); // [2, 4, 8], each row of 8 with RMS 1
 * ```
 */
export class QwenLayerNorm extends LlamaLayerNorm {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'QwenLayerNorm';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    ...LlamaLayerNorm.contract,
    keras: {
      ...LlamaLayerNorm.contract.keras,
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.qwen.qwen_layernorm',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'QwenLayerNorm',
        keys: ['epsilon'],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
    },
  });
}
