import * as tf from '@tensorflow/tfjs-core';
import {layers} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {Shape, singleShape} from '../../layers/engine/shapes';
import {defineContract, LayerContract} from '../../layers/engine/contract';
import {refuseUnknownOptions} from '../../layers/hub/layer_options';

/**
 * Keras' `UnitNormalization` over the last axis (the axis Gemma 3's embedding backbone uses):
 * `x * min(rsqrt(sum(x²)), 1e12)`, as `keras.ops.normalize(x, order=2, epsilon=1e-12)` computes
 * it.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {UnitNormalization} from 'tfjs-attention';
 *
 * const y = new UnitNormalization().apply(tf.tensor2d([[3, 4]])); // [[0.6, 0.8]]
 * ```
 */
export class UnitNormalization extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'UnitNormalization';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {keys: ['axis']},
      keras2: {},
      call: {kind: 'tensor'},
      kerasOnlyKeys: ['axis'],
      refuseConfig: (c) =>
        c.axis == null ||
        c.axis === -1 ||
        (Array.isArray(c.axis) && c.axis.length === 1 && c.axis[0] === -1)
          ? null
          : `has axis = ${JSON.stringify(c.axis)}: only the last axis (-1) is implemented`,
    },
    configKeys: [],
    decoding: {kind: 'positionWise', check: () => null},
  });

  constructor(args: LayerArgs = {}) {
    super(args);
    refuseUnknownOptions(args, [], 'UnitNormalization');
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return singleShape(inputShape, this.name);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const squares = tf.sum(tf.square(x), -1, true);
      return tf.mul(x, tf.minimum(tf.rsqrt(squares), 1e12));
    });
  }
}
