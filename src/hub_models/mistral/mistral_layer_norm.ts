import {defineContract, LayerContract} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {LlamaLayerNorm} from '../llama3/llama_layer_norm';

/**
 * keras-hub's `MistralLayerNormalization` (keras_hub/src/models/mistral/mistral_layer_norm.py):
 * the same RMS normalization as {@link LlamaLayerNorm}, `x / sqrt(mean(x²) + epsilon) * scale`
 * over the last axis, under Mistral's class name. Weight `scale [features]`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {MistralLayerNormalization} from 'tfjs-attention';
 *
 * const norm = new MistralLayerNormalization({epsilon: 1e-5});
 * const y = norm.apply(tf.randomNormal([2, 4, 8])); // [2, 4, 8]
 * ```
 */
export class MistralLayerNormalization extends LlamaLayerNorm {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className = 'MistralLayerNormalization';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    ...LlamaLayerNorm.contract,
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.mistral.mistral_layer_norm',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'MistralLayerNormalization',
        keys: ['epsilon'],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
  });
}
