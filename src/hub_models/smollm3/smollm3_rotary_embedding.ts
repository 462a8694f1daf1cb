import * as tf from '@tensorflow/tfjs-core';
import {initializers, layers, LayerVariable} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {defineContract, LayerContract} from '../../layers/engine/contract';
import {Shape, singleShape} from '../../layers/engine/shapes';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';

/** Options of {@link SmolLM3RotaryEmbedding} (keras-hub's arguments, camelCase). */
export interface SmolLM3RotaryEmbeddingArgs extends LayerArgs {
  /** The model's width. */
  hiddenSize: number;
  /** Query heads: the head size is hiddenSize / numAttentionHeads. */
  numAttentionHeads: number;
  /** keras-hub keeps it in the config; unused. Default 2048. */
  maxPositionEmbeddings?: number;
  /** The rotary base. Default 10000. */
  ropeTheta?: number;
  /** Only 1 is implemented (keras-hub's rotation needs the whole head). Default 1. */
  partialRotaryFactor?: number;
}

/**
 * keras-hub's `SmolLM3RotaryEmbedding` (keras_hub/src/models/smollm3/smollm3_layers.py): the
 * inverse frequencies `ropeTheta^(-2i / headDim)` as a non-trainable weight `inv_freq
 * [headDim / 2]` (saved in keras-hub's weights: {@link SmolLM3Attention} rotates with the values
 * it holds). Its call returns the input unchanged: the attention applies the rotation.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {SmolLM3RotaryEmbedding} from 'tfjs-attention';
 *
 * const rope = new SmolLM3RotaryEmbedding({hiddenSize: 16, numAttentionHeads: 4, ropeTheta: 1e4});
 * rope.apply(tf.zeros([1, 3, 16]));
 * console.log(rope.frequencies()); // [1, 0.01]
 * ```
 */
export class SmolLM3RotaryEmbedding extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'SmolLM3RotaryEmbedding';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.smollm3.smollm3_layers',
        registeredName: 'SmolLM3RotaryEmbedding',
        keys: [
          'hidden_size',
          'num_attention_heads',
          'max_position_embeddings',
          'rope_theta',
          'partial_rotary_factor',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
    configKeys: [
      'hiddenSize',
      'numAttentionHeads',
      'maxPositionEmbeddings',
      'ropeTheta',
      'partialRotaryFactor',
    ],
    decoding: {kind: 'refused', reason: 'it is a part of SmolLM3Attention'},
  });

  /** The `hiddenSize` option. */
  readonly hiddenSize: number;
  /** The `numAttentionHeads` option. */
  readonly numAttentionHeads: number;
  /** The `maxPositionEmbeddings` option. */
  readonly maxPositionEmbeddings: number;
  /** The `ropeTheta` option. */
  readonly ropeTheta: number;
  /** The `partialRotaryFactor` option (1). */
  readonly partialRotaryFactor: number;
  /** The weight `inv_freq [headDim / 2]`, created at build. */
  invFreq: LayerVariable | null = null;

  constructor(args: SmolLM3RotaryEmbeddingArgs) {
    super(args);
    const cls = 'SmolLM3RotaryEmbedding';
    refuseUnknownOptions(
      args,
      [
        'hiddenSize',
        'numAttentionHeads',
        'maxPositionEmbeddings',
        'ropeTheta',
        'partialRotaryFactor',
      ],
      cls,
    );
    for (const key of ['hiddenSize', 'numAttentionHeads'] as const) {
      const v = args[key];
      if (!(Number.isInteger(v) && v > 0)) {
        throw new Error(`${cls}: expected ${key} to be a positive integer, received ${v}`);
      }
    }
    if ((args.partialRotaryFactor ?? 1) !== 1) {
      throw new Error(
        `${cls}: partialRotaryFactor=${args.partialRotaryFactor} is not implemented (expected 1)`,
      );
    }
    this.hiddenSize = args.hiddenSize;
    this.numAttentionHeads = args.numAttentionHeads;
    this.maxPositionEmbeddings = args.maxPositionEmbeddings ?? 2048;
    this.ropeTheta = positiveNumber(args.ropeTheta, 'ropeTheta', cls, 10000);
    this.partialRotaryFactor = 1;
  }

  /** The head size. */
  get headDim(): number {
    return Math.floor(this.hiddenSize / this.numAttentionHeads);
  }

  override build(_inputShape: Shape | Shape[]): void {
    const H = this.headDim;
    const inv = Array.from({length: H / 2}, (_, i) =>
      Math.fround(1 / Math.fround(Math.pow(this.ropeTheta, Math.fround((2 * i) / H)))),
    );
    this.invFreq = this.addWeight(
      'inv_freq',
      [H / 2],
      'float32',
      initializers.constant({value: 0}),
      undefined,
      false,
    );
    const variable = this.invFreq;
    tf.tidy(() => {
      variable.write(tf.tensor1d(inv));
    });
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return singleShape(inputShape, this.name);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    return tf.clone(Array.isArray(inputs) ? inputs[0] : inputs);
  }

  /** The inverse frequencies it holds. */
  frequencies(): number[] {
    return Array.from((this.invFreq as LayerVariable).read().dataSync());
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      hiddenSize: this.hiddenSize,
      numAttentionHeads: this.numAttentionHeads,
      maxPositionEmbeddings: this.maxPositionEmbeddings,
      ropeTheta: this.ropeTheta,
      partialRotaryFactor: this.partialRotaryFactor,
    };
  }
}
