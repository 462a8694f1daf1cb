/** keras-hub's `LlamaAttention`: grouped-query attention with rotary positions and a key / value cache. */
import * as tf from '@tensorflow/tfjs-core';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {reshapeTo} from '../../ops/reshape';
import {groupedQueryAttention, updateKeyValueCache} from '../grouped_rotary_attention';
import {EinsumDense} from '../../layers/core/einsum_dense';
import {CompositeLayer} from '../../layers/engine/composite_layer';
import {
  getInitializer,
  Initializer,
  InitializerIdentifier,
  serializeObject,
} from '../../layers/engine/config_objects';
import {configNumber, defineContract, LayerContract} from '../../layers/engine/contract';
import {formatShape, Shape, singleShape} from '../../layers/engine/shapes';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';
import {
  LLAMA31_ROPE,
  llamaInverseFrequencies,
  LlamaRopeSmoothing,
  refuseRopeConfig,
  ropeSmoothing,
} from './llama_rope';

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
  static readonly className: string = 'LlamaAttention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.llama.llama_attention',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'LlamaAttention',
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
      refuseConfig: (c) => refuseRopeConfig(c),
    },
    configKeys: [
      'numQueryHeads',
      'numKeyValueHeads',
      'ropeMaxWavelength',
      ...LLAMA31_ROPE,
      'dropout',
      'kernelInitializer',
    ],
    weights: {
      sublayers: [
        {name: 'query', keras3: '_query_dense'},
        {name: 'key', keras3: '_key_dense'},
        {name: 'value', keras3: '_value_dense'},
        {name: 'attention_output', keras3: '_output_dense'},
      ],
      implied: (c) => ({
        values: 2 * configNumber(c, 'numQueryHeads') + 2 * configNumber(c, 'numKeyValueHeads'),
        option: 'numQueryHeads',
      }),
    },
    decoding: {
      kind: 'refused',
      reason:
        'it applies no causal mask of its own (LlamaTransformerDecoder builds the mask and holds ' +
        'the cache)',
    },
  });

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
    const proj = (name: string, heads: number) => this.makeProjection(name, heads, H);
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

  /**
   * The projections (EinsumDense: `query`, `key`, `value`, `attention_output`) and the head size,
   * or null before build: what the compiled decoding step's rule reads (llama3_step_rules.ts).
   */
  get projections(): {
    /** The query projection (`abc,cde->abde`). */
    query: EinsumDense;
    /** The key projection. */
    key: EinsumDense;
    /** The value projection. */
    value: EinsumDense;
    /** The output projection (`abcd,cde->abe`). */
    output: EinsumDense;
    /** The size of each head. */
    headDim: number;
  } | null {
    const {query, key, value, outputDense: output} = this;
    if (query == null || key == null || value == null || output == null) return null;
    return {query, key, value, output, headDim: this.headDim};
  }

  /**
   * The query, key or value projection `name` to `heads` heads of `H` (Llama's EinsumDense
   * `[width, heads, H]`; a family's attention may give `[width, heads * H]`: the call reshapes).
   */
  protected makeProjection(name: string, heads: number, H: number): EinsumDense {
    return new EinsumDense({
      name,
      equation: 'abc,cde->abde',
      outputShape: [null, heads, H],
      kernelInitializer: this.kernelInitializer,
    });
  }

  /** The rotary inverse frequencies for head size `H`, or null where the layer has no rope. */
  protected inverseFrequencies(H: number): readonly number[] | null {
    return llamaInverseFrequencies(H, this.ropeMaxWavelength, this.rope);
  }

  /** Rotary embedding of `x [B, T, heads, H]` at positions `start ..`: keras-hub's halves form. */
  private rotate(x: tf.Tensor, start: number): tf.Tensor {
    const T = x.shape[1] as number;
    const H = this.headDim;
    const angles = new Float32Array(T * H);
    const frequencies = this.inverseFrequencies(H);
    if (frequencies == null) return x;
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
      const heads = (p: tf.Tensor, n: number) => reshapeTo(p, [B, T, n, this.headDim]);
      const q = this.rotate(
        heads((this.query as EinsumDense).project(x), this.numQueryHeads),
        start,
      ); // [B, T, Nq, H]
      let k: tf.Tensor;
      let v: tf.Tensor;
      let newCache: tf.Tensor | null = null;
      if (cache != null && index == null) {
        [k, v] = tf.unstack(cache, 1);
      } else {
        const kNew = this.rotate(
          heads((this.key as EinsumDense).project(x), this.numKeyValueHeads),
          start,
        );
        const vNew = heads((this.value as EinsumDense).project(x), this.numKeyValueHeads);
        if (cache == null) {
          [k, v] = [kNew, vNew];
        } else {
          ({k, v, cache: newCache} = updateKeyValueCache(cache, kNew, vNew, start, this.name));
        }
      }
      const mask = (kwargs.attentionMask as tf.Tensor | undefined) ?? null;
      // Keras 3.15's Softmax zeroes the masked weights: a query whose keys are all masked (a
      // padded position a sliding window leaves without keys) attends to nothing, not uniformly
      let attended = groupedQueryAttention(
        q,
        k,
        v,
        mask == null ? null : tf.cast(mask, 'bool'),
        true,
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
export function checkHeads(cls: string, numQueryHeads: unknown, numKeyValueHeads: unknown): void {
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
