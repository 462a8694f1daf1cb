import * as tf from '@tensorflow/tfjs-core';

import {defineContract, LayerContract} from '../../layers/engine/contract';
import {LlamaLayerNorm} from '../llama3/llama_layer_norm';
import type {LlamaLayerNormArgs} from '../llama3/llama_layer_norm';

/** Options of {@link RMSNormalization} (Keras' arguments, camelCase). */
export interface RMSNormalizationArgs extends LlamaLayerNormArgs {
  /** The normalized axis: only -1 (the last) is implemented. Default -1. */
  axis?: number;
}

/**
 * Keras 3's `keras.layers.RMSNormalization` over the last axis (SmolLM3's norms):
 * `x * rsqrt(mean(x²) + epsilon) * scale`, {@link LlamaLayerNorm}'s computation. Weight
 * `scale [features]`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {RMSNormalization} from 'tfjs-attention';
 *
 * const norm = new RMSNormalization({epsilon: 1e-6});
 * const y = norm.apply(tf.randomNormal([2, 4, 8])); // [2, 4, 8]
 * ```
 */
export class RMSNormalization extends LlamaLayerNorm {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'RMSNormalization';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    ...LlamaLayerNorm.contract,
    keras: {
      keras3: {keys: ['axis', 'epsilon']},
      keras2: {refused: 'tf-keras 2 has no RMSNormalization'},
      call: {kind: 'tensor'},
    },
    configKeys: ['axis', 'epsilon'],
  });

  /** The `axis` option (-1). */
  readonly axis: number;

  constructor(args: RMSNormalizationArgs = {}) {
    const {axis, ...rest} = args;
    super(rest);
    const a = Array.isArray(axis) && axis.length === 1 ? axis[0] : (axis ?? -1);
    if (a !== -1) {
      throw new Error(
        `RMSNormalization: axis=${JSON.stringify(axis)} is not implemented (expected -1, the ` +
          `last axis)`,
      );
    }
    this.axis = -1;
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...super.getConfig(), axis: this.axis};
  }
}
