/** keras-hub's `Qwen3LayerNorm`: the RMS norm of Qwen 2.5, under Qwen 3's class name. */
import {defineContract, LayerContract} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {QwenLayerNorm} from '../qwen/qwen_layer_norm';

/**
 * keras-hub's `Qwen3LayerNorm` (keras_hub/src/models/qwen3/qwen3_layernorm.py): RMS normalization
 * over the last axis, `x / sqrt(mean(x²) + epsilon) * scale`. Qwen 3's attention normalises each
 * head of its queries and keys with one (its input `[batch, length, heads, headDim]`, its scale
 * `[headDim]`).
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Qwen3LayerNorm} from 'tfjs-attention';
 *
 * const norm = new Qwen3LayerNorm({epsilon: 1e-6});
 * const y = norm.apply(tf.randomNormal([1, 5, 4, 8])); // each head's 8 values with RMS 1
 * ```
 */
export class Qwen3LayerNorm extends QwenLayerNorm {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className = 'Qwen3LayerNorm';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    ...QwenLayerNorm.contract,
    keras: {
      ...QwenLayerNorm.contract.keras,
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.qwen3.qwen3_layernorm',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'Qwen3LayerNorm',
        keys: ['epsilon'],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
    },
  });
}
