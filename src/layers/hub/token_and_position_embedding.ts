import * as tf from '@tensorflow/tfjs-core';
import {layers, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {embeddingLookup, idsAsInt32} from '../../kernels/embedding_lookup';
import {
  getInitializer,
  Initializer,
  InitializerIdentifier,
  serializeObject,
} from '../engine/config_objects';
import {formatShape, Shape, singleShape} from '../engine/shapes';
import {
  checkPositionsBatch,
  positionsOf,
  refuseSymbolicStartIndex,
  startIndexOf,
} from './start_index';
import {
  configNumber,
  defineContract,
  largestOption,
  LayerContract,
  MASK_ZERO,
} from '../engine/contract';
import {idsInput} from '../engine/decoding_checks';
import {HUB_NEEDS_KERAS3} from './hub_contract';

/** Options of {@link TokenAndPositionEmbedding}. */
export interface TokenAndPositionEmbeddingArgs extends LayerArgs {
  /** Number of token ids (ids are `0 .. vocabularySize - 1`). */
  vocabularySize: number;
  /** Longest sequence; positions are `0 .. sequenceLength - 1`. */
  sequenceLength: number;
  /** Width of both embeddings. */
  embeddingDim: number;
  /** Treat id 0 as padding: the output carries a Keras mask `ids != 0`. Default false. */
  maskZero?: boolean;
  /** Initializer of both embedding tables. Default randomUniform. */
  embeddingsInitializer?: InitializerIdentifier;
}

/**
 * Token embedding plus learned position embedding (keras-hub `TokenAndPositionEmbedding`):
 * `out[b, t] = tokens[ids[b, t]] + positions[startIndex + t]` (call option `startIndex`, eager
 * calls only, default 0: cached decoding one token at a time), or with call option `positions`
 * (int32 `[length]` or `[batch, length]`, eager calls; startIndex is then ignored, as in keras-hub)
 * `tokens[ids[b, t]] + positions[p[b, t]]`.
 *
 * - Input: int32 ids `[batch, length]` with `length <= sequenceLength` (float32 ids holding whole
 *   numbers are cast to int32, as Keras' `Embedding` does; fractional ones are an error).
 * - Output: `[batch, length, embeddingDim]`.
 * - Weights: `token_embedding/embeddings [vocabularySize, embeddingDim]`,
 *   `position_embedding/embeddings [sequenceLength, embeddingDim]`.
 *
 * The lookup's gradient is a one-hot product rather than tfjs' gather gradient, whose
 * `UnsortedSegmentSum` kernel the wasm backend lacks, so this trains on every backend.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {TokenAndPositionEmbedding} from 'tfjs-attention';
 *
 * const emb = new TokenAndPositionEmbedding({vocabularySize: 12, sequenceLength: 10, embeddingDim: 32});
 * const x = emb.apply(tf.tensor2d([[3, 4, 5]], [1, 3], 'int32')); // [1, 3, 32]
 * ```
 */
export class TokenAndPositionEmbedding extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'TokenAndPositionEmbedding';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        keys: [
          'vocabulary_size',
          'sequence_length',
          'embedding_dim',
          'embeddings_initializer',
        ].concat(['mask_zero']),
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
      // keras-hub passes it to its token embedding, whose reverse call this layer does not offer
      kerasOnlyKeys: ['tie_weights'],
    },
    configKeys: [
      'vocabularySize',
      'sequenceLength',
      'embeddingDim',
      'maskZero',
      'embeddingsInitializer',
    ],
    weights: {
      implied: (c) => ({
        values:
          (configNumber(c, 'vocabularySize') + configNumber(c, 'sequenceLength')) *
          configNumber(c, 'embeddingDim'),
        option: largestOption(c, ['vocabularySize', 'sequenceLength', 'embeddingDim']),
      }),
    },
    decoding: {
      kind: 'positionAware',
      check: idsInput,
    },
    makesKerasMask: MASK_ZERO,
  });

  /** The `vocabularySize` option. */
  readonly vocabularySize: number;
  /** The `sequenceLength` option. */
  readonly sequenceLength: number;
  /** The `embeddingDim` option. */
  readonly embeddingDim: number;
  /** The `maskZero` option. */
  readonly maskZero: boolean;
  /** The initializer of both embedding tables. */
  readonly embeddingsInitializer: Initializer;
  /** The token table `[vocabularySize, embeddingDim]`, created at build. */
  tokenEmbeddings: LayerVariable | null = null;
  /** The position table `[sequenceLength, embeddingDim]`, created at build. */
  positionEmbeddings: LayerVariable | null = null;

  constructor(args: TokenAndPositionEmbeddingArgs) {
    super(args);
    for (const key of ['vocabularySize', 'sequenceLength', 'embeddingDim'] as const) {
      const v = args?.[key];
      if (!(Number.isInteger(v) && v > 0)) {
        throw new Error(
          `TokenAndPositionEmbedding: expected ${key} to be a positive integer, received ${JSON.stringify(v)}`,
        );
      }
    }
    this.vocabularySize = args.vocabularySize;
    this.sequenceLength = args.sequenceLength;
    this.embeddingDim = args.embeddingDim;
    this.maskZero = Boolean(args.maskZero ?? false);
    this.embeddingsInitializer = getInitializer(args.embeddingsInitializer, 'randomUniform');
    this.supportsMasking = true;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    if (shape.length !== 2) {
      throw new Error(
        `Layer '${this.name}' expected ids of shape [batch, length], received ${formatShape(shape)}`,
      );
    }
    this.tokenEmbeddings = this.addWeight(
      'token_embedding/embeddings',
      [this.vocabularySize, this.embeddingDim],
      'float32',
      this.embeddingsInitializer,
    );
    this.positionEmbeddings = this.addWeight(
      'position_embedding/embeddings',
      [this.sequenceLength, this.embeddingDim],
      'float32',
      this.embeddingsInitializer,
    );
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return [...singleShape(inputShape, this.name), this.embeddingDim];
  }

  /**
   * Call options (eager calls): `startIndex`, the position of the first id; `positions`, an int32
   * tensor `[length]` or `[batch, length]` of each id's position (startIndex is then ignored).
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
      const given = Array.isArray(inputs) ? inputs[0] : inputs;
      if (given.rank !== 2 || (given.dtype !== 'int32' && given.dtype !== 'float32')) {
        throw new Error(
          `Layer '${this.name}' expected int32 ids of shape [batch, length], received ${given.dtype} ` +
            `of shape [${given.shape.join(', ')}]`,
        );
      }
      // float ids (a Keras `Input` declared float32) are cast, as Keras' Embedding does
      const ids = idsAsInt32(given, `Layer '${this.name}'`);
      const [, length] = ids.shape;
      const tokens = embeddingLookup((this.tokenEmbeddings as LayerVariable).read(), ids); // [batch, length, dim]
      const explicit = positionsOf(kwargs, this.name, length, this.sequenceLength);
      if (explicit != null) {
        // keras-hub: position rows taken at `positions` ([batch or 1, length]); startIndex ignored
        checkPositionsBatch(explicit.batch, ids.shape, 0, this.name);
        const at = tf.tensor2d(Int32Array.from(explicit.values), [explicit.batch, length], 'int32');
        return tf.add(
          tokens,
          embeddingLookup((this.positionEmbeddings as LayerVariable).read(), at),
        );
      }
      if (kwargs?.startIndex == null && length > this.sequenceLength) {
        throw new Error(
          `Layer '${this.name}': the input has ${length} positions but sequenceLength is ${this.sequenceLength}`,
        );
      }
      const start = startIndexOf(kwargs, this.name, length, this.sequenceLength);
      const positions = tf.slice(
        (this.positionEmbeddings as LayerVariable).read(),
        [start, 0],
        [length, this.embeddingDim],
      );
      return tf.add(tokens, positions); // [batch, length, dim]
    });
  }

  override computeMask(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    if (!this.maskZero) {
      return null as unknown as tf.Tensor;
    }
    const ids = Array.isArray(inputs) ? inputs[0] : inputs;
    return tf.notEqual(ids, 0);
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      vocabularySize: this.vocabularySize,
      sequenceLength: this.sequenceLength,
      embeddingDim: this.embeddingDim,
      maskZero: this.maskZero,
      embeddingsInitializer: serializeObject(this.embeddingsInitializer),
    };
  }
}
