/**
 * The toy family's `ToyRMSNorm` (fixtures/toy_family.py): RMS normalization over the last axis,
 * `x / sqrt(mean(x²) + epsilon) * scale`, weight `scale [features]` (ones at first). A layer of a
 * family defined outside the package: a tfjs layer class with the package's layer contract.
 */
import * as tf from '@tensorflow/tfjs-core';
import {initializers, layers, LayerVariable} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';

import {defineContract} from '../../../src';
import type {LayerContract} from '../../../src';

/** Options of {@link ToyRMSNorm}. */
export interface ToyRMSNormArgs extends LayerArgs {
  /** Added to the mean square before the square root. Default 1e-6 (the Python layer's). */
  epsilon?: number;
}

type Shape = Array<number | null>;

/** The one shape of a layer's input (a list of one shape accepted). */
function oneShape(shape: Shape | Shape[], name: string): Shape {
  const first = shape[0];
  if (Array.isArray(first)) {
    if (shape.length !== 1) {
      throw new Error(`Layer '${name}' expected one input, received ${shape.length}`);
    }
    return first;
  }
  return shape as Shape;
}

export class ToyRMSNorm extends layers.Layer {
  /** @nocollapse */
  static readonly className = 'ToyRMSNorm';
  /** What the package knows about this class (src/layers/engine/contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {pkg: 'toy_family', keys: ['epsilon']},
      keras2: {refused: 'tf-keras 2 has no toy family'},
      call: {kind: 'tensor'},
    },
    configKeys: ['epsilon'],
    // normalizes the last axis: each position alone when that axis is not the sequence's
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
  /** The weight `scale [features]`, created at build. */
  scale: LayerVariable | null = null;

  constructor(args: ToyRMSNormArgs = {}) {
    super(args);
    const epsilon = args.epsilon ?? 1e-6;
    if (!(typeof epsilon === 'number' && Number.isFinite(epsilon) && epsilon > 0)) {
      throw new Error(
        `ToyRMSNorm: expected epsilon to be a number > 0, received ${JSON.stringify(epsilon)}`,
      );
    }
    this.epsilon = epsilon;
    this.supportsMasking = true;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = oneShape(inputShape, this.name);
    const dim = shape[shape.length - 1];
    if (dim == null) {
      throw new Error(`Layer '${this.name}' expected a known last axis, received null`);
    }
    this.scale = this.addWeight('scale', [dim], 'float32', initializers.ones());
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return oneShape(inputShape, this.name);
  }

  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const meanSquare = tf.mean(tf.square(x), -1, true);
      const normed = tf.mul(x, tf.rsqrt(tf.add(meanSquare, this.epsilon)));
      return tf.mul(normed, (this.scale as LayerVariable).read());
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...super.getConfig(), epsilon: this.epsilon};
  }
}
