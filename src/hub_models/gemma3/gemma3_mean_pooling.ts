import * as tf from '@tensorflow/tfjs-core';
import {layers} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {formatShape, isShapeList, Shape} from '../../layers/engine/shapes';
import {defineContract, LayerContract} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {refuseUnknownOptions} from '../../layers/hub/layer_options';

/**
 * keras-hub's `Gemma3MeanPooling` (keras_hub/src/models/gemma3/gemma3_layers.py): the mean of
 * `sequence [B, T, D]` over the positions `paddingMask [B, T]` keeps (the count floored at 1e-9):
 * `[B, D]`. Called on `[sequence, paddingMask]`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Gemma3MeanPooling} from 'tfjs-attention';
 *
 * const pooled = new Gemma3MeanPooling().apply([
 *   tf.ones([2, 4, 8]),
 *   tf.tensor2d([[1, 1, 1, 0], [1, 1, 0, 0]], undefined, 'int32'),
 * ]); // [2, 8]
 * ```
 */
export class Gemma3MeanPooling extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'Gemma3MeanPooling';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.gemma3.gemma3_layers',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'Gemma3MeanPooling',
        keys: [],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
    configKeys: [],
    decoding: {kind: 'refused', reason: 'it pools every position of the sequence'},
  });

  constructor(args: LayerArgs = {}) {
    super(args);
    refuseUnknownOptions(args, [], 'Gemma3MeanPooling');
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    const shape = isShapeList(inputShape) ? inputShape[0] : inputShape;
    if (shape.length !== 3) {
      throw new Error(
        `Layer '${this.name}' expected a sequence of shape [batch, length, features], received ` +
          formatShape(shape),
      );
    }
    return [shape[0], shape[2]];
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor {
    return tf.tidy(() => {
      const [x, given] = Array.isArray(inputs) ? inputs : [inputs, undefined];
      const padding = (kwargs.paddingMask as tf.Tensor | undefined) ?? given;
      if (padding == null) {
        throw new Error(`Layer '${this.name}' expected [sequence, paddingMask], received no mask`);
      }
      const mask = tf.cast(padding, 'float32'); // [B, T]
      const sum = tf.sum(tf.mul(x, tf.expandDims(mask, -1)), 1);
      const count = tf.maximum(tf.sum(mask, 1, true), 1e-9);
      return tf.div(sum, count);
    });
  }

  override computeMask(): tf.Tensor {
    return null as unknown as tf.Tensor; // the pooled output has no sequence axis to mask
  }
}
