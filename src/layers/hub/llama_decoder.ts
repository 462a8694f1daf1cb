import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {causalMask, combineMasks} from '../../ops/masking';
import {reshapeTo} from '../../ops/reshape';
import {EinsumDense} from '../core/einsum_dense';
import {CompositeLayer} from '../engine/composite_layer';
import {
  getInitializer,
  Initializer,
  InitializerIdentifier,
  serializeObject,
} from '../engine/config_objects';
import {CONFIG_SAMPLE, configNumber, LayerContract, NO_KERAS_MASK} from '../engine/contract';
import type {JsonObject} from '../engine/contract';
import {formatShape, Shape, singleShape} from '../engine/shapes';
import {HUB_NEEDS_KERAS3} from './hub_contract';
import {positiveNumber, refuseUnknownOptions} from './layer_options';
import {LlamaLayerNorm} from './llama_layer_norm';
import {kerasMaskOf, TransformerBlock} from './transformer_block';
import type {TransformerBlockArgs} from './transformer_block_args';

/** keras-hub's Llama 3.1 rope options: frequency smoothing, all four set or none. */
const LLAMA31_ROPE = [
  'ropeFrequencyAdjustmentFactor',
  'ropeLowFreqFactor',
  'ropeHighFreqFactor',
  'ropePretrainingSequenceLength',
] as const;

/** Llama 3.1's rope frequency smoothing (keras-hub's LlamaRotaryEmbedding), or all null. */
export interface LlamaRopeSmoothing {
  /** Long wavelengths' frequencies are divided by it. */
  ropeFrequencyAdjustmentFactor?: number | null;
  /** Wavelengths above `ropePretrainingSequenceLength / ropeLowFreqFactor` are adjusted. */
  ropeLowFreqFactor?: number | null;
  /** Wavelengths below `ropePretrainingSequenceLength / ropeHighFreqFactor` are kept. */
  ropeHighFreqFactor?: number | null;
  /** The context length of pretraining. */
  ropePretrainingSequenceLength?: number | null;
}

/** The smoothing options checked: all four positive numbers (high > low), or all null. */
function ropeSmoothing(args: LlamaRopeSmoothing, cls: string): Required<LlamaRopeSmoothing> {
  const values = LLAMA31_ROPE.map((k) => args[k] ?? null);
  if (values.every((v) => v == null)) {
    return {
      ropeFrequencyAdjustmentFactor: null,
      ropeLowFreqFactor: null,
      ropeHighFreqFactor: null,
      ropePretrainingSequenceLength: null,
    };
  }
  const [factor, low, high, length] = values;
  const ok =
    values.every((v) => typeof v === 'number' && Number.isFinite(v) && v > 0) &&
    (high as number) > (low as number);
  if (!ok) {
    throw new Error(
      `${cls}: expected ${LLAMA31_ROPE.join(', ')} all null or all positive numbers with ` +
        `ropeHighFreqFactor > ropeLowFreqFactor (keras-hub sets them together), received ` +
        LLAMA31_ROPE.map((k, i) => `${k}=${JSON.stringify(values[i])}`).join(', '),
    );
  }
  return {
    ropeFrequencyAdjustmentFactor: factor,
    ropeLowFreqFactor: low,
    ropeHighFreqFactor: high,
    ropePretrainingSequenceLength: length,
  };
}

/**
 * keras-hub's rotary inverse frequencies for head size `H` (LlamaRotaryEmbedding's
 * `_get_inverse_freq`): `wavelength^(-2i/H)`, with Llama 3.1's smoothing when set.
 */
export function llamaInverseFrequencies(
  H: number,
  wavelength: number,
  rope: Required<LlamaRopeSmoothing>,
): number[] {
  return Array.from({length: H / 2}, (_, i) => {
    let inv = Math.fround(1 / Math.fround(Math.pow(wavelength, Math.fround((2 * i) / H))));
    if (rope.ropeLowFreqFactor == null) return inv;
    const factor = rope.ropeFrequencyAdjustmentFactor as number;
    const low = rope.ropeLowFreqFactor;
    const high = rope.ropeHighFreqFactor as number;
    const length = rope.ropePretrainingSequenceLength as number;
    const wavelen = (2 * Math.PI) / inv;
    if (wavelen > length / low) inv = inv / factor;
    const smooth = (length / wavelen - low) / (high - low);
    const smoothed = (1 - smooth) * (inv / factor) + smooth * inv;
    if (wavelen >= length / high && wavelen <= length / low) inv = smoothed;
    return Math.fround(inv);
  });
}

/** Why a rope option's value is refused, or null (camelCase or snake_case key). */
export function refuseLlamaRope(key: string, value: unknown): string | null {
  const camel = key.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  if (camel === 'ropePositionScalingFactor' && value != null && value !== 1) {
    return 'keras-hub 0.32 ignores it in LlamaRotaryEmbedding; only 1 is accepted';
  }
  return null;
}

/** Options of {@link LlamaAttention}. */
export interface LlamaAttentionArgs {
  /** Layer name. */
  name?: string;
  /** Query heads; the head size is the input width / numQueryHeads. */
  numQueryHeads: number;
  /** Key / value heads (numQueryHeads a multiple of it). */
  numKeyValueHeads: number;
  /** The rotary embedding's longest wavelength. Default 10000. */
  ropeMaxWavelength?: number;
  /** Llama 3.1's rope smoothing: long wavelengths' frequencies are divided by it. */
  ropeFrequencyAdjustmentFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropeLowFreqFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropeHighFreqFactor?: number | null;
  /** Llama 3.1's rope smoothing (all four set, or none). */
  ropePretrainingSequenceLength?: number | null;
  /** Dropout of the attention output while training. Default 0. */
  dropout?: number;
  /** Initializer of the kernels. Default glorotUniform. */
  kernelInitializer?: InitializerIdentifier;
  /** Trainable. */
  trainable?: boolean;
}

/**
 * keras-hub's `LlamaAttention` (keras_hub/src/models/llama/llama_attention.py): grouped-query
 * attention without biases, rotary embeddings on queries and keys (positions from
 * `cacheUpdateIndex`), an attention mask given by the caller (it builds no causal mask of its
 * own: {@link LlamaTransformerDecoder} does), and a key / value cache
 * `[batch, 2, maxLength, numKeyValueHeads, headDim]` in eager calls, returned updated.
 * Sublayers (EinsumDense, no bias): `query`, `key`, `value`, `attention_output`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {LlamaAttention} from 'tfjs-attention';
 *
 * const attention = new LlamaAttention({numQueryHeads: 4, numKeyValueHeads: 2});
 * const y = attention.apply(tf.randomNormal([1, 5, 16])); // [1, 5, 16], every key attended
 * ```
 */
export class LlamaAttention extends CompositeLayer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'LlamaAttention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = {
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.llama.llama_attention',
        keys: [
          'num_query_heads',
          'num_key_value_heads',
          'rope_max_wavelength',
          'rope_position_scaling_factor',
          'rope_frequency_adjustment_factor',
          'rope_low_freq_factor',
          'rope_high_freq_factor',
          'rope_pretraining_sequence_length',
          'kernel_initializer',
          'dropout',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
      kerasOnlyKeys: [],
      refuseConfig: (c) => refuseRopeConfig(c),
    },
    configSample: () =>
      new LlamaAttention({
        name: CONFIG_SAMPLE,
        numQueryHeads: 2,
        numKeyValueHeads: 1,
        ropeMaxWavelength: 500000,
        ropeFrequencyAdjustmentFactor: 8,
        ropeLowFreqFactor: 1,
        ropeHighFreqFactor: 4,
        ropePretrainingSequenceLength: 8192,
        dropout: 0.1,
      }),
    weights: {
      sublayers: [
        {name: 'query', keras3: '_query_dense'},
        {name: 'key', keras3: '_key_dense'},
        {name: 'value', keras3: '_value_dense'},
        {name: 'attention_output', keras3: '_output_dense'},
      ],
      keras3Folders: {},
      implied: (c) => ({
        values: 2 * configNumber(c, 'num_query_heads') + 2 * configNumber(c, 'num_key_value_heads'),
        option: 'num_query_heads',
      }),
    },
    decoding: {
      kind: 'refused',
      reason:
        'it applies no causal mask of its own (LlamaTransformerDecoder builds the mask and holds ' +
        'the cache)',
    },
    makesKerasMask: NO_KERAS_MASK,
  };

  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The `ropeMaxWavelength` option. */
  readonly ropeMaxWavelength: number;
  /** Llama 3.1's rope smoothing options (all null when unset). */
  readonly rope: Required<LlamaRopeSmoothing>;
  /** The `dropout` option. */
  readonly dropout: number;
  /** The kernels' initializer. */
  readonly kernelInitializer: Initializer;
  private query: EinsumDense | null = null;
  private key: EinsumDense | null = null;
  private value: EinsumDense | null = null;
  private outputDense: EinsumDense | null = null;
  private headDim = 0;

  constructor(args: LlamaAttentionArgs) {
    super(args);
    const cls = 'LlamaAttention';
    refuseUnknownOptions(
      args,
      [
        'numQueryHeads',
        'numKeyValueHeads',
        'ropeMaxWavelength',
        ...LLAMA31_ROPE,
        'dropout',
        'kernelInitializer',
      ],
      cls,
    );
    checkHeads(cls, args.numQueryHeads, args.numKeyValueHeads);
    this.rope = ropeSmoothing(args, cls);
    this.numQueryHeads = args.numQueryHeads;
    this.numKeyValueHeads = args.numKeyValueHeads;
    this.ropeMaxWavelength = positiveNumber(args.ropeMaxWavelength, 'ropeMaxWavelength', cls, 1e4);
    const rate = args.dropout ?? 0;
    if (!(typeof rate === 'number' && rate >= 0 && rate < 1)) {
      throw new Error(`${cls}: expected dropout in [0, 1), received ${JSON.stringify(rate)}`);
    }
    this.dropout = rate;
    this.kernelInitializer = getInitializer(args.kernelInitializer, 'glorotUniform');
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    const hidden = shape[shape.length - 1];
    if (hidden == null || Math.floor(hidden / this.numQueryHeads) === 0) {
      throw new Error(
        `Layer '${this.name}' expected an input width >= numQueryHeads (${this.numQueryHeads}), ` +
          `received ${formatShape(shape)}`,
      );
    }
    const H = Math.floor(hidden / this.numQueryHeads);
    this.headDim = H;
    const proj = (name: string, heads: number) =>
      new EinsumDense({
        name,
        equation: 'abc,cde->abde',
        outputShape: [null, heads, H],
        kernelInitializer: this.kernelInitializer,
      });
    this.query = this.addSublayer(proj('query', this.numQueryHeads), shape);
    this.key = this.addSublayer(proj('key', this.numKeyValueHeads), shape);
    this.value = this.addSublayer(proj('value', this.numKeyValueHeads), shape);
    this.outputDense = this.addSublayer(
      new EinsumDense({
        name: 'attention_output',
        equation: 'abcd,cde->abe',
        outputShape: [null, hidden],
        kernelInitializer: this.kernelInitializer,
      }),
      [shape[0], shape[1], this.numQueryHeads, H],
    );
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return singleShape(inputShape, this.name);
  }

  /** Rotary embedding of `x [B, T, heads, H]` at positions `start ..`: keras-hub's halves form. */
  private rotate(x: tf.Tensor, start: number): tf.Tensor {
    const T = x.shape[1] as number;
    const H = this.headDim;
    const angles = new Float32Array(T * H);
    const frequencies = llamaInverseFrequencies(H, this.ropeMaxWavelength, this.rope);
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < H / 2; i++) {
        const inv = frequencies[i];
        angles[t * H + i] = angles[t * H + i + H / 2] = Math.fround((t + start) * inv);
      }
    }
    const a = tf.tensor(angles, [1, T, 1, H]);
    const [x1, x2] = tf.split(x, 2, 3);
    const rotated = tf.concat([tf.neg(x2), x1], 3);
    return tf.add(tf.mul(x, tf.cos(a)), tf.mul(rotated, tf.sin(a)));
  }

  /**
   * `x [B, T, hidden]`; `attentionMask [B, T, S]` (true / 1 = attend); with `cache`
   * `[B, 2, S, numKeyValueHeads, H]` and `cacheUpdateIndex`, returns `[output, cache]`.
   */
  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const cache = (kwargs.cache as tf.Tensor | undefined) ?? null;
      const index = (kwargs.cacheUpdateIndex as number | undefined) ?? null;
      if (cache == null && index != null) {
        throw new Error(`Layer '${this.name}': cacheUpdateIndex was given without a cache`);
      }
      const [B, T] = x.shape as number[];
      const start = index ?? 0;
      const q = this.rotate((this.query as EinsumDense).project(x), start); // [B, T, Nq, H]
      let k: tf.Tensor;
      let v: tf.Tensor;
      let newCache: tf.Tensor | null = null;
      if (cache != null && index == null) {
        [k, v] = tf.unstack(cache, 1);
      } else {
        const kNew = this.rotate((this.key as EinsumDense).project(x), start);
        const vNew = (this.value as EinsumDense).project(x);
        if (cache == null) {
          [k, v] = [kNew, vNew];
        } else {
          const S = cache.shape[2] as number;
          if (start + T > S) {
            throw new Error(
              `Layer '${this.name}': positions ${start}..${start + T - 1} do not fit a cache of ` +
                `${S} positions`,
            );
          }
          const [kc, vc] = tf.unstack(cache, 1);
          const put = (old: tf.Tensor, update: tf.Tensor) =>
            tf.concat(
              [
                tf.slice(old, [0, 0, 0, 0], [B, start, -1, -1]),
                update,
                tf.slice(old, [0, start + T, 0, 0], [B, S - start - T, -1, -1]),
              ],
              1,
            );
          k = put(kc, kNew);
          v = put(vc, vNew);
          newCache = tf.stack([k, v], 1);
        }
      }
      const S = k.shape[1] as number;
      const Nkv = this.numKeyValueHeads;
      const G = this.numQueryHeads / Nkv;
      const H = this.headDim;
      // keras' ops.repeat on the head axis gives query head j the key / value head
      // floor(j / G): the query heads are grouped per key / value head instead of copying keys
      const qg = reshapeTo(tf.transpose(reshapeTo(q, [B, T, Nkv, G, H]), [0, 2, 3, 1, 4]), [
        B,
        Nkv,
        G * T,
        H,
      ]);
      const kh = tf.transpose(k, [0, 2, 3, 1]); // [B, Nkv, H, S]
      const vh = tf.transpose(v, [0, 2, 1, 3]); // [B, Nkv, S, H]
      // scores [B, Nq, T, S] (query heads kv-major, as Keras orders them)
      let scores = reshapeTo(tf.mul(tf.matMul(qg, kh), 1 / Math.sqrt(H)), [
        B,
        this.numQueryHeads,
        T,
        S,
      ]);
      const mask = (kwargs.attentionMask as tf.Tensor | undefined) ?? null;
      if (mask != null) {
        const keep = tf.expandDims(tf.cast(mask, 'bool'), 1); // [B, 1, T, S]
        scores = tf.where(keep, scores, tf.fill(scores.shape, -1e9));
      }
      const probs = reshapeTo(tf.softmax(scores), [B, Nkv, G * T, S]);
      let attended = tf.transpose(
        reshapeTo(tf.matMul(probs, vh), [B, this.numQueryHeads, T, H]),
        [0, 2, 1, 3],
      ); // [B, T, Nq, H]
      if (kwargs.training === true && this.dropout > 0) {
        attended = tf.dropout(attended, this.dropout);
      }
      const out = (this.outputDense as EinsumDense).project(attended);
      return newCache == null ? out : [out, newCache];
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      ropeMaxWavelength: this.ropeMaxWavelength,
      ...this.rope,
      dropout: this.dropout,
      kernelInitializer: serializeObject(this.kernelInitializer),
    };
  }
}

/** Head counts: positive integers, the query heads a multiple of the key / value heads. */
function checkHeads(cls: string, numQueryHeads: unknown, numKeyValueHeads: unknown): void {
  for (const [key, v] of [
    ['numQueryHeads', numQueryHeads],
    ['numKeyValueHeads', numKeyValueHeads],
  ] as const) {
    if (!(typeof v === 'number' && Number.isInteger(v) && v > 0)) {
      throw new Error(
        `${cls}: expected ${key} to be a positive integer, received ${JSON.stringify(v)}`,
      );
    }
  }
  if ((numQueryHeads as number) % (numKeyValueHeads as number) !== 0) {
    throw new Error(
      `${cls}: expected numQueryHeads (${numQueryHeads}) to be a multiple of ` +
        `numKeyValueHeads, received ${numKeyValueHeads}`,
    );
  }
}

/** A snake_case Keras config's refused rope options, as one reason, or null. */
function refuseRopeConfig(c: JsonObject): string | null {
  for (const [k, v] of Object.entries(c)) {
    const why = refuseLlamaRope(k, v);
    if (why != null) return `has ${k} = ${JSON.stringify(v)}: ${why}`;
  }
  return null;
}

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
  static readonly contract: LayerContract = {
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.llama.llama_decoder',
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
      kerasOnlyKeys: [],
      refuseConfig: (c) => refuseRopeConfig(c),
    },
    configSample: () =>
      new LlamaTransformerDecoder({
        name: CONFIG_SAMPLE,
        intermediateDim: 1,
        numQueryHeads: 1,
        numKeyValueHeads: 1,
        ropePositionScalingFactor: 1,
        ropeFrequencyAdjustmentFactor: 8,
        ropeLowFreqFactor: 1,
        ropeHighFreqFactor: 4,
        ropePretrainingSequenceLength: 8192,
        inputRoles: ['decoderSequence'],
      }),
    weights: {
      sublayers: null,
      keras3Folders: {self_attention: '_self_attention_layer'},
      // the three feed-forward kernels have intermediate_dim columns or rows, at least
      implied: (c) => ({
        values: 3 * configNumber(c, 'intermediate_dim'),
        option: 'intermediate_dim',
      }),
    },
    decoding: {
      kind: 'cached',
      refuse: (_config, node) =>
        node.inputTensors.length > 2 || node.inputTensors[1]?.dtype === 'float32'
          ? `it is called on ${node.inputTensors.length} inputs (masks beyond a padding mask)`
          : null,
      cacheShape: (config, input, batch, maxLength) => {
        const q = (config.numQueryHeads ?? config.num_query_heads) as number;
        const kv = (config.numKeyValueHeads ?? config.num_key_value_heads) as number;
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
    makesKerasMask: NO_KERAS_MASK,
  };

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
