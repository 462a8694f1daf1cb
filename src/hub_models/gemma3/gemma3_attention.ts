/**
 * keras-hub's `CachedGemma3Attention`: grouped-query attention with query / key RMS norms, rotary
 * positions of its own base and scaling factor, an optional sliding window and logit soft cap,
 * and a key / value cache.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {reshapeTo} from '../../ops/reshape';
import {updateKeyValueCache} from '../grouped_rotary_attention';
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
import {Gemma3RMSNormalization} from './gemma3_rms_norm';
import {gemma3InverseFrequencies, slidingWindowMask} from './gemma3_positions';

/** Options of {@link CachedGemma3Attention} (keras-hub's arguments, camelCase). */
export interface CachedGemma3AttentionArgs {
  /** Layer name. */
  name?: string;
  /** The size of each head (independent of the input width). */
  headDim: number;
  /** Query heads. */
  numQueryHeads: number;
  /** Key / value heads (numQueryHeads a multiple of it). */
  numKeyValueHeads: number;
  /** Initializer of the kernels. Default glorotUniform. */
  kernelInitializer?: InitializerIdentifier;
  /** Scores become `cap * tanh(scores / cap)` before the mask and softmax. Default null (none). */
  logitSoftCap?: number | null;
  /** Whether a query attends only to keys within `slidingWindowSize`. Default false. */
  useSlidingWindowAttention?: boolean;
  /** The sliding window: keys less than this many positions away. Default 4096. */
  slidingWindowSize?: number;
  /** Queries scaled by `1 / sqrt(headDim)` when true, by `1 / sqrt(width / numQueryHeads)` else. */
  queryHeadDimNormalize?: boolean;
  /** RMS norms (`query_norm`, `key_norm`) on each head of the queries and keys. Default false. */
  useQueryKeyNorm?: boolean;
  /** The query / key norms' epsilon. Default 1e-6. */
  layerNormEpsilon?: number;
  /** The rotary embedding's longest wavelength (its base). Default 10000. */
  ropeWavelength?: number;
  /** Positions divided by it in the rotary embedding (keras-hub's linear scaling). Default 1. */
  ropeScalingFactor?: number;
  /** The sliding window centred on each query (embedding models), not causal. Default false. */
  useBidirectionalAttention?: boolean;
  /** Dropout of the attention weights while training. Default 0. */
  dropout?: number;
  /** Trainable. */
  trainable?: boolean;
}

const OWN = [
  'headDim',
  'numQueryHeads',
  'numKeyValueHeads',
  'kernelInitializer',
  'logitSoftCap',
  'useSlidingWindowAttention',
  'slidingWindowSize',
  'queryHeadDimNormalize',
  'useQueryKeyNorm',
  'layerNormEpsilon',
  'ropeWavelength',
  'ropeScalingFactor',
  'useBidirectionalAttention',
  'dropout',
] as const;

/** The sublayers of a {@link CachedGemma3Attention} (what the compiled step's rule reads). */
export interface Gemma3AttentionParts {
  /** The query projection (`btd,ndh->btnh`). */
  query: EinsumDense;
  /** The key projection. */
  key: EinsumDense;
  /** The value projection. */
  value: EinsumDense;
  /** The output projection (`btnh,nhd->btd`). */
  output: EinsumDense;
  /** The per-head query norm, null without `useQueryKeyNorm`. */
  queryNorm: Gemma3RMSNormalization | null;
  /** The per-head key norm, null without `useQueryKeyNorm`. */
  keyNorm: Gemma3RMSNormalization | null;
}

/** A boolean option, its default when absent (errors name the class and option). */
export function booleanOption(v: unknown, key: string, cls: string, fallback: boolean): boolean {
  const value = v ?? fallback;
  if (typeof value !== 'boolean') {
    throw new Error(`${cls}: expected ${key} to be true or false, received ${JSON.stringify(v)}`);
  }
  return value;
}

/** A positive integer option, its default when absent. */
export function positiveInteger(v: unknown, key: string, cls: string, fallback?: number): number {
  const value = v ?? fallback;
  if (!(typeof value === 'number' && Number.isInteger(value) && value > 0)) {
    throw new Error(
      `${cls}: expected ${key} to be a positive integer, received ${JSON.stringify(v)}`,
    );
  }
  return value;
}

/**
 * keras-hub's `CachedGemma3Attention` (keras_hub/src/models/gemma3/gemma3_attention.py):
 * grouped-query attention without biases and with heads of `headDim` (any width); optional
 * {@link Gemma3RMSNormalization}s on each head of the queries and keys (`useQueryKeyNorm`);
 * keras-hub's rotary embedding with base `ropeWavelength` and positions divided by
 * `ropeScalingFactor`; queries scaled by `1 / sqrt(headDim)`; scores soft-capped
 * (`logitSoftCap`); the caller's attention mask, narrowed to a sliding window of
 * `slidingWindowSize` when `useSlidingWindowAttention` (`|query - key| < window`, or the window
 * centred on the query with `useBidirectionalAttention`); a query with no key to attend gives
 * zeros. Eager calls take a key / value cache `[batch, 2, maxLength, numKeyValueHeads, headDim]`
 * and `cacheUpdateIndex`, and return `[output, cache]`.
 * Sublayers (keras-hub's names): `query`, `key`, `value`, `attention_output` (EinsumDense),
 * `query_norm`, `key_norm`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {CachedGemma3Attention} from 'tfjs-attention';
 *
 * const attention = new CachedGemma3Attention({headDim: 8, numQueryHeads: 4, numKeyValueHeads: 2});
 * const y = attention.apply(tf.randomNormal([1, 5, 16])); // [1, 5, 16], every key attended
 * ```
 */
export class CachedGemma3Attention extends CompositeLayer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'CachedGemma3Attention';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.gemma3.gemma3_attention',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'CachedGemma3Attention',
        keys: [
          'head_dim',
          'num_query_heads',
          'num_key_value_heads',
          'kernel_initializer',
          'logit_soft_cap',
          'use_sliding_window_attention',
          'sliding_window_size',
          'query_head_dim_normalize',
          'use_query_key_norm',
          'layer_norm_epsilon',
          'rope_wavelength',
          'rope_scaling_factor',
          'use_bidirectional_attention',
          'dropout',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'tensor'},
    },
    configKeys: [...OWN],
    weights: {
      // keras-hub's attributes: query_dense, ..., output_dense, query_norm, key_norm
      keras3Folders: {
        query: 'query_dense',
        key: 'key_dense',
        value: 'value_dense',
        attention_output: 'output_dense',
        query_norm: 'query_norm',
        key_norm: 'key_norm',
      },
      implied: (c) => ({
        values:
          2 * configNumber(c, 'numQueryHeads') * configNumber(c, 'headDim') +
          2 * configNumber(c, 'numKeyValueHeads') * configNumber(c, 'headDim'),
        option: 'headDim',
      }),
    },
    decoding: {
      kind: 'refused',
      reason:
        'it applies no causal mask of its own (Gemma3DecoderBlock builds the mask and holds the ' +
        'cache)',
    },
  });

  /** The `headDim` option. */
  readonly headDim: number;
  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The kernels' initializer. */
  readonly kernelInitializer: Initializer;
  /** The `logitSoftCap` option (null: none). */
  readonly logitSoftCap: number | null;
  /** The `useSlidingWindowAttention` option. */
  readonly useSlidingWindowAttention: boolean;
  /** The `slidingWindowSize` option. */
  readonly slidingWindowSize: number;
  /** The `queryHeadDimNormalize` option. */
  readonly queryHeadDimNormalize: boolean;
  /** The `useQueryKeyNorm` option. */
  readonly useQueryKeyNorm: boolean;
  /** The `layerNormEpsilon` option. */
  readonly layerNormEpsilon: number;
  /** The `ropeWavelength` option. */
  readonly ropeWavelength: number;
  /** The `ropeScalingFactor` option. */
  readonly ropeScalingFactor: number;
  /** The `useBidirectionalAttention` option. */
  readonly useBidirectionalAttention: boolean;
  /** The `dropout` option. */
  readonly dropout: number;
  private query: EinsumDense | null = null;
  private key: EinsumDense | null = null;
  private value: EinsumDense | null = null;
  private outputDense: EinsumDense | null = null;
  private queryNorm: Gemma3RMSNormalization | null = null;
  private keyNorm: Gemma3RMSNormalization | null = null;
  private hiddenDim = 0;

  constructor(args: CachedGemma3AttentionArgs) {
    super(args);
    const cls = 'CachedGemma3Attention';
    if (args == null) throw new Error(`${cls}: expected {headDim, numQueryHeads, ...}`);
    refuseUnknownOptions(args, [...OWN], cls);
    checkHeads(cls, args.numQueryHeads, args.numKeyValueHeads);
    this.headDim = positiveInteger(args.headDim, 'headDim', cls);
    if (this.headDim % 2 !== 0) {
      throw new Error(
        `${cls}: expected an even headDim (the rotary embedding rotates halves), received ` +
          `${this.headDim}`,
      );
    }
    this.numQueryHeads = args.numQueryHeads;
    this.numKeyValueHeads = args.numKeyValueHeads;
    this.kernelInitializer = getInitializer(args.kernelInitializer, 'glorotUniform');
    this.logitSoftCap =
      args.logitSoftCap == null ? null : positiveNumber(args.logitSoftCap, 'logitSoftCap', cls, 1);
    this.useSlidingWindowAttention = booleanOption(
      args.useSlidingWindowAttention,
      'useSlidingWindowAttention',
      cls,
      false,
    );
    this.slidingWindowSize = positiveInteger(
      args.slidingWindowSize,
      'slidingWindowSize',
      cls,
      4096,
    );
    this.queryHeadDimNormalize = booleanOption(
      args.queryHeadDimNormalize,
      'queryHeadDimNormalize',
      cls,
      true,
    );
    this.useQueryKeyNorm = booleanOption(args.useQueryKeyNorm, 'useQueryKeyNorm', cls, false);
    this.layerNormEpsilon = positiveNumber(args.layerNormEpsilon, 'layerNormEpsilon', cls, 1e-6);
    this.ropeWavelength = positiveNumber(args.ropeWavelength, 'ropeWavelength', cls, 1e4);
    this.ropeScalingFactor = positiveNumber(args.ropeScalingFactor, 'ropeScalingFactor', cls, 1);
    this.useBidirectionalAttention = booleanOption(
      args.useBidirectionalAttention,
      'useBidirectionalAttention',
      cls,
      false,
    );
    const rate = args.dropout ?? 0;
    if (!(typeof rate === 'number' && rate >= 0 && rate < 1)) {
      throw new Error(`${cls}: expected dropout in [0, 1), received ${JSON.stringify(rate)}`);
    }
    this.dropout = rate;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    const hidden = shape[shape.length - 1];
    if (hidden == null) {
      throw new Error(
        `Layer '${this.name}' expected a known input width, received ${formatShape(shape)}`,
      );
    }
    this.hiddenDim = hidden;
    const H = this.headDim;
    const proj = (name: string, heads: number) =>
      new EinsumDense({
        name,
        equation: 'btd,ndh->btnh',
        outputShape: [null, heads, H],
        kernelInitializer: this.kernelInitializer,
      });
    this.query = this.addSublayer(proj('query', this.numQueryHeads), shape);
    this.key = this.addSublayer(proj('key', this.numKeyValueHeads), shape);
    this.value = this.addSublayer(proj('value', this.numKeyValueHeads), shape);
    if (this.useQueryKeyNorm) {
      const norm = (name: string) =>
        new Gemma3RMSNormalization({name, epsilon: this.layerNormEpsilon});
      this.queryNorm = this.addSublayer(norm('query_norm'), [
        shape[0],
        shape[1],
        this.numQueryHeads,
        H,
      ]);
      this.keyNorm = this.addSublayer(norm('key_norm'), [
        shape[0],
        shape[1],
        this.numKeyValueHeads,
        H,
      ]);
    }
    this.outputDense = this.addSublayer(
      new EinsumDense({
        name: 'attention_output',
        equation: 'btnh,nhd->btd',
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
   * The projections (EinsumDense: `query`, `key`, `value`, `attention_output`) and the query /
   * key norms (null without `useQueryKeyNorm`), or null before build: what the compiled decoding
   * step's rule reads (gemma3_step_rules.ts).
   */
  get stepParts(): Gemma3AttentionParts | null {
    const {query, key, value, outputDense: output, queryNorm, keyNorm} = this;
    if (query == null || key == null || value == null || output == null) return null;
    return {query, key, value, output, queryNorm, keyNorm};
  }

  /** The query scale: `1 / sqrt(headDim)`, or `1 / sqrt(width / numQueryHeads)`. */
  get queryScale(): number {
    return this.queryHeadDimNormalize
      ? 1 / Math.sqrt(this.headDim)
      : 1 / Math.sqrt(Math.floor(this.hiddenDim / this.numQueryHeads));
  }

  /** keras-hub's inverse frequencies of this layer's rotary embedding (headDim / 2 of them). */
  inverseFrequencies(): Float32Array {
    return gemma3InverseFrequencies(this.headDim, this.ropeWavelength, this.ropeScalingFactor);
  }

  /** Rotary embedding of `x [B, T, heads, H]` at positions `start ..`: keras-hub's halves form. */
  private rotate(x: tf.Tensor, start: number): tf.Tensor {
    const T = x.shape[1] as number;
    const H = this.headDim;
    const frequencies = this.inverseFrequencies();
    const angles = new Float32Array(T * H);
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

  /** Projections of new positions: queries or keys normed (per head) and rotated. */
  private projected(x: tf.Tensor, start: number): {q: tf.Tensor; k: tf.Tensor; v: tf.Tensor} {
    let q = (this.query as EinsumDense).project(x);
    let k = (this.key as EinsumDense).project(x);
    if (this.useQueryKeyNorm) {
      q = (this.queryNorm as Gemma3RMSNormalization).call(q, {});
      k = (this.keyNorm as Gemma3RMSNormalization).call(k, {});
    }
    return {
      q: this.rotate(q, start),
      k: this.rotate(k, start),
      v: (this.value as EinsumDense).project(x),
    };
  }

  /**
   * `x [B, T, hidden]`; `attentionMask [B, T, S]` (true / 1 = attend); with `cache`
   * `[B, 2, S, numKeyValueHeads, headDim]` and `cacheUpdateIndex`, returns `[output, cache]`.
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
      const {q, k: kNew, v: vNew} = this.projected(x, start);
      let k = kNew;
      let v = vNew;
      let newCache: tf.Tensor | null = null;
      if (cache != null) {
        ({k, v, cache: newCache} = updateKeyValueCache(cache, kNew, vNew, start, this.name));
      }
      const S = k.shape[1] as number;
      const Nkv = this.numKeyValueHeads;
      const G = this.numQueryHeads / Nkv;
      const H = this.headDim;
      // query head j reads key / value head floor(j / G) (keras-hub's reshape to [.., Nkv, G, H])
      const qg = reshapeTo(
        tf.transpose(reshapeTo(tf.mul(q, this.queryScale), [B, T, Nkv, G, H]), [0, 2, 3, 1, 4]),
        [B, Nkv, G * T, H],
      );
      const kh = tf.transpose(k, [0, 2, 3, 1]); // [B, Nkv, H, S]
      const vh = tf.transpose(v, [0, 2, 1, 3]); // [B, Nkv, S, H]
      let scores = reshapeTo(tf.matMul(qg, kh), [B, this.numQueryHeads, T, S]);
      if (this.logitSoftCap != null) {
        scores = tf.mul(tf.tanh(tf.div(scores, this.logitSoftCap)), this.logitSoftCap);
      }
      let mask = (kwargs.attentionMask as tf.Tensor | undefined) ?? null;
      let empty: tf.Tensor | null = null;
      if (mask != null) {
        let keep = tf.cast(mask, 'bool'); // [B, T, S]
        if (this.useSlidingWindowAttention) {
          const window = slidingWindowMask(
            T,
            S,
            start,
            this.slidingWindowSize,
            this.useBidirectionalAttention,
          );
          keep = tf.logicalAnd(keep, tf.tensor3d(window, [1, T, S], 'bool'));
        }
        mask = keep;
        // keras-hub wipes the output of a query with no key to attend
        empty = tf.logicalNot(tf.any(keep, -1)); // [B, T]
        scores = tf.where(tf.expandDims(keep, 1), scores, tf.fill(scores.shape, -1e9));
      }
      let probs = reshapeTo(tf.softmax(scores), [B, Nkv, G * T, S]);
      if (kwargs.training === true && this.dropout > 0) probs = tf.dropout(probs, this.dropout);
      let attended = tf.transpose(
        reshapeTo(tf.matMul(probs, vh), [B, this.numQueryHeads, T, H]),
        [0, 2, 1, 3],
      ); // [B, T, Nq, H]
      if (empty != null) {
        attended = tf.where(tf.reshape(empty, [B, T, 1, 1]), tf.zerosLike(attended), attended);
      }
      const out = (this.outputDense as EinsumDense).project(attended);
      return newCache == null ? out : [out, newCache];
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      headDim: this.headDim,
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      kernelInitializer: serializeObject(this.kernelInitializer),
      logitSoftCap: this.logitSoftCap,
      useSlidingWindowAttention: this.useSlidingWindowAttention,
      slidingWindowSize: this.slidingWindowSize,
      queryHeadDimNormalize: this.queryHeadDimNormalize,
      useQueryKeyNorm: this.useQueryKeyNorm,
      layerNormEpsilon: this.layerNormEpsilon,
      ropeWavelength: this.ropeWavelength,
      ropeScalingFactor: this.ropeScalingFactor,
      useBidirectionalAttention: this.useBidirectionalAttention,
      dropout: this.dropout,
    };
  }
}
