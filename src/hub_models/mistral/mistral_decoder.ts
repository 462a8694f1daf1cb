/** keras-hub's `MistralTransformerDecoder`: Llama's decoder block with a sliding window. */
import * as tf from '@tensorflow/tfjs-core';

import {causalMask, slidingWindowMask} from '../../ops/masking';
import {defineContract, LayerContract} from '../../layers/engine/contract';
import {formatShape, Shape} from '../../layers/engine/shapes';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import type {LlamaAttention} from '../llama3/llama_attention';
import {LlamaTransformerDecoder} from '../llama3/llama_decoder';
import type {LlamaTransformerDecoderArgs} from '../llama3/llama_decoder';
import type {LlamaLayerNorm} from '../llama3/llama_layer_norm';
import {CachedMistralAttention} from './mistral_attention';
import {MistralLayerNormalization} from './mistral_layer_norm';
import {mistralOptions, refuseHeadDim} from './mistral_options';
import type {MistralOptions} from './mistral_options';

/** Options of {@link MistralTransformerDecoder} (keras-hub's arguments, camelCase). */
export interface MistralTransformerDecoderArgs
  extends
    Omit<
      LlamaTransformerDecoderArgs,
      | 'ropePositionScalingFactor'
      | 'ropeFrequencyAdjustmentFactor'
      | 'ropeLowFreqFactor'
      | 'ropeHighFreqFactor'
      | 'ropePretrainingSequenceLength'
    >,
    MistralOptions {}

const LLAMA_ONLY = [
  'ropeFrequencyAdjustmentFactor',
  'ropeLowFreqFactor',
  'ropeHighFreqFactor',
  'ropePretrainingSequenceLength',
] as const;

/**
 * keras-hub's `MistralTransformerDecoder` (keras_hub/src/models/mistral/
 * mistral_transformer_decoder.py): {@link LlamaTransformerDecoder}'s pre-norm block (RMS norms,
 * causal grouped-query rotary self-attention, gated SiLU feed-forward) whose causal mask is banded
 * by `slidingWindow`: the query at position `i` attends to the keys at `j` with
 * `i - slidingWindow < j <= i` (keras-hub's `i < j + sliding_window`), in full calls and in
 * cached decoding alike (the cache keeps every position; the mask leaves the old ones out).
 * Sublayers (keras-hub's names): `self_attention` ({@link CachedMistralAttention}),
 * `self_attention_layernorm`, `feedforward_intermediate_dense`, `feedforward_gate_dense`,
 * `feedforward_output_dense`, `feedforward_layernorm` ({@link MistralLayerNormalization}).
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {MistralTransformerDecoder} from 'tfjs-attention';
 *
 * const decoder = new MistralTransformerDecoder({
 *   intermediateDim: 32,
 *   numQueryHeads: 4,
 *   numKeyValueHeads: 2,
 *   slidingWindow: 3,
 * });
 * const y = decoder.apply(tf.randomNormal([1, 6, 16])); // [1, 6, 16]
 * ```
 */
export class MistralTransformerDecoder extends LlamaTransformerDecoder {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'MistralTransformerDecoder';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    ...LlamaTransformerDecoder.contract,
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.mistral.mistral_transformer_decoder',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'MistralTransformerDecoder',
        keys: [
          'intermediate_dim',
          'num_query_heads',
          'rope_max_wavelength',
          'rope_scaling_factor',
          'num_key_value_heads',
          'sliding_window',
          'head_dim',
          'activation',
          'layer_norm_epsilon',
          'kernel_initializer',
          'dropout',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: LlamaTransformerDecoder.contract.keras.call,
    },
    configKeys: [
      'intermediateDim',
      'dropout',
      'activation',
      'layerNormEpsilon',
      'kernelInitializer',
      'kernelRegularizer',
      'seed',
      'inputRoles',
      'numQueryHeads',
      'numKeyValueHeads',
      'ropeMaxWavelength',
      'ropeScalingFactor',
      'slidingWindow',
      'headDim',
    ],
  });

  /** The `slidingWindow` option: null, or how many positions a query sees (itself included). */
  readonly slidingWindow: number | null;
  /** The `headDim` option (null: the width / numQueryHeads). */
  readonly headDimOption: number | null;
  /** The `ropeScalingFactor` option (1). */
  readonly ropeScalingFactor: number;

  constructor(args: MistralTransformerDecoderArgs) {
    const cls = 'MistralTransformerDecoder';
    if (args == null) throw new Error(`${cls}: expected {intermediateDim, numQueryHeads, ...}`);
    for (const key of LLAMA_ONLY) {
      if (key in args) {
        throw new Error(`${cls}: ${key} is not an option of keras-hub's Mistral decoder`);
      }
    }
    const {slidingWindow, headDim, ropeScalingFactor, ...llama} = args;
    super(llama);
    const options = mistralOptions({slidingWindow, headDim, ropeScalingFactor}, cls);
    this.slidingWindow = options.slidingWindow;
    this.headDimOption = options.headDim;
    this.ropeScalingFactor = options.ropeScalingFactor;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = this.shapesByRole(inputShape).get('decoderSequence');
    const hidden = shape?.[2];
    if (shape != null && hidden != null) {
      const why = refuseHeadDim(this.headDimOption, hidden, this.numQueryHeads);
      if (why != null) {
        throw new Error(`Layer '${this.name}': ${why} for input ${formatShape(shape)}`);
      }
    }
    super.build(inputShape);
  }

  protected override makeSelfAttention(): LlamaAttention {
    return new CachedMistralAttention({
      name: 'self_attention',
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      ropeMaxWavelength: this.ropeMaxWavelength,
      ropeScalingFactor: this.ropeScalingFactor,
      slidingWindow: this.slidingWindow,
      headDim: this.headDimOption,
      dropout: this.dropout,
      kernelInitializer: this.kernelInitializer,
    });
  }

  protected override makeNorm(name: string): LlamaLayerNorm {
    return new MistralLayerNormalization({name, epsilon: this.layerNormEpsilon});
  }

  /** Causal, and banded by the sliding window (keras-hub's `i < j + sliding_window`). */
  protected override selfAttentionMask(T: number, S: number, start: number): tf.Tensor {
    if (this.slidingWindow == null) return causalMask(T, S, start);
    return tf.tidy(() =>
      tf.logicalAnd(
        causalMask(T, S, start),
        slidingWindowMask(T, S, this.slidingWindow as number, start),
      ),
    );
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config = {...super.getConfig()};
    for (const key of LLAMA_ONLY) delete config[key];
    return {
      ...config,
      ropeScalingFactor: this.ropeScalingFactor,
      slidingWindow: this.slidingWindow,
      headDim: this.headDimOption,
    };
  }
}
