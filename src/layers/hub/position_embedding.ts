import * as tf from '@tensorflow/tfjs-core';
import {layers, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {
  getInitializer,
  Initializer,
  InitializerIdentifier,
  serializeObject,
} from '../engine/config_objects';
import {formatShape, Shape, singleShape} from '../engine/shapes';
import {embeddingLookup} from '../../kernels/embedding_lookup';
import {
  checkPositionsBatch,
  positionsOf,
  refuseSymbolicStartIndex,
  startIndexOf,
} from './start_index';
import {refuseUnknownOptions, startIndexOption} from './layer_options';
import {defineContract, impliedProduct, LayerContract} from '../engine/contract';
import {positionsOfSequence} from '../engine/decoding_checks';
import {HUB_NEEDS_KERAS3} from './hub_contract';

/** Options of {@link PositionEmbedding}. */
export interface PositionEmbeddingArgs extends LayerArgs {
  /** Position of the first element when no `startIndex` call option is given (keras-hub's
   * `start_index` of a converted model's call). Default 0. */
  startIndex?: number;
  /** The longest sequence (rows of the embedding table). */
  sequenceLength: number;
  /** Initializer of the table. Default glorotUniform. */
  initializer?: InitializerIdentifier;
}

/**
 * keras-hub's `PositionEmbedding`: a learned table `embeddings [sequenceLength, features]`; for
 * inputs `[..., T, features]` it returns rows `startIndex .. startIndex + T - 1` broadcast to the
 * input's shape (add it to the input yourself). Shorter sequences use the first rows. Call option
 * `positions` (`[T]` or `[batch, T]`, eager calls): the rows to take instead, per element.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {PositionEmbedding} from 'tfjs-attention';
 *
 * const tokens = tf.randomNormal([2, 10, 16]); // token embeddings [batch, T, features]
 * const positions = new PositionEmbedding({sequenceLength: 128}).apply(tokens); // [2, 10, 16]
 * const x = tf.add(tokens, positions);
 * ```
 */
export class PositionEmbedding extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'PositionEmbedding';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {pkg: 'keras_hub', keys: ['sequence_length', 'initializer']},
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'positions'},
    },
    configKeys: ['startIndex', 'sequenceLength', 'initializer'],
    weights: {implied: impliedProduct('sequenceLength')},
    decoding: {
      kind: 'positionAware',
      check: positionsOfSequence,
    },
  });

  /** The `startIndex` option: the position of the first element when no call option is given. */
  readonly startIndex: number;

  /** The `sequenceLength` option: the longest sequence. */
  readonly sequenceLength: number;
  /** The initializer of the position table. */
  readonly initializer: Initializer;
  /** The position table `[sequenceLength, features]`, created at build. */
  embeddings: LayerVariable | null = null;

  constructor(args: PositionEmbeddingArgs) {
    super(args);
    this.startIndex = startIndexOption(args?.startIndex, 'PositionEmbedding');
    refuseUnknownOptions(
      args,
      ['sequenceLength', 'initializer', 'startIndex'],
      'PositionEmbedding',
    );
    if (!(Number.isInteger(args?.sequenceLength) && args.sequenceLength > 0)) {
      throw new Error(
        `PositionEmbedding: expected sequenceLength to be a positive integer, received ${JSON.stringify(args?.sequenceLength)}`,
      );
    }
    this.sequenceLength = args.sequenceLength;
    this.initializer = getInitializer(args.initializer, 'glorotUniform');
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    const features = shape[shape.length - 1];
    if (shape.length < 2 || features == null) {
      throw new Error(
        `Layer '${this.name}' expected [..., length, features], received ${formatShape(shape)}`,
      );
    }
    this.embeddings = this.addWeight(
      'embeddings',
      [this.sequenceLength, features],
      'float32',
      this.initializer,
    );
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return singleShape(inputShape, this.name);
  }

  /**
   * Call options (eager calls): `startIndex`, the position of the first element; `positions`, an
   * int32 tensor `[T]` or `[batch, T]` of the rows to take (startIndex is then ignored).
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
      const [T, D] = x.shape.slice(-2);
      const table = (this.embeddings as LayerVariable).read(); // [sequenceLength, D]
      const given = positionsOf(kwargs, this.name, T, this.sequenceLength);
      if (given != null) {
        // keras-hub: rows taken at the positions ([batch or 1, T, D]); startIndex is ignored
        checkPositionsBatch(given.batch, x.shape, x.rank - 3, this.name);
        const ids = tf.tensor2d(Int32Array.from(given.values), [given.batch, T], 'int32');
        const rows = embeddingLookup(table, ids); // [batch or 1, T, D]
        return tf.broadcastTo(given.batch === 1 ? tf.reshape(rows, [T, D]) : rows, x.shape);
      }
      const start = startIndexOf(kwargs, this.name, T, this.sequenceLength, this.startIndex);
      const rows = tf.slice(table, [start, 0], [T, D]); // [T, D]
      return tf.broadcastTo(rows, x.shape); // [..., T, D]
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      ...(this.startIndex !== 0 ? {startIndex: this.startIndex} : {}),
      sequenceLength: this.sequenceLength,
      initializer: serializeObject(this.initializer),
    };
  }
}
