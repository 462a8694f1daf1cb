import * as tf from '@tensorflow/tfjs-core';
import {layers} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {Shape, singleShape} from '../../layers/engine/shapes';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';
import {defineContract, LayerContract} from '../../layers/engine/contract';

/** Options of {@link Gemma3EmbeddingScale}. */
export interface Gemma3EmbeddingScaleArgs extends LayerArgs {
  /** The factor (Gemma 3: `sqrt(hidden_dim)` in float32). */
  factor: number;
}

/**
 * Gemma 3's token embeddings times `sqrt(hidden_dim)` (keras-hub's Gemma3Backbone multiplies the
 * embedding's output by `ops.cast(ops.sqrt(hidden_dim), dtype)`, an operation of its functional
 * graph rather than a layer): `x * factor`, position-wise, no weights.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Gemma3EmbeddingScale} from 'tfjs-attention';
 *
 * const scale = new Gemma3EmbeddingScale({factor: Math.fround(Math.sqrt(640))});
 * const y = scale.apply(tf.ones([1, 2, 640])); // every value sqrt(640)
 * ```
 */
export class Gemma3EmbeddingScale extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'Gemma3EmbeddingScale';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        refused:
          "is an operation of keras-hub's Gemma3Backbone graph, not a Keras layer (its backbone " +
          'is saved by its config)',
      },
      keras2: {refused: 'is an operation of keras-hub 0.32 (Keras 3), not a tf-keras 2 layer'},
      call: {kind: 'tensor'},
    },
    configKeys: ['factor'],
    decoding: {kind: 'positionWise', check: () => null},
  });

  /** The `factor` option. */
  readonly factor: number;

  constructor(args: Gemma3EmbeddingScaleArgs) {
    super(args);
    refuseUnknownOptions(args, ['factor'], 'Gemma3EmbeddingScale');
    this.factor = positiveNumber(args.factor, 'factor', 'Gemma3EmbeddingScale', 1);
    this.supportsMasking = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return singleShape(inputShape, this.name);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    return tf.tidy(() => tf.mul(Array.isArray(inputs) ? inputs[0] : inputs, this.factor));
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...super.getConfig(), factor: this.factor};
  }
}
