/** keras-hub's `SmolLM3Attention`: grouped-query attention, rotary on the layers that have it. */
import * as tf from '@tensorflow/tfjs-core';

import {EinsumDense} from '../../layers/core/einsum_dense';
import {defineContract, LayerContract} from '../../layers/engine/contract';
import {Shape, singleShape} from '../../layers/engine/shapes';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {LlamaAttention} from '../llama3/llama_attention';
import {
  SMOLLM3_ATTENTION_KEYS,
  SmolLM3AttentionOptions,
  smolLM3Options,
  usesRope,
} from './smollm3_options';
import {SmolLM3RotaryEmbedding} from './smollm3_rotary_embedding';

/** Options of {@link SmolLM3Attention} (keras-hub's arguments, camelCase). */
export interface SmolLM3AttentionArgs extends SmolLM3AttentionOptions {
  /** Layer name. */
  name?: string;
  /** Trainable. */
  trainable?: boolean;
}

/**
 * keras-hub's `SmolLM3Attention` (keras_hub/src/models/smollm3/smollm3_layers.py): grouped-query
 * attention (Dense projections `q_proj`, `k_proj`, `v_proj` to `heads * headDim`, EinsumDense
 * `o_proj`), rotary embeddings on queries and keys with the inverse frequencies of its
 * `rotary_embedding` ({@link SmolLM3RotaryEmbedding}) on the layers whose
 * `ropeLayerEnabledList` entry is true, none on the others (SmolLM3's no-rope layers); the mask
 * given by the caller ({@link SmolLM3DecoderLayer}), a key / value cache in eager calls:
 * {@link LlamaAttention}'s computation.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {SmolLM3Attention} from 'tfjs-attention';
 *
 * const attention = new SmolLM3Attention({
 *   hiddenSize: 16, numAttentionHeads: 4, numKeyValueHeads: 2,
 *   ropeLayerEnabledList: [true, false], layerTypes: ['full_attention', 'full_attention'],
 *   layerIdx: 1,
 * });
 * const y = attention.apply(tf.randomNormal([1, 5, 16])); // [1, 5, 16], no rotation
 * ```
 */
export class SmolLM3Attention extends LlamaAttention {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'SmolLM3Attention';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    ...LlamaAttention.contract,
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.smollm3.smollm3_layers',
        registeredName: 'SmolLM3Attention',
        keys: [
          'hidden_size',
          'num_attention_heads',
          'num_key_value_heads',
          'attention_bias',
          'attention_dropout',
          'rope_layer_enabled_list',
          'layer_types',
          'layer_idx',
          'max_position_embeddings',
          'rope_theta',
          'partial_rotary_factor',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
    configKeys: [...SMOLLM3_ATTENTION_KEYS],
    weights: {
      ...LlamaAttention.contract.weights,
      sublayers: null,
      keras3Folders: {
        query: 'q_proj',
        key: 'k_proj',
        value: 'v_proj',
        attention_output: 'o_proj',
        rotary_embedding: 'rotary_embedding',
      },
    },
  });

  /** The options (keras-hub's defaults filled in). */
  readonly options: Required<SmolLM3AttentionOptions>;
  /** Whether this layer rotates its queries and keys. */
  readonly useRope: boolean;
  /** The sublayer holding the inverse frequencies (`rotary_embedding`), created at build. */
  rotaryEmbedding: SmolLM3RotaryEmbedding | null = null;

  constructor(args: SmolLM3AttentionArgs) {
    const options = smolLM3Options(args, 'SmolLM3Attention');
    const rest = Object.fromEntries(
      Object.entries(args).filter(
        ([k]) => !(SMOLLM3_ATTENTION_KEYS as readonly string[]).includes(k),
      ),
    );
    super({
      ...rest,
      numQueryHeads: options.numAttentionHeads,
      numKeyValueHeads: options.numKeyValueHeads,
      ropeMaxWavelength: options.ropeTheta,
      kernelInitializer: 'glorotUniform',
    });
    this.options = options;
    this.useRope = usesRope(options);
  }

  override build(inputShape: Shape | Shape[]): void {
    super.build(inputShape);
    const o = this.options;
    this.rotaryEmbedding = this.addSublayer(
      new SmolLM3RotaryEmbedding({
        name: 'rotary_embedding',
        hiddenSize: o.hiddenSize,
        numAttentionHeads: o.numAttentionHeads,
        maxPositionEmbeddings: o.maxPositionEmbeddings,
        ropeTheta: o.ropeTheta,
        partialRotaryFactor: o.partialRotaryFactor,
      }),
      singleShape(inputShape, this.name),
    );
    this.built = true;
  }

  protected override makeProjection(name: string, heads: number, H: number): EinsumDense {
    return new EinsumDense({
      name,
      equation: 'abc,cd->abd',
      outputShape: [null, heads * H],
      kernelInitializer: this.kernelInitializer,
    });
  }

  /** The held inverse frequencies (keras-hub rotates with its weight), or null without rope. */
  protected override inverseFrequencies(): readonly number[] | null {
    return this.useRope ? (this.rotaryEmbedding as SmolLM3RotaryEmbedding).frequencies() : null;
  }

  /** The frequencies the compile rule rotates with, or null (no rope, or not built). */
  get stepFrequencies(): Float32Array | null {
    return this.useRope && this.rotaryEmbedding?.invFreq != null
      ? Float32Array.from(this.rotaryEmbedding.frequencies())
      : null;
  }

  override getConfig(): tf.serialization.ConfigDict {
    const base = super.getConfig();
    return {
      name: base.name,
      trainable: base.trainable,
      ...(base.quantizationMode != null ? {quantizationMode: base.quantizationMode} : {}),
      ...(this.options as unknown as tf.serialization.ConfigDict),
    };
  }
}
