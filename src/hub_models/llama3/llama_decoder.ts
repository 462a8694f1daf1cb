import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {causalMask, combineMasks} from '../../ops/masking';
import {reshapeTo} from '../../ops/reshape';
import {configNumber, defineContract, LayerContract} from '../../layers/engine/contract';
import {formatShape, Shape} from '../../layers/engine/shapes';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';
import {LlamaLayerNorm} from './llama_layer_norm';
import {kerasMaskOf, TransformerBlock} from '../../layers/hub/transformer_block';
import type {TransformerBlockArgs} from '../../layers/hub/transformer_block_args';
import {checkHeads, LlamaAttention} from './llama_attention';
import {
  LLAMA31_ROPE,
  LlamaRopeSmoothing,
  refuseLlamaRope,
  refuseRopeConfig,
  ropeSmoothing,
} from './llama_rope';

/** Options of {@link LlamaTransformerDecoder} (keras-hub's arguments, camelCase). */
export interface LlamaTransformerDecoderArgs extends Omit<
  TransformerBlockArgs,
  'numHeads' | 'normalizeFirst'
> {
  /** Query heads; the head size is the input width / numQueryHeads. */
  numQueryHeads: number;
  /** Key / value heads (numQueryHeads a multiple of it). */
  numKeyValueHeads: number;
  /** The rotary embedding's longest wavelength. Default 10000. */
  ropeMaxWavelength?: number;
  /** keras-hub 0.32 ignores it (LlamaRotaryEmbedding drops it); only 1 or null is accepted. */
  ropePositionScalingFactor?: number | null;
  /** Llama 3.1's rope smoothing: long wavelengths' frequencies are divided by it. */
  ropeFrequencyAdjustmentFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropeLowFreqFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropeHighFreqFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropePretrainingSequenceLength?: number | null;
}

/** The decoder's inputs, in its call's argument order (camelCase). */
const LLAMA_DECODER_ROLES = ['decoderSequence', 'decoderPaddingMask', 'decoderAttentionMask'];

const LLAMA_OWN = [
  'numQueryHeads',
  'numKeyValueHeads',
  'ropeMaxWavelength',
  'ropePositionScalingFactor',
  ...LLAMA31_ROPE,
];

/**
 * keras-hub's `LlamaTransformerDecoder` (keras_hub/src/models/llama/llama_decoder.py): pre-norm
 * blocks with RMS norms ({@link LlamaLayerNorm}), causal grouped-query self-attention with
 * rotary embeddings ({@link LlamaAttention}), and a gated feed-forward
 * `down(up(x) * silu(gate(x)))` without biases; keys masked by `decoderPaddingMask [B, T]`.
 * Cached decoding (eager): `apply(x, {selfAttentionCache, selfAttentionCacheUpdateIndex})`
 * returns `[output, cache]`, the cache `[B, 2, maxLength, numKeyValueHeads, headDim]`.
 * Sublayers (keras-hub's names): `self_attention`, `self_attention_layernorm`,
 * `feedforward_intermediate_dense`, `feedforward_gate_dense`, `feedforward_output_dense`,
 * `feedforward_layernorm`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {LlamaTransformerDecoder} from 'tfjs-attention';
 *
 * const decoder = new LlamaTransformerDecoder({
 *   intermediateDim: 32,
 *   numQueryHeads: 4,
 *   numKeyValueHeads: 2,
 * });
 * const y = decoder.apply(tf.randomNormal([1, 6, 16])); // [1, 6, 16]
 * ```
 */
export class LlamaTransformerDecoder extends TransformerBlock {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'LlamaTransformerDecoder';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.llama.llama_decoder',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'LlamaTransformerDecoder',
        keys: [
          'intermediate_dim',
          'num_query_heads',
          'num_key_value_heads',
          'rope_max_wavelength',
          'rope_position_scaling_factor',
          'rope_frequency_adjustment_factor',
          'rope_low_freq_factor',
          'rope_high_freq_factor',
          'rope_pretraining_sequence_length',
          'activation',
          'layer_norm_epsilon',
          'kernel_initializer',
          'dropout',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'keyword', roles: LLAMA_DECODER_ROLES, positional: 1, options: {training: null}},
      refuseConfig: (c) => refuseRopeConfig(c),
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
      ...LLAMA31_ROPE,
    ],
    weights: {
      keras3Folders: {self_attention: '_self_attention_layer'},
      // the three feed-forward kernels have intermediate_dim columns or rows, at least
      implied: (c) => ({
        values: 3 * configNumber(c, 'intermediateDim'),
        option: 'intermediateDim',
      }),
    },
    decoding: {
      kind: 'cached',
      refuse: (_config, node) =>
        node.inputTensors.length > 2 || node.inputTensors[1]?.dtype === 'float32'
          ? `it is called on ${node.inputTensors.length} inputs (masks beyond a padding mask)`
          : null,
      cacheShape: (config, input, batch, maxLength) => {
        const q = config.numQueryHeads as number;
        const kv = config.numKeyValueHeads as number;
        return [batch, 2, maxLength, kv, Math.floor((input[input.length - 1] as number) / q)];
      },
      cacheKwargs: (cache, index, keyMask) => ({
        selfAttentionCache: cache,
        selfAttentionCacheUpdateIndex: index,
        ...(keyMask != null ? {decoderAttentionMask: keyMask} : {}),
      }),
      readsKerasMasks: true,
      masksQueries: false,
      paddingMaskRole: 'decoderPaddingMask',
    },
  });

  protected readonly roleNames = LLAMA_DECODER_ROLES;
  protected readonly positionalRoles = 1;
  protected readonly tensorOptions = ['decoderPaddingMask', 'decoderAttentionMask'] as const;
  protected readonly otherOptions = [
    'selfAttentionCache',
    'selfAttentionCacheUpdateIndex',
  ] as const;

  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The `ropeMaxWavelength` option. */
  readonly ropeMaxWavelength: number;
  /** Llama 3.1's rope smoothing options (all null when unset). */
  readonly rope: Required<LlamaRopeSmoothing>;
  /** The self-attention sublayer (`self_attention`), created at build. */
  selfAttention: LlamaAttention | null = null;
  private selfAttentionNorm: LlamaLayerNorm | null = null;
  private gate: layers.Layer | null = null;

  constructor(args: LlamaTransformerDecoderArgs) {
    const cls = 'LlamaTransformerDecoder';
    if (args == null) throw new Error(`${cls}: expected {intermediateDim, numQueryHeads, ...}`);
    for (const key of LLAMA_OWN) {
      const why = refuseLlamaRope(key, (args as unknown as Record<string, unknown>)[key]);
      if (why != null) {
        throw new Error(
          `${cls}: ${key}=${JSON.stringify((args as unknown as Record<string, unknown>)[key])} ` +
            `is not accepted: ${why}`,
        );
      }
    }
    refuseUnknownOptions(
      {...args, numHeads: undefined, normalizeFirst: undefined},
      [
        ...LLAMA_OWN,
        'intermediateDim',
        'dropout',
        'activation',
        'layerNormEpsilon',
        'kernelInitializer',
        'kernelRegularizer',
        'seed',
        'inputRoles',
        'numHeads',
        'normalizeFirst',
      ],
      cls,
    );
    const {
      numQueryHeads,
      numKeyValueHeads,
      ropeMaxWavelength,
      ropePositionScalingFactor,
      ropeFrequencyAdjustmentFactor,
      ropeLowFreqFactor,
      ropeHighFreqFactor,
      ropePretrainingSequenceLength,
      ...block
    } = args;
    void ropePositionScalingFactor;
    const rope = ropeSmoothing(
      {
        ropeFrequencyAdjustmentFactor,
        ropeLowFreqFactor,
        ropeHighFreqFactor,
        ropePretrainingSequenceLength,
      },
      cls,
    );
    checkHeads(cls, numQueryHeads, numKeyValueHeads);
    super({
      activation: 'silu',
      layerNormEpsilon: 1e-5,
      ...block,
      numHeads: numQueryHeads,
      normalizeFirst: true,
    });
    this.numQueryHeads = numQueryHeads;
    this.numKeyValueHeads = numKeyValueHeads;
    this.ropeMaxWavelength = positiveNumber(ropeMaxWavelength, 'ropeMaxWavelength', cls, 1e4);
    this.rope = rope;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shapes = this.shapesByRole(inputShape);
    const shape = shapes.get('decoderSequence') as Shape;
    if (shape == null || shape.length !== 3) {
      throw new Error(
        `Layer '${this.name}' expected decoderSequence of shape [batch, length, hidden], ` +
          `received ${shape == null ? 'none' : formatShape(shape)}`,
      );
    }
    this.headSize(shape[2]);
    const width = shape[2] as number;
    this.selfAttention = this.addSublayer(
      new LlamaAttention({
        name: 'self_attention',
        numQueryHeads: this.numQueryHeads,
        numKeyValueHeads: this.numKeyValueHeads,
        ropeMaxWavelength: this.ropeMaxWavelength,
        ...this.rope,
        dropout: this.dropout,
        kernelInitializer: this.kernelInitializer,
      }),
      shape,
    );
    const norm = (name: string) => new LlamaLayerNorm({name, epsilon: this.layerNormEpsilon});
    this.selfAttentionNorm = this.addSublayer(norm('self_attention_layernorm'), shape);
    const dense = (name: string, units: number) =>
      layers.dense({
        name,
        units,
        useBias: false,
        kernelInitializer: this.kernelInitializer,
        kernelRegularizer: this.kernelRegularizer ?? undefined,
      });
    const inner = [shape[0], shape[1], this.intermediateDim];
    this.feedforwardIntermediate = this.addSublayer(
      dense('feedforward_intermediate_dense', this.intermediateDim),
      shape,
    );
    this.gate = this.addSublayer(dense('feedforward_gate_dense', this.intermediateDim), shape);
    this.feedforwardOutput = this.addSublayer(dense('feedforward_output_dense', width), inner);
    this.feedforwardNorm = this.addSublayer(norm('feedforward_layernorm'), shape);
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return this.shapesByRole(inputShape).get('decoderSequence') as Shape;
  }

  /**
   * The sublayers of one call in call order (the attention's norm, the attention, the
   * feed-forward's norm, its gate, up and down projections), or null before build: what the
   * compiled decoding step's rule reads (llama3_step_rules.ts).
   */
  get stepParts(): {
    attentionNorm: LlamaLayerNorm;
    attention: LlamaAttention;
    ffNorm: layers.Layer;
    gate: layers.Layer;
    up: layers.Layer;
    down: layers.Layer;
  } | null {
    const {selfAttentionNorm: attentionNorm, selfAttention: attention, gate} = this;
    const [ffNorm, up, down] = [
      this.feedforwardNorm,
      this.feedforwardIntermediate,
      this.feedforwardOutput,
    ];
    if (attentionNorm == null || attention == null || gate == null) return null;
    if (ffNorm == null || up == null || down == null) return null;
    return {attentionNorm, attention, ffNorm, gate, up, down};
  }

  /** Eager calls return a tensor, or `[output, cache]` with `selfAttentionCache`. */
  override apply(
    inputs: tf.Tensor | tf.Tensor[],
    kwargs: Kwargs & {selfAttentionCache: tf.Tensor},
  ): [tf.Tensor, tf.Tensor];
  override apply(inputs: tf.Tensor | tf.Tensor[], kwargs?: Kwargs): tf.Tensor;
  override apply(inputs: SymbolicTensor | SymbolicTensor[], kwargs?: Kwargs): SymbolicTensor;
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs: Kwargs = {},
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    return super.apply(inputs, kwargs);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    this.checkOptions(kwargs);
    return tf.tidy(() => {
      const list = Array.isArray(inputs) ? inputs : [inputs];
      const roles = this.rolesOf(list.length);
      const parts = new Map(roles.map((r, i) => [r, list[i]]));
      const option = (name: string) =>
        (kwargs[name] as tf.Tensor | undefined) ?? parts.get(name) ?? null;
      const x = parts.get('decoderSequence') as tf.Tensor;
      if (x.rank !== 3 || x.dtype !== 'float32') {
        throw new Error(
          `Layer '${this.name}' expected a float32 decoderSequence of shape [batch, length, ` +
            `hidden], received ${x.dtype} of shape ${formatShape(x.shape)}`,
        );
      }
      const cache = (kwargs.selfAttentionCache as tf.Tensor | undefined) ?? null;
      const index = (kwargs.selfAttentionCacheUpdateIndex as number | undefined) ?? null;
      if (cache == null && index != null) {
        throw new Error(
          `Layer '${this.name}': selfAttentionCacheUpdateIndex was given without a selfAttentionCache`,
        );
      }
      const [B, T] = x.shape;
      const training = kwargs.training === true;
      const padding =
        option('decoderPaddingMask') ??
        kerasMaskOf(x, kwargs.mask, roles.indexOf('decoderSequence'));
      const attentionMask = option('decoderAttentionMask');
      this.checkMaskShape(padding, [B, T], 'decoderPaddingMask');
      const S = cache == null ? T : (cache.shape[2] as number);
      this.checkMaskShape(attentionMask, [B, T, S], 'decoderAttentionMask');
      const mask = combineMasks(
        padding && tf.expandDims(padding, 1),
        attentionMask,
        tf.expandDims(causalMask(T, S, index ?? 0), 0),
      ) as tf.Tensor;
      const attended = (this.selfAttention as LlamaAttention).call(
        (this.selfAttentionNorm as LlamaLayerNorm).call(x, {}),
        {
          attentionMask: mask,
          cache: cache ?? undefined,
          cacheUpdateIndex: index ?? undefined,
          training,
        },
      );
      const [a, newCache] = Array.isArray(attended) ? attended : [attended, null];
      const h = tf.add(x, this.drop(a, training));
      const normed = (this.feedforwardNorm as LlamaLayerNorm).call(h, {});
      const width = normed.shape[2] as number;
      const rows = reshapeTo(normed, [-1, width]);
      const g = (this.gate as layers.Layer).call(rows, {}) as tf.Tensor;
      const up = (this.feedforwardIntermediate as layers.Layer).call(rows, {}) as tf.Tensor;
      const down = (this.feedforwardOutput as layers.Layer).call(
        tf.mul(up, tf.mul(g, tf.sigmoid(g))),
        {},
      ) as tf.Tensor;
      const output = tf.add(h, this.drop(reshapeTo(down, [B, T, width]), training));
      this.lastOutputCount = newCache == null ? 1 : 2;
      return newCache == null ? output : [output, newCache];
    });
  }

  override computeMask(
    inputs: tf.Tensor | tf.Tensor[],
    mask?: tf.Tensor | tf.Tensor[],
  ): tf.Tensor | tf.Tensor[] {
    return this.outputMasks(inputs, mask, 'decoderSequence');
  }

  override getConfig(): tf.serialization.ConfigDict {
    const {numHeads, normalizeFirst, biasInitializer, biasRegularizer, ...rest} =
      this.blockConfig();
    void [numHeads, normalizeFirst, biasInitializer, biasRegularizer];
    return {
      ...rest,
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      ropeMaxWavelength: this.ropeMaxWavelength,
      ...this.rope,
    };
  }
}
