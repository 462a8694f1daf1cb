import * as tf from '@tensorflow/tfjs-core';
import {LayerVariable} from '@tensorflow/tfjs-layers';

import {einsum} from '../../ops/einsum';
import {AttentionParts} from '../engine/call_spec';
import {
  getInitializer,
  Initializer,
  InitializerIdentifier,
  serializeObject,
} from '../engine/config_objects';
import {BaseAttentionArgs, ScoresOption} from '../engine/base_attention';
import {Attention} from './dot_product_attention';
import {Shape} from '../engine/shapes';
import {defineContract, LayerContract} from '../engine/contract';
import {ATTENTION_CONFIG_KEYS, NO_CACHE} from './attention_contract';
import {checkConstructorArgs} from '../engine/constructor_args';

export interface AdditiveAttentionArgs extends BaseAttentionArgs {
  /**
   * d2l form: project query and key to `numHiddens` units first (weights `query_kernel`
   * `[dimQ, numHiddens]`, `key_kernel` `[dimK, numHiddens]`), so query and key may differ in size.
   * Omitted: the Keras layer, which adds query and key directly.
   */
  numHiddens?: number | null;
  /** Weight the tanh features by a trainable vector `scale` before summing. Default true. */
  useScale?: boolean;
  /** Initializer of `query_kernel` / `key_kernel` (d2l form). Default glorotUniform. */
  kernelInitializer?: InitializerIdentifier;
}

/**
 * Additive (Bahdanau) attention: `scores = Σ_h scale_h · tanh(W_q q + W_k k)_h`.
 *
 * - With `numHiddens` it is the d2l layer `w_vᵀ tanh(W_q q + W_k k)`: `scale` plays `w_v`
 *   (`[numHiddens]`), and query `[batch, Tq, dimQ]` and key `[batch, Tv, dimK]` may differ in size.
 * - Without it, Keras' `AdditiveAttention` (`sum(scale * tanh(q + k))`, `scale` `[dim]`), so
 *   Keras-converted models load; query and key share `dim`.
 * - Output `[batch, Tq, dimV]`; scores `[batch, Tq, Tv]` with `returnAttentionScores`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {AdditiveAttention} from 'tfjs-attention';
 *
 * const queries = tf.randomNormal([2, 1, 20]);
 * const keys = tf.ones([2, 10, 2]);
 * const values = tf.randomNormal([2, 10, 4]);
 * const att = new AdditiveAttention({numHiddens: 8, dropout: 0.1});
 * const out = att.apply([queries, values, keys], {validLens: tf.tensor1d([2, 6], 'int32')});
 * // out [2, 1, 4] (d2l argument order: q, v, k)
 * ```
 */
export class AdditiveAttention<S extends boolean = false> extends Attention<S> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className: string = 'AdditiveAttention';
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {keys: ['use_scale', 'dropout', 'seed']},
      keras2: {},
      call: {kind: 'attention', byKeyword: false},
      kerasOnlyKeys: ['causal'],
      refuseConfig: (c) =>
        c.numHiddens != null
          ? 'is the d2l form of AdditiveAttention (numHiddens), which Keras does not have; use ' +
            'AdditiveAttention without numHiddens (the Keras form)'
          : null,
    },
    // numHiddens and kernelInitializer: the d2l form's options
    configKeys: [...ATTENTION_CONFIG_KEYS, 'useScale', 'numHiddens', 'kernelInitializer'],
    decoding: NO_CACHE,
  });

  /** The `numHiddens` option (null: the Keras form, without projections). */
  readonly numHiddens: number | null;
  /** The initializer of `queryKernel` / `keyKernel`. */
  readonly kernelInitializer: Initializer;
  /** Whether query_kernel / key_kernel use the default initializer (seeded under `seed`). */
  private readonly defaultKernels: boolean;
  /** The query projection `[dimQ, numHiddens]` (d2l form), created at build. */
  queryKernel: LayerVariable | null = null;
  /** The key projection `[dimK, numHiddens]` (d2l form), created at build. */
  keyKernel: LayerVariable | null = null;

  constructor(args: AdditiveAttentionArgs & ScoresOption<S> = {}) {
    checkConstructorArgs('AdditiveAttention', args);
    super({...args, useScale: args.useScale ?? true, scoreMode: 'dot'});
    const h = args.numHiddens ?? null;
    if (h !== null && !(Number.isInteger(h) && h > 0)) {
      throw new Error(
        `AdditiveAttention: expected numHiddens to be a positive integer, received ${JSON.stringify(h)}`,
      );
    }
    this.numHiddens = h;
    this.kernelInitializer = getInitializer(args.kernelInitializer, 'glorotUniform');
    this.defaultKernels = args.kernelInitializer == null;
    // Keras returns the weights after dropout; d2l (the numHiddens form) before.
    this.scoresAfterDropout = h === null;
  }

  protected override inputsFixedByWeights(): Array<'query' | 'value' | 'key'> {
    // query_kernel / key_kernel (d2l), or a scale over the shared query / key features (Keras)
    return this.numHiddens !== null || this.useScale ? ['query', 'key'] : [];
  }

  /** The Keras form (no `numHiddens`); the d2l form takes a single tensor as self-attention. */
  protected override kerasForm(): boolean {
    return this.numHiddens === null;
  }

  protected override requiresSameFeatures(): boolean {
    return this.numHiddens === null;
  }

  protected override buildParts(parts: AttentionParts<Shape>): void {
    this.checkShapes(parts, this.requiresSameFeatures());
    const dq = parts.query[parts.query.length - 1];
    const dk = parts.key[parts.key.length - 1];
    if (dq == null || dk == null) {
      throw new Error(`Layer '${this.name}': the last dimension of query and key must be known`);
    }
    let units = dq;
    if (this.numHiddens !== null) {
      units = this.numHiddens;
      this.queryKernel = this.addWeight(
        'query_kernel',
        [dq, units],
        'float32',
        (this.defaultKernels && this.seededGlorot(0)) || this.kernelInitializer,
      );
      this.keyKernel = this.addWeight(
        'key_kernel',
        [dk, units],
        'float32',
        (this.defaultKernels && this.seededGlorot(1)) || this.kernelInitializer,
      );
    }
    if (this.useScale) {
      this.scale = this.addWeight(
        'scale',
        [units],
        'float32',
        this.seededGlorot(2) ?? getInitializer('glorotUniform', 'glorotUniform'),
      );
    }
  }

  protected override computeScores(query: tf.Tensor, key: tf.Tensor): tf.Tensor {
    const q0 =
      this.queryKernel == null ? query : einsum('...d,dh->...h', query, this.queryKernel.read());
    const k0 = this.keyKernel == null ? key : einsum('...d,dh->...h', key, this.keyKernel.read());
    const q = tf.expandDims(q0, -2); // [batch, ..., Tq, 1, h]
    const k = tf.expandDims(k0, -3); // [batch, ..., 1, Tv, h]
    const features = tf.tanh(tf.add(q, k)); // [batch, ..., Tq, Tv, h]
    if (this.scale == null) {
      return tf.sum(features, -1); // [batch, ..., Tq, Tv]
    }
    return einsum('...h,h->...', features, this.scale.read()); // [batch, ..., Tq, Tv]
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config = super.getConfig();
    delete config.scoreMode;
    if (this.numHiddens !== null) {
      config.numHiddens = this.numHiddens;
      config.kernelInitializer = serializeObject(this.kernelInitializer);
    }
    return config;
  }
}
