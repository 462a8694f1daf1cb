/**
 * keras-hub's `QwenAttention`: grouped-query attention with query / key / value biases, rotary
 * positions (linear scaling), an optional sliding window and a key / value cache.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

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
import {checkHeads} from '../llama3/llama_attention';

/** Options of {@link QwenAttention} (keras-hub's arguments, camelCase). */
export interface QwenAttentionArgs {
  /** Layer name. */
  name?: string;
  /** Query heads; the head size is the input width / numQueryHeads. */
  numQueryHeads: number;
  /** Key / value heads (numQueryHeads a multiple of it). */
  numKeyValueHeads: number;
  /** The rotary embedding's longest wavelength. Default 10000. */
  ropeMaxWavelength?: number;
  /** Positions are divided by it in the rotary embedding (linear scaling). Default 1. */
  ropeScalingFactor?: number;
  /** Dropout of the attention output while training. Default 0. */
  dropout?: number;
  /** Initializer of the kernels. Default glorotUniform. */
  kernelInitializer?: InitializerIdentifier;
  /** Initializer of the query / key / value biases. Default zeros. */
  biasInitializer?: InitializerIdentifier;
  /** Attend only to the last `slidingWindowSize` positions. Default false. */
  useSlidingWindowAttention?: boolean;
  /** The sliding window's width (keys at distance < it). Default 4096. */
  slidingWindowSize?: number;
  /** Trainable. */
  trainable?: boolean;
}

const QWEN_ATTENTION_OPTIONS = [
  'numQueryHeads',
  'numKeyValueHeads',
  'ropeMaxWavelength',
  'ropeScalingFactor',
  'dropout',
  'kernelInitializer',
  'biasInitializer',
  'useSlidingWindowAttention',
  'slidingWindowSize',
] as const;

/**
 * keras-hub's rotary inverse frequencies (RotaryEmbedding's `_get_inverse_freq`, linear type) for
 * head size `H`: `wavelength^(-2i/H) / scalingFactor`, in float32 as keras-hub computes them.
 */
export function qwenInverseFrequencies(
  H: number,
  wavelength: number,
  scalingFactor: number,
): Float32Array {
  return Float32Array.from({length: H / 2}, (_, i) =>
    Math.fround(
      Math.fround(Math.pow(Math.fround(wavelength), -Math.fround((2 * i) / H))) / scalingFactor,
    ),
  );
}

/** The sliding window's width as a positive whole number, or an error naming it. */
export function windowSize(value: unknown, key: string, cls: string, fallback: number): number {
  const v = value ?? fallback;
  if (!(typeof v === 'number' && Number.isInteger(v) && v > 0)) {
    throw new Error(
      `${cls}: expected ${key} to be a positive integer, received ${JSON.stringify(v)}`,
    );
  }
  return v;
}

/**
 * keras-hub's `QwenAttention` (keras_hub/src/models/qwen/qwen_attention.py): grouped-query
 * attention with biases on the query, key and value projections (none on the output), rotary
 * embeddings on queries and keys (positions from `cacheUpdateIndex`, divided by
 * `ropeScalingFactor`), the caller's attention mask (the decoder builds the causal one) and, with
 * `useSlidingWindowAttention`, a sliding window: the query at position i attends to keys j with
 * |i - j| < `slidingWindowSize` (keras-hub's TensorFlow path; its fused JAX / torch path ignores
 * the window). Eager calls with `cache [batch, 2, maxLength, numKeyValueHeads, headDim]` and
 * `cacheUpdateIndex` return `[output, cache]`. Sublayers (EinsumDense): `query`, `key`, `value`
 * (with biases), `attention_output`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {QwenAttention} from 'tfjs-attention';
 *
 * const attention = new QwenAttention({numQueryHeads: 4, numKeyValueHeads: 2});
 * const y = attention.apply(tf.randomNormal([1, 5, 16])); // [1, 5, 16], every key attended
 * ```
 */
export class QwenAttention extends CompositeLayer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className: string = 'QwenAttention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.qwen.qwen_attention',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'QwenAttention',
        keys: [
          'num_query_heads',
          'num_key_value_heads',
          'rope_max_wavelength',
          'rope_scaling_factor',
          'kernel_initializer',
          'bias_initializer',
          'dropout',
          'use_sliding_window_attention',
          'sliding_window_size',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
    configKeys: [...QWEN_ATTENTION_OPTIONS],
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
        'it applies no causal mask of its own (QwenTransformerDecoder builds the mask and holds ' +
        'the cache)',
    },
  });

  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The `ropeMaxWavelength` option. */
  readonly ropeMaxWavelength: number;
  /** The `ropeScalingFactor` option. */
  readonly ropeScalingFactor: number;
  /** The `dropout` option. */
  readonly dropout: number;
  /** The kernels' initializer. */
  readonly kernelInitializer: Initializer;
  /** The biases' initializer. */
  readonly biasInitializer: Initializer;
  /** The `useSlidingWindowAttention` option. */
  readonly useSlidingWindowAttention: boolean;
  /** The `slidingWindowSize` option. */
  readonly slidingWindowSize: number;
  /** The query projection (`query`), created at build. */
  query: EinsumDense | null = null;
  /** The key projection (`key`), created at build. */
  key: EinsumDense | null = null;
  /** The value projection (`value`), created at build. */
  value: EinsumDense | null = null;
  /** The output projection (`attention_output`), created at build. */
  outputDense: EinsumDense | null = null;
  /** The head size, known at build. */
  headDim = 0;

  constructor(args: QwenAttentionArgs, cls = 'QwenAttention', known: readonly string[] = []) {
    super(args);
    refuseUnknownOptions(args, [...QWEN_ATTENTION_OPTIONS, ...known], cls);
    checkHeads(cls, args.numQueryHeads, args.numKeyValueHeads);
    this.numQueryHeads = args.numQueryHeads;
    this.numKeyValueHeads = args.numKeyValueHeads;
    this.ropeMaxWavelength = positiveNumber(args.ropeMaxWavelength, 'ropeMaxWavelength', cls, 1e4);
    this.ropeScalingFactor = positiveNumber(args.ropeScalingFactor, 'ropeScalingFactor', cls, 1);
    const rate = args.dropout ?? 0;
    if (!(typeof rate === 'number' && rate >= 0 && rate < 1)) {
      throw new Error(`${cls}: expected dropout in [0, 1), received ${JSON.stringify(rate)}`);
    }
    this.dropout = rate;
    this.kernelInitializer = getInitializer(args.kernelInitializer, 'glorotUniform');
    this.biasInitializer = getInitializer(args.biasInitializer, 'zeros');
    const use = args.useSlidingWindowAttention ?? false;
    if (typeof use !== 'boolean') {
      throw new Error(
        `${cls}: expected useSlidingWindowAttention to be true or false, received ${JSON.stringify(use)}`,
      );
    }
    this.useSlidingWindowAttention = use;
    this.slidingWindowSize = windowSize(args.slidingWindowSize, 'slidingWindowSize', cls, 4096);
  }

  /** The sliding window in force (keys at distance < it), or null. */
  get window(): number | null {
    return this.useSlidingWindowAttention ? this.slidingWindowSize : null;
  }

  /** Whether the query, key and value projections have biases (Qwen 2.5: yes). */
  protected get projectionBias(): boolean {
    return true;
  }

  /** The head size for an input width (Qwen 2.5: width / numQueryHeads). */
  protected headDimOf(hidden: number): number {
    return Math.floor(hidden / this.numQueryHeads);
  }

  /** Builds what comes after the projections (Qwen 3's query / key norms). */
  protected buildHeadParts(_shape: Shape): void {}

  /** A query or key `[B, T, heads, H]` before its rotation (Qwen 3 normalises it here). */
  protected beforeRotation(x: tf.Tensor, _which: 'query' | 'key'): tf.Tensor {
    return x;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    const hidden = shape[shape.length - 1];
    const H = hidden == null ? 0 : this.headDimOf(hidden);
    if (hidden == null || H === 0) {
      throw new Error(
        `Layer '${this.name}' expected an input width >= numQueryHeads (${this.numQueryHeads}), ` +
          `received ${formatShape(shape)}`,
      );
    }
    this.headDim = H;
    const bias = this.projectionBias;
    const proj = (name: string, heads: number) =>
      new EinsumDense({
        name,
        equation: 'abc,cde->abde',
        outputShape: [null, heads, H],
        ...(bias ? {biasAxes: 'de'} : {}),
        kernelInitializer: this.kernelInitializer,
        biasInitializer: this.biasInitializer,
      });
    this.query = this.addSublayer(proj('query', this.numQueryHeads), shape);
    this.buildHeadParts(shape);
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

  /** The rotary inverse frequencies of this layer's heads. */
  inverseFrequencies(): Float32Array {
    return qwenInverseFrequencies(this.headDim, this.ropeMaxWavelength, this.ropeScalingFactor);
  }

  /** Rotary embedding of `x [B, T, heads, H]` at positions `start ..`: keras-hub's halves form. */
  private rotate(x: tf.Tensor, start: number): tf.Tensor {
    const T = x.shape[1] as number;
    const H = this.headDim;
    const angles = new Float32Array(T * H);
    const frequencies = this.inverseFrequencies();
    for (let t = 0; t < T; t++) {
      for (let i = 0; i < H / 2; i++) {
        angles[t * H + i] = angles[t * H + i + H / 2] = Math.fround((t + start) * frequencies[i]);
      }
    }
    const a = tf.tensor(angles, [1, T, 1, H]);
    const [x1, x2] = tf.split(x, 2, 3);
    const rotated = tf.concat([tf.neg(x2), x1], 3);
    return tf.add(tf.mul(x, tf.cos(a)), tf.mul(rotated, tf.sin(a)));
  }

  /** keras-hub's sliding window `[T, S]` for queries at `start ..`: |i - j| < window. */
  private windowMask(T: number, S: number, start: number, window: number): tf.Tensor {
    const keep = new Uint8Array(T * S);
    for (let t = 0; t < T; t++) {
      for (let s = 0; s < S; s++) keep[t * S + s] = Math.abs(t + start - s) < window ? 1 : 0;
    }
    return tf.tensor2d(keep, [T, S], 'bool');
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
      const T = x.shape[1] as number;
      const start = index ?? 0;
      const project = (layer: EinsumDense | null, which: 'query' | 'key') =>
        this.rotate(this.beforeRotation((layer as EinsumDense).project(x), which), start);
      const q = project(this.query, 'query'); // [B, T, Nq, H]
      let k: tf.Tensor;
      let v: tf.Tensor;
      let newCache: tf.Tensor | null = null;
      if (cache != null && index == null) {
        [k, v] = tf.unstack(cache, 1);
      } else {
        const kNew = project(this.key, 'key');
        const vNew = (this.value as EinsumDense).project(x);
        if (cache == null) {
          [k, v] = [kNew, vNew];
        } else {
          ({k, v, cache: newCache} = updateKeyValueCache(cache, kNew, vNew, start, this.name));
        }
      }
      const S = k.shape[1] as number;
      const given = (kwargs.attentionMask as tf.Tensor | undefined) ?? null;
      const window = this.window;
      let keep: tf.Tensor | null = given == null ? null : tf.cast(given, 'bool'); // [B, T, S]
      if (window != null && keep != null) {
        // keras-hub applies the window to the mask it is given (its decoder always gives one)
        keep = tf.logicalAnd(keep, tf.expandDims(this.windowMask(T, S, start, window), 0));
      }
      let attended = groupedQueryAttention(q, k, v, keep, false); // [B, T, Nq, H]
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
      ropeScalingFactor: this.ropeScalingFactor,
      dropout: this.dropout,
      kernelInitializer: serializeObject(this.kernelInitializer),
      biasInitializer: serializeObject(this.biasInitializer),
      useSlidingWindowAttention: this.useSlidingWindowAttention,
      slidingWindowSize: this.slidingWindowSize,
    };
  }
}
