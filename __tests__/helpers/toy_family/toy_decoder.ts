/**
 * The toy family's `ToyDecoder` (fixtures/toy_family.py): a pre-norm decoder block,
 * `x + attention(norm(x))` with causal self-attention (the package's CachedMultiHeadAttention,
 * keras-hub's layer; keys masked by the padding mask), then `x + down(relu(up(norm(x))))`.
 * Cached decoding (eager): `apply(x, {selfAttentionCache, selfAttentionCacheUpdateIndex})` returns
 * `[output, cache]`, the cache `[batch, 2, maxLength, numHeads, hidden / numHeads]`.
 * Sublayers (the Python layer's names): `self_attention`, `self_attention_layernorm`,
 * `feedforward_intermediate_dense`, `feedforward_output_dense`, `feedforward_layernorm`.
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {CachedMultiHeadAttention, causalMask, CompositeLayer, defineContract} from '../../../src';
import type {LayerContract} from '../../../src';
import {ToyRMSNorm} from './toy_rms_norm';

/** Options of {@link ToyDecoder} (the Python layer's arguments, camelCase). */
export interface ToyDecoderArgs extends LayerArgs {
  /** Attention heads; each head has `hidden / numHeads` features (floored). */
  numHeads: number;
  /** Width of the feed-forward's inner layer. */
  intermediateDim: number;
  /** The norms' epsilon. Default 1e-6. */
  layerNormEpsilon?: number;
  /** The roles of a functional call's inputs (recorded by `apply`; kept in the config). */
  inputRoles?: string[] | null;
}

/** The decoder's inputs, in its call's argument order (camelCase). */
const ROLES = ['decoderSequence', 'decoderPaddingMask'];

type Shape = Array<number | null>;

function positiveInt(v: unknown, key: string): number {
  if (!(typeof v === 'number' && Number.isInteger(v) && v >= 1)) {
    throw new Error(`ToyDecoder: expected ${key} to be an integer >= 1, received ${String(v)}`);
  }
  return v;
}

export class ToyDecoder extends CompositeLayer {
  /** @nocollapse */
  static readonly className = 'ToyDecoder';
  /** What the package knows about this class (src/layers/engine/contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {pkg: 'toy_family', keys: ['num_heads', 'intermediate_dim', 'layer_norm_epsilon']},
      keras2: {refused: 'tf-keras 2 has no toy family'},
      call: {kind: 'keyword', roles: ROLES, positional: 1, options: {training: null}},
    },
    configKeys: ['numHeads', 'intermediateDim', 'layerNormEpsilon', 'inputRoles'],
    weights: {
      // Keras 3 keeps a sublayer under its attribute, `_<name>`, except this one
      keras3Folders: {self_attention: '_self_attention_layer'},
      // the two feed-forward kernels have intermediate_dim columns or rows, at least
      implied: (c) => ({
        values: 2 * (typeof c.intermediateDim === 'number' ? c.intermediateDim : 0),
        option: 'intermediate_dim',
      }),
    },
    decoding: {
      kind: 'cached',
      refuse: (_config, node) =>
        node.inputTensors.length > 2 ? `it is called on ${node.inputTensors.length} inputs` : null,
      cacheShape: (config, input, batch, maxLength) => {
        const heads = config.numHeads as number;
        const hidden = input[input.length - 1] as number;
        return [batch, 2, maxLength, heads, Math.floor(hidden / heads)];
      },
      cacheKwargs: (cache, index) => ({
        selfAttentionCache: cache,
        selfAttentionCacheUpdateIndex: index,
      }),
      readsKerasMasks: false,
      masksQueries: false,
      paddingMaskRole: 'decoderPaddingMask',
    },
  });

  /** The `numHeads` option. */
  readonly numHeads: number;
  /** The `intermediateDim` option. */
  readonly intermediateDim: number;
  /** The `layerNormEpsilon` option. */
  readonly layerNormEpsilon: number;
  /** The roles of a functional call's inputs, or null (one input: the sequence). */
  inputRoles: string[] | null;
  /** The sublayers, created at build. */
  selfAttention: CachedMultiHeadAttention | null = null;
  selfAttentionNorm: ToyRMSNorm | null = null;
  feedforwardNorm: ToyRMSNorm | null = null;
  feedforwardIntermediate: layers.Layer | null = null;
  feedforwardOutput: layers.Layer | null = null;

  constructor(args: ToyDecoderArgs) {
    if (args == null) throw new Error('ToyDecoder: expected {numHeads, intermediateDim, ...}');
    const {numHeads, intermediateDim, layerNormEpsilon, inputRoles, ...base} = args;
    super(base);
    this.numHeads = positiveInt(numHeads, 'numHeads');
    this.intermediateDim = positiveInt(intermediateDim, 'intermediateDim');
    const epsilon = layerNormEpsilon ?? 1e-6;
    if (!(typeof epsilon === 'number' && epsilon > 0)) {
      throw new Error(`ToyDecoder: expected layerNormEpsilon > 0, received ${String(epsilon)}`);
    }
    this.layerNormEpsilon = epsilon;
    this.inputRoles = inputRoles ?? null;
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = (Array.isArray(inputShape[0]) ? inputShape[0] : inputShape) as Shape;
    const hidden = shape[2];
    if (shape.length !== 3 || hidden == null || hidden < this.numHeads) {
      throw new Error(
        `Layer '${this.name}' expected decoderSequence of shape [batch, length, hidden] with ` +
          `hidden >= numHeads (${this.numHeads}), received [${shape.join(', ')}]`,
      );
    }
    const headDim = Math.floor(hidden / this.numHeads);
    this.selfAttention = this.addSublayer(
      new CachedMultiHeadAttention({
        name: 'self_attention',
        numHeads: this.numHeads,
        keyDim: headDim,
      }),
      shape,
    );
    const norm = (name: string) => new ToyRMSNorm({name, epsilon: this.layerNormEpsilon});
    this.selfAttentionNorm = this.addSublayer(norm('self_attention_layernorm'), shape);
    this.feedforwardNorm = this.addSublayer(norm('feedforward_layernorm'), shape);
    this.feedforwardIntermediate = this.addSublayer(
      layers.dense({
        name: 'feedforward_intermediate_dense',
        units: this.intermediateDim,
        activation: 'relu',
      }),
      [null, hidden],
    );
    this.feedforwardOutput = this.addSublayer(
      layers.dense({name: 'feedforward_output_dense', units: hidden}),
      [null, this.intermediateDim],
    );
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return (Array.isArray(inputShape[0]) ? inputShape[0] : inputShape) as Shape;
  }

  /** Records the roles of a functional call on `[sequence, paddingMask]` (tfjs replays no options). */
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs: Kwargs = {},
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    if (Array.isArray(inputs) && inputs[0] instanceof SymbolicTensor) {
      if (inputs.length > ROLES.length) {
        throw new Error(
          `Layer '${this.name}' expected [decoderSequence, decoderPaddingMask?], received ` +
            `${inputs.length} inputs`,
        );
      }
      this.inputRoles = ROLES.slice(0, inputs.length);
    }
    return super.apply(inputs, kwargs);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    return tf.tidy(() => {
      const [x, padding] = Array.isArray(inputs) ? inputs : [inputs];
      const cache = (kwargs.selfAttentionCache as tf.Tensor | undefined) ?? null;
      const index = (kwargs.selfAttentionCacheUpdateIndex as number | undefined) ?? 0;
      const [B, T, D] = x.shape as [number, number, number];
      const S = cache == null ? T : (cache.shape[2] as number);
      // causal (shifted by the cache index) AND the key padding mask
      let mask: tf.Tensor = tf.expandDims(causalMask(T, S, index), 0); // [1, T, S]
      if (padding != null) {
        mask = tf.logicalAnd(mask, tf.expandDims(tf.cast(padding, 'bool'), 1)); // [B, T, S]
      }
      const attended = (this.selfAttention as CachedMultiHeadAttention).call(
        (this.selfAttentionNorm as ToyRMSNorm).call(x),
        {
          attentionMask: mask,
          cache: cache ?? undefined,
          cacheUpdateIndex: cache == null ? undefined : index,
        },
      );
      const [a, newCache] = Array.isArray(attended) ? attended : [attended, null];
      const h = tf.add(x, a);
      const rows = tf.reshape((this.feedforwardNorm as ToyRMSNorm).call(h), [B * T, D]);
      const inner = (this.feedforwardIntermediate as layers.Layer).call(rows, {}) as tf.Tensor;
      const down = (this.feedforwardOutput as layers.Layer).call(inner, {}) as tf.Tensor;
      const y = tf.add(h, tf.reshape(down, [B, T, D]));
      return newCache == null ? y : [y, newCache];
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      numHeads: this.numHeads,
      intermediateDim: this.intermediateDim,
      layerNormEpsilon: this.layerNormEpsilon,
      inputRoles: this.inputRoles,
    };
  }
}
