import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {Shape, singleShape} from '../engine/shapes';
import {
  checkPositionsBatch,
  positionsOf,
  refuseSymbolicStartIndex,
  startIndexOf,
} from './start_index';
import {positiveNumber, refuseUnknownOptions, startIndexOption} from './layer_options';
import {defineContract, LayerContract} from '../engine/contract';
import {HUB_NEEDS_KERAS3} from './hub_contract';

/** Options of {@link RotaryEmbedding}. */
export interface RotaryEmbeddingArgs extends LayerArgs {
  /** Position of the first element when no `startIndex` call option is given (keras-hub's
   * `start_index` of a converted model's call). Default 0. */
  startIndex?: number;
  /** The longest wavelength of the sinusoids. Default 10000. */
  maxWavelength?: number;
  /** Positions are divided by it (linear rope scaling). Default 1. */
  scalingFactor?: number;
  /** The sequence axis of the input. Default 1. */
  sequenceAxis?: number;
  /** The feature axis of the input (even size). Default -1. */
  featureAxis?: number;
}

const KNOWN = [
  'maxWavelength',
  'scalingFactor',
  'sequenceAxis',
  'featureAxis',
  'ropeType',
  'startIndex',
];

/**
 * keras-hub's `RotaryEmbedding` (RoFormer): rotates feature pairs `(x_i, x_{i+D/2})` (halves, not
 * interleaved) by angle `position / scalingFactor * maxWavelength^(-2i/D)`:
 * `out = x cos + [-x2, x1] sin`. No weights; any rank with a sequence and a feature axis.
 * Call option `startIndex` (cached decoding): the position of the first element; `positions`
 * (`[T]` or `[batch, T]`, eager calls; batch on the first axis that is neither the sequence nor
 * the feature axis, as in keras-hub): each element's position instead.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {RotaryEmbedding} from 'tfjs-attention';
 *
 * const query = tf.randomNormal([2, 6, 4, 8]); // [batch, T, heads, headDim]
 * const rotated = new RotaryEmbedding().apply(query); // [2, 6, 4, 8]
 * ```
 */
export class RotaryEmbedding extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'RotaryEmbedding';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        keys: ['max_wavelength', 'scaling_factor', 'sequence_axis', 'feature_axis'],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'positions'},
      // keras-hub's YaRN options, which act only with rope_type 'yarn' (refused below)
      kerasOnlyKeys: [
        'rope_type',
        'beta_fast',
        'beta_slow',
        'original_max_position_embeddings',
        'truncate',
      ],
      refuseConfig: (c) =>
        c.ropeType != null && c.ropeType !== 'linear'
          ? `has rope_type ${JSON.stringify(c.ropeType)}; this package implements keras-hub's ` +
            "'linear' rotary embedding (scaling_factor) only"
          : null,
    },
    configKeys: ['startIndex', 'maxWavelength', 'scalingFactor', 'sequenceAxis', 'featureAxis'],
    decoding: {
      kind: 'positionAware',
      check: (c, node) => {
        const a = Number(c.sequenceAxis ?? 1);
        const rank = node.inputTensors[0].rank;
        return (a < 0 ? rank + a : a) === 1 ? null : `its sequence axis is ${a}, not 1`;
      },
    },
  });

  /** The `startIndex` option: the position of the first element when no call option is given. */
  readonly startIndex: number;

  /** The `maxWavelength` option. */
  readonly maxWavelength: number;
  /** The `scalingFactor` option. */
  readonly scalingFactor: number;
  /** The `sequenceAxis` option. */
  readonly sequenceAxis: number;
  /** The `featureAxis` option. */
  readonly featureAxis: number;

  constructor(args: RotaryEmbeddingArgs = {}) {
    super(args);
    this.startIndex = startIndexOption(args?.startIndex, 'RotaryEmbedding');
    const cls = 'RotaryEmbedding';
    const rope = (args as {ropeType?: unknown}).ropeType;
    // keras-hub 0.32 writes 'linear' for the plain (position / scalingFactor) rope
    if (rope != null && rope !== 'default' && rope !== 'linear') {
      throw new Error(
        `${cls}: ropeType ${JSON.stringify(rope)} is not implemented; only 'linear' (keras-hub's ` +
          "default, also spelled 'default')",
      );
    }
    // keras-hub writes YaRN's parameters into every config; they only act with ropeType 'yarn'
    const {betaFast, betaSlow, originalMaxPositionEmbeddings, truncate, ...rest} = args as {
      [key: string]: unknown;
    };
    void [betaFast, betaSlow, originalMaxPositionEmbeddings, truncate];
    refuseUnknownOptions(rest, KNOWN, cls);
    this.maxWavelength = positiveNumber(args.maxWavelength, 'maxWavelength', cls, 10000);
    this.scalingFactor = positiveNumber(args.scalingFactor, 'scalingFactor', cls, 1);
    this.sequenceAxis = args.sequenceAxis ?? 1;
    this.featureAxis = args.featureAxis ?? -1;
    for (const [name, v] of [
      ['sequenceAxis', this.sequenceAxis],
      ['featureAxis', this.featureAxis],
    ] as const) {
      if (!Number.isInteger(v)) {
        throw new Error(`${cls}: expected ${name} to be an integer, received ${JSON.stringify(v)}`);
      }
    }
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return singleShape(inputShape, this.name);
  }

  /**
   * Call options (eager calls): `startIndex`, the position of the first element; `positions`, a
   * tensor `[T]` or `[batch, T]` of each element's position (startIndex is then ignored).
   */
  override apply(inputs: tf.Tensor, kwargs?: Kwargs): tf.Tensor;
  override apply(inputs: SymbolicTensor, kwargs?: Kwargs): SymbolicTensor;
  override apply(
    inputs: tf.Tensor | SymbolicTensor | Array<tf.Tensor | SymbolicTensor>,
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: tf.Tensor | SymbolicTensor | Array<tf.Tensor | SymbolicTensor>,
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    refuseSymbolicStartIndex(inputs, kwargs, this.name);
    return super.apply(inputs as tf.Tensor, kwargs);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const rank = x.rank;
      const seq = this.sequenceAxis < 0 ? rank + this.sequenceAxis : this.sequenceAxis;
      const feat = this.featureAxis < 0 ? rank + this.featureAxis : this.featureAxis;
      const D = x.shape[feat];
      if (seq === feat || seq < 0 || feat < 0 || seq >= rank || feat >= rank || D % 2 !== 0) {
        throw new Error(
          `Layer '${this.name}' expected distinct sequence and feature axes (${this.sequenceAxis}, ` +
            `${this.featureAxis}) with an even feature size, received shape [${x.shape.join(', ')}]`,
        );
      }
      const T = x.shape[seq];
      // keras-hub's batch axis: the first axis that is neither the sequence nor the feature axis
      const batchAxis = x.shape.findIndex((_, a) => a !== seq && a !== feat);
      // positions [B, T]: keras-hub's `positions` (startIndex then ignored), else start + t
      const given = positionsOf(kwargs, this.name, T);
      let B = 1;
      let positions: ArrayLike<number>;
      if (given != null) {
        checkPositionsBatch(given.batch, x.shape, batchAxis, this.name);
        B = given.batch;
        positions = given.values;
      } else {
        const start = startIndexOf(kwargs, this.name, T, null, this.startIndex);
        positions = Array.from({length: T}, (_, t) => t + start);
      }
      // angles [B, T, D]: position, frequency of pair i (i < D/2) repeated for both halves
      const angles = new Float32Array(B * T * D);
      for (let r = 0; r < B * T; r++) {
        const pos = positions[r] / this.scalingFactor;
        for (let i = 0; i < D / 2; i++) {
          const inv = 1 / Math.pow(this.maxWavelength, (2 * i) / D);
          angles[r * D + i] = angles[r * D + i + D / 2] = Math.fround(pos * inv);
        }
      }
      // [B, T, D] moved to the input's order of (batch, sequence, feature), 1 on other axes
      const axes = B === 1 ? [seq, feat] : [batchAxis, seq, feat];
      const a = tf.tensor(angles, B === 1 ? [T, D] : [B, T, D]);
      const order = [...axes].sort((u, v) => u - v);
      const layout = tf.transpose(
        a,
        order.map((ax) => axes.indexOf(ax)),
      );
      const shape = x.shape.map((n, ax) => (axes.includes(ax) ? n : 1));
      const cos = tf.reshape(tf.cos(layout), shape);
      const sin = tf.reshape(tf.sin(layout), shape);
      const [x1, x2] = tf.split(x, 2, feat);
      const rotated = tf.concat([tf.neg(x2), x1], feat); // [-x2, x1]
      return tf.add(tf.mul(x, cos), tf.mul(rotated, sin));
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      ...(this.startIndex !== 0 ? {startIndex: this.startIndex} : {}),
      maxWavelength: this.maxWavelength,
      scalingFactor: this.scalingFactor,
      sequenceAxis: this.sequenceAxis,
      featureAxis: this.featureAxis,
    };
  }
}
