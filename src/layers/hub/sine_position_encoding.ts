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
import {positionsOfSequence} from '../engine/decoding_checks';
import {HUB_NEEDS_KERAS3} from './hub_contract';

/** Options of {@link SinePositionEncoding}. */
export interface SinePositionEncodingArgs extends LayerArgs {
  /** Position of the first element when no `startIndex` call option is given (keras-hub's
   * `start_index` of a converted model's call). Default 0. */
  startIndex?: number;
  /** The longest wavelength of the sinusoids. Default 10000. */
  maxWavelength?: number;
}

/**
 * keras-hub's `SinePositionEncoding` (Vaswani et al.): for inputs `[..., T, D]`, the encoding of
 * position t at feature j is `sin(t * w_j)` for even j and `cos(t * w_j)` for odd j, with
 * `w_j = (1 / maxWavelength)^(2 * floor(j / 2) / D)`; returned broadcast to the input's shape
 * (add it to the input yourself). Call option `startIndex` shifts the positions; `positions`
 * (`[T]` or `[batch, T]`, eager calls) gives each element's position instead.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {SinePositionEncoding} from 'tfjs-attention';
 *
 * const embeddings = tf.randomNormal([2, 10, 16]); // [batch, T, D]
 * const encoding = new SinePositionEncoding().apply(embeddings); // [2, 10, 16]
 * const x = tf.add(embeddings, encoding);
 * ```
 */
export class SinePositionEncoding extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'SinePositionEncoding';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {pkg: 'keras_hub', keys: ['max_wavelength']},
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'positions'},
    },
    configKeys: ['startIndex', 'maxWavelength'],
    decoding: {kind: 'positionAware', check: positionsOfSequence},
  });

  /** The `startIndex` option: the position of the first element when no call option is given. */
  readonly startIndex: number;

  /** The `maxWavelength` option. */
  readonly maxWavelength: number;

  constructor(args: SinePositionEncodingArgs = {}) {
    super(args);
    this.startIndex = startIndexOption(args?.startIndex, 'SinePositionEncoding');
    refuseUnknownOptions(args, ['maxWavelength', 'startIndex'], 'SinePositionEncoding');
    this.maxWavelength = positiveNumber(
      args.maxWavelength,
      'maxWavelength',
      'SinePositionEncoding',
      10000,
    );
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
      if (x.rank < 2) {
        throw new Error(
          `Layer '${this.name}' expected [..., length, features], received [${x.shape.join(', ')}]`,
        );
      }
      const [T, D] = x.shape.slice(-2);
      // positions [B, T]: keras-hub's `positions` (startIndex then ignored), else start + t
      const given = positionsOf(kwargs, this.name, T);
      let B = 1;
      let pos: ArrayLike<number>;
      if (given != null) {
        checkPositionsBatch(given.batch, x.shape, x.rank - 3, this.name);
        B = given.batch;
        pos = given.values;
      } else {
        const start = startIndexOf(kwargs, this.name, T, null, this.startIndex);
        pos = Array.from({length: T}, (_, t) => t + start);
      }
      const enc = new Float32Array(B * T * D);
      for (let r = 0; r < B * T; r++) {
        for (let j = 0; j < D; j++) {
          const w = Math.pow(1 / this.maxWavelength, (2 * Math.floor(j / 2)) / D);
          const angle = pos[r] * w;
          enc[r * D + j] = j % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
        }
      }
      const table = B === 1 ? tf.tensor2d(enc, [T, D]) : tf.tensor3d(enc, [B, T, D]);
      return tf.broadcastTo(table, x.shape); // [..., T, D]
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      ...(this.startIndex !== 0 ? {startIndex: this.startIndex} : {}),
      maxWavelength: this.maxWavelength,
    };
  }
}
