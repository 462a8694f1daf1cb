import * as tf from '@tensorflow/tfjs-core';
import {initializers, layers, LayerVariable} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {Shape, singleShape} from '../../layers/engine/shapes';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';
import {defineContract, LayerContract} from '../../layers/engine/contract';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';

/** Options of {@link Gemma3RMSNormalization}. */
export interface Gemma3RMSNormalizationArgs extends LayerArgs {
  /** Added to the mean square before the square root. Default 1e-6 (keras-hub's). */
  epsilon?: number;
}

/**
 * keras-hub's Gemma 3 `RMSNormalization` (keras_hub/src/models/gemma3/gemma3_layers.py): RMS
 * normalization over the last axis, multiplied by `1 + scale`:
 * `x / sqrt(mean(x²) + epsilon) * (1 + scale)`. Weight `scale [features]` (zeros at first, so
 * the layer starts as a plain RMS norm). Gemma 3's block norms, query / key norms (per head: the
 * last axis is the head's) and final norm.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Gemma3RMSNormalization} from 'tfjs-attention';
 *
 * const norm = new Gemma3RMSNormalization({epsilon: 1e-6});
 * const y = norm.apply(tf.randomNormal([2, 4, 8])); // [2, 4, 8], each row of 8 with RMS 1
 * ```
 */
export class Gemma3RMSNormalization extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'Gemma3RMSNormalization';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.gemma3.gemma3_layers',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'RMSNormalization',
        keys: ['epsilon'],
        pathPrefix: 'rms_normalization',
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
    configKeys: ['epsilon'],
    decoding: {
      kind: 'positionWise',
      check: (_c, node) =>
        node.inputTensors[0].rank >= 3
          ? null
          : `its input has rank ${node.inputTensors[0].rank}: its last axis is the sequence axis`,
    },
  });

  /** The `epsilon` option. */
  readonly epsilon: number;
  /** The weight `scale [features]`, created at build (the norm multiplies by `1 + scale`). */
  scale: LayerVariable | null = null;

  constructor(args: Gemma3RMSNormalizationArgs = {}) {
    super(args);
    refuseUnknownOptions(args, ['epsilon'], 'Gemma3RMSNormalization');
    this.epsilon = positiveNumber(args.epsilon, 'epsilon', 'Gemma3RMSNormalization', 1e-6);
    this.supportsMasking = true;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    const dim = shape[shape.length - 1];
    if (dim == null) {
      throw new Error(`Layer '${this.name}' needs a known last axis, received null`);
    }
    this.scale = this.addWeight('scale', [dim], 'float32', initializers.zeros());
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return singleShape(inputShape, this.name);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const meanSquare = tf.mean(tf.square(x), -1, true);
      const normed = tf.mul(x, tf.reciprocal(tf.sqrt(tf.add(meanSquare, this.epsilon))));
      return tf.mul(normed, tf.add(1, (this.scale as LayerVariable).read()));
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...super.getConfig(), epsilon: this.epsilon};
  }
}
