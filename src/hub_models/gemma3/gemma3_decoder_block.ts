import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {causalMask} from '../../ops/masking';
import {reshapeTo} from '../../ops/reshape';
import {configNumber, defineContract, LayerContract} from '../../layers/engine/contract';
import {formatShape, Shape} from '../../layers/engine/shapes';
import type {QuantizationMode} from '../../layers/core/quantization';
import {HUB_NEEDS_KERAS3} from '../../layers/hub/hub_contract';
import type {TransformerBlockArgs} from '../../layers/hub/transformer_block_args';
import {positiveNumber, refuseUnknownOptions} from '../../layers/hub/layer_options';
import {kerasMaskOf, TransformerBlock} from '../../layers/hub/transformer_block';
import {checkHeads} from '../llama3/llama_attention';
import {booleanOption, CachedGemma3Attention, positiveInteger} from './gemma3_attention';
import {Gemma3RMSNormalization} from './gemma3_rms_norm';
import {Dense} from '../../layers/core/dense';

/** Options of {@link Gemma3DecoderBlock} (keras-hub's arguments, camelCase). */
export interface Gemma3DecoderBlockArgs {
  /** Layer name. */
  name?: string;
  /** The block's width (its input's last axis). */
  hiddenDim: number;
  /** The feed-forward width (before `gateDimReduction`). */
  intermediateDim: number;
  /** The size of each attention head. */
  headDim: number;
  /** Query heads. */
  numQueryHeads: number;
  /** Key / value heads (numQueryHeads a multiple of it). */
  numKeyValueHeads: number;
  /** Kept in the config: keras-hub 0.32's block always scales queries by 1 / sqrt(headDim). */
  queryHeadDimNormalize?: boolean;
  /** RMS norms on each head of the queries and keys. Default false. */
  useQueryKeyNorm?: boolean;
  /** An RMS norm on the feed-forward's output before the residual. Default false. */
  usePostFfwNorm?: boolean;
  /** An RMS norm on the attention's output before the residual. Default false. */
  usePostAttentionNorm?: boolean;
  /** The gated feed-forward's width is `intermediateDim / gateDimReduction`. Default 2. */
  gateDimReduction?: number;
  /** The attention scores' soft cap (null: none). */
  logitSoftCap?: number | null;
  /** A local layer: attention within `slidingWindowSize`. Default false. */
  useSlidingWindowAttention?: boolean;
  /** The sliding window. Default 4096. */
  slidingWindowSize?: number;
  /** The RMS norms' epsilon. Default 1e-6. */
  layerNormEpsilon?: number;
  /** The rotary embedding's base. Default 10000. */
  ropeWavelength?: number;
  /** The rotary embedding's position scaling. Default 1. */
  ropeScalingFactor?: number;
  /** Every valid position attends to every valid position (embedding models). Default false. */
  useBidirectionalAttention?: boolean;
  /** Dropout after the attention and the feed-forward while training. Default 0. */
  dropout?: number;
  /** Roles of the inputs of a functional call with mask inputs (recorded; kept in the config). */
  inputRoles?: string[] | null;
  /** Trainable. */
  trainable?: boolean;
}

/** The sublayers of a {@link Gemma3DecoderBlock} in call order (what the compiled step's rule reads). */
export interface Gemma3BlockParts {
  /** The norm before the attention. */
  preAttentionNorm: Gemma3RMSNormalization;
  /** The attention. */
  attention: CachedGemma3Attention;
  /** The norm of the attention's output, null when unused. */
  postAttentionNorm: Gemma3RMSNormalization | null;
  /** The norm before the feed-forward. */
  preFfwNorm: Gemma3RMSNormalization;
  /** The gate projection (`ffw_gating`, GELU-tanh). */
  gate: layers.Layer;
  /** The up projection (`ffw_gating_2`). */
  up: layers.Layer;
  /** The down projection (`ffw_linear`). */
  down: layers.Layer;
  /** The norm of the feed-forward's output, null when unused. */
  postFfwNorm: Gemma3RMSNormalization | null;
}

/** The block's inputs, in its call's argument order (camelCase). */
const GEMMA3_BLOCK_ROLES = ['x', 'paddingMask'];

const OWN = [
  'hiddenDim',
  'intermediateDim',
  'headDim',
  'numQueryHeads',
  'numKeyValueHeads',
  'queryHeadDimNormalize',
  'useQueryKeyNorm',
  'usePostFfwNorm',
  'usePostAttentionNorm',
  'gateDimReduction',
  'logitSoftCap',
  'useSlidingWindowAttention',
  'slidingWindowSize',
  'layerNormEpsilon',
  'ropeWavelength',
  'ropeScalingFactor',
  'useBidirectionalAttention',
  'dropout',
] as const;

/** keras' `gelu(x, approximate=True)`: `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x³)))`. */
export function geluTanh(x: tf.Tensor): tf.Tensor {
  return tf.tidy(() => {
    const inner = tf.mul(tf.add(x, tf.mul(tf.pow(x, 3), 0.044715)), Math.sqrt(2 / Math.PI));
    return tf.mul(tf.mul(x, 0.5), tf.add(1, tf.tanh(inner)));
  });
}

/**
 * keras-hub's `Gemma3DecoderBlock` (keras_hub/src/models/gemma3/gemma3_decoder_block.py), text
 * only: `h = x + postAttentionNorm(attention(preAttentionNorm(x)))`, then
 * `h + postFfwNorm(ffwLinear(gelu_tanh(gating(preFfwNorm(h))) * gating2(preFfwNorm(h))))`, the
 * norms {@link Gemma3RMSNormalization}s (the post norms optional), the attention a
 * {@link CachedGemma3Attention} (always `1 / sqrt(headDim)`, as keras-hub 0.32's block passes it)
 * with a causal mask and the keys masked by `paddingMask [B, T]` (or, with
 * `useBidirectionalAttention`, every valid position to every valid position).
 * Cached decoding (eager): `apply(x, {cache, cacheUpdateIndex})` returns `[output, cache]`, the
 * cache `[B, 2, maxLength, numKeyValueHeads, headDim]`.
 * Sublayers (keras-hub's names): `pre_attention_norm`, `attention`, `post_attention_norm`,
 * `pre_ffw_norm`, `ffw_gating`, `ffw_gating_2`, `ffw_linear`, `post_ffw_norm`.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Gemma3DecoderBlock} from 'tfjs-attention';
 *
 * const block = new Gemma3DecoderBlock({
 *   hiddenDim: 16,
 *   intermediateDim: 32,
 *   headDim: 8,
 *   numQueryHeads: 4,
 *   numKeyValueHeads: 2,
 * });
 * const y = block.apply(tf.randomNormal([1, 6, 16])); // [1, 6, 16]
 * ```
 */
export class Gemma3DecoderBlock extends TransformerBlock {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'Gemma3DecoderBlock';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        module: 'keras_hub.src.models.gemma3.gemma3_decoder_block',
        // keras-hub 0.32 does not register the class: Keras writes (and finds it by) its module
        registeredName: 'Gemma3DecoderBlock',
        keys: [
          'hidden_dim',
          'intermediate_dim',
          'head_dim',
          'num_query_heads',
          'num_key_value_heads',
          'query_head_dim_normalize',
          'use_query_key_norm',
          'use_post_ffw_norm',
          'use_post_attention_norm',
          'gate_dim_reduction',
          'logit_soft_cap',
          'use_sliding_window_attention',
          'sliding_window_size',
          'layer_norm_epsilon',
          'dropout',
          'rope_wavelength',
          'rope_scaling_factor',
          'use_bidirectional_attention',
        ],
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      call: {kind: 'keyword', roles: GEMMA3_BLOCK_ROLES, positional: 1, options: {training: null}},
    },
    configKeys: [...OWN, 'inputRoles'],
    weights: {
      // keras-hub's attributes (no leading underscore): pre_attention_norm, attention, ...
      keras3Folders: {
        pre_attention_norm: 'pre_attention_norm',
        attention: 'attention',
        post_attention_norm: 'post_attention_norm',
        pre_ffw_norm: 'pre_ffw_norm',
        ffw_gating: 'gating_ffw',
        ffw_gating_2: 'gating_ffw_2',
        ffw_linear: 'ffw_linear',
        post_ffw_norm: 'post_ffw_norm',
      },
      // the three feed-forward kernels have intermediate_dim / gate_dim_reduction columns or rows
      implied: (c) => ({
        values: 3 * Math.floor(configNumber(c, 'intermediateDim') / 2),
        option: 'intermediateDim',
      }),
    },
    decoding: {
      kind: 'cached',
      refuse: (config, node) =>
        config.useBidirectionalAttention === true
          ? 'it attends bidirectionally (an embedding model)'
          : node.inputTensors.length > 2 || node.inputTensors[1]?.dtype === 'float32'
            ? `it is called on ${node.inputTensors.length} inputs (masks beyond a padding mask)`
            : null,
      cacheShape: (config, _input, batch, maxLength) => [
        batch,
        2,
        maxLength,
        config.numKeyValueHeads as number,
        config.headDim as number,
      ],
      cacheKwargs: (cache, index) => ({cache, cacheUpdateIndex: index}),
      readsKerasMasks: false,
      masksQueries: false,
      paddingMaskRole: 'paddingMask',
    },
  });

  protected readonly roleNames = GEMMA3_BLOCK_ROLES;
  protected readonly positionalRoles = 1;
  protected readonly tensorOptions = ['paddingMask'] as const;
  protected readonly otherOptions = ['cache', 'cacheUpdateIndex'] as const;

  /** The `hiddenDim` option. */
  readonly hiddenDim: number;
  /** The `headDim` option. */
  readonly headDim: number;
  /** The `numQueryHeads` option. */
  readonly numQueryHeads: number;
  /** The `numKeyValueHeads` option. */
  readonly numKeyValueHeads: number;
  /** The `queryHeadDimNormalize` option (kept; the attention always normalises by headDim). */
  readonly queryHeadDimNormalize: boolean;
  /** The `useQueryKeyNorm` option. */
  readonly useQueryKeyNorm: boolean;
  /** The `usePostFfwNorm` option. */
  readonly usePostFfwNorm: boolean;
  /** The `usePostAttentionNorm` option. */
  readonly usePostAttentionNorm: boolean;
  /** The `gateDimReduction` option. */
  readonly gateDimReduction: number;
  /** The `logitSoftCap` option. */
  readonly logitSoftCap: number | null;
  /** The `useSlidingWindowAttention` option. */
  readonly useSlidingWindowAttention: boolean;
  /** The `slidingWindowSize` option. */
  readonly slidingWindowSize: number;
  /** The `ropeWavelength` option. */
  readonly ropeWavelength: number;
  /** The `ropeScalingFactor` option. */
  readonly ropeScalingFactor: number;
  /** The `useBidirectionalAttention` option. */
  readonly useBidirectionalAttention: boolean;
  /** The attention sublayer (`attention`), created at build. */
  attention: CachedGemma3Attention | null = null;
  /** The norms by keras-hub's names, created at build (the post norms when used). */
  readonly norms = new Map<string, Gemma3RMSNormalization>();
  /** The gated feed-forward's Dense layers (`ffw_gating`, `ffw_gating_2`, `ffw_linear`). */
  readonly feedForwardDense = new Map<string, layers.Layer>();

  constructor(args: Gemma3DecoderBlockArgs) {
    const cls = 'Gemma3DecoderBlock';
    if (args == null) throw new Error(`${cls}: expected {hiddenDim, intermediateDim, ...}`);
    refuseUnknownOptions(
      args,
      [...OWN, 'name', 'trainable', 'inputRoles', 'quantizationMode', 'int4BlockSize'],
      cls,
    );
    checkHeads(cls, args.numQueryHeads, args.numKeyValueHeads);
    const gate = positiveInteger(args.gateDimReduction, 'gateDimReduction', cls, 2);
    super({
      name: args.name,
      trainable: args.trainable,
      intermediateDim: positiveInteger(args.intermediateDim, 'intermediateDim', cls),
      numHeads: args.numQueryHeads,
      dropout: args.dropout ?? 0,
      layerNormEpsilon: positiveNumber(args.layerNormEpsilon, 'layerNormEpsilon', cls, 1e-6),
      normalizeFirst: true,
      inputRoles: args.inputRoles ?? null,
      // int8 / int4 (quantize(model, mode) rebuilds the block from its config with them)
      quantizationMode: (args as {quantizationMode?: QuantizationMode | null}).quantizationMode,
      int4BlockSize: (args as {int4BlockSize?: number}).int4BlockSize,
    } as TransformerBlockArgs);
    this.hiddenDim = positiveInteger(args.hiddenDim, 'hiddenDim', cls);
    this.headDim = positiveInteger(args.headDim, 'headDim', cls);
    this.numQueryHeads = args.numQueryHeads;
    this.numKeyValueHeads = args.numKeyValueHeads;
    this.queryHeadDimNormalize = booleanOption(
      args.queryHeadDimNormalize,
      'queryHeadDimNormalize',
      cls,
      true,
    );
    this.useQueryKeyNorm = booleanOption(args.useQueryKeyNorm, 'useQueryKeyNorm', cls, false);
    this.usePostFfwNorm = booleanOption(args.usePostFfwNorm, 'usePostFfwNorm', cls, false);
    this.usePostAttentionNorm = booleanOption(
      args.usePostAttentionNorm,
      'usePostAttentionNorm',
      cls,
      false,
    );
    this.gateDimReduction = gate;
    if (Math.floor(this.intermediateDim / gate) === 0) {
      throw new Error(
        `${cls}: expected intermediateDim (${this.intermediateDim}) >= gateDimReduction, ` +
          `received ${gate}`,
      );
    }
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
    this.ropeWavelength = positiveNumber(args.ropeWavelength, 'ropeWavelength', cls, 1e4);
    this.ropeScalingFactor = positiveNumber(args.ropeScalingFactor, 'ropeScalingFactor', cls, 1);
    this.useBidirectionalAttention = booleanOption(
      args.useBidirectionalAttention,
      'useBidirectionalAttention',
      cls,
      false,
    );
  }

  override build(inputShape: Shape | Shape[]): void {
    const shapes = this.shapesByRole(inputShape);
    const shape = shapes.get('x') as Shape;
    if (shape == null || shape.length !== 3 || shape[2] !== this.hiddenDim) {
      throw new Error(
        `Layer '${this.name}' expected x of shape [batch, length, ${this.hiddenDim}] ` +
          `(hiddenDim), received ${shape == null ? 'none' : formatShape(shape)}`,
      );
    }
    const norm = (name: string) => {
      const layer = this.addSublayer(
        new Gemma3RMSNormalization({name, epsilon: this.layerNormEpsilon}),
        shape,
      );
      this.norms.set(name, layer);
    };
    norm('pre_attention_norm');
    this.attention = this.addSublayer(
      new CachedGemma3Attention({
        name: 'attention',
        headDim: this.headDim,
        numQueryHeads: this.numQueryHeads,
        numKeyValueHeads: this.numKeyValueHeads,
        useQueryKeyNorm: this.useQueryKeyNorm,
        logitSoftCap: this.logitSoftCap,
        useSlidingWindowAttention: this.useSlidingWindowAttention,
        slidingWindowSize: this.slidingWindowSize,
        queryHeadDimNormalize: true,
        layerNormEpsilon: this.layerNormEpsilon,
        ropeWavelength: this.ropeWavelength,
        ropeScalingFactor: this.ropeScalingFactor,
        useBidirectionalAttention: this.useBidirectionalAttention,
        dropout: this.dropout,
      }),
      shape,
    );
    if (this.usePostAttentionNorm) norm('post_attention_norm');
    norm('pre_ffw_norm');
    const inner = Math.floor(this.intermediateDim / this.gateDimReduction);
    const dense = (name: string, units: number, input: Shape) =>
      this.feedForwardDense.set(
        name,
        this.addSublayer(
          new Dense({name, units, useBias: false, kernelInitializer: 'glorotUniform'}),
          input,
        ),
      );
    dense('ffw_gating', inner, shape);
    dense('ffw_gating_2', inner, shape);
    dense('ffw_linear', this.hiddenDim, [shape[0], shape[1], inner]);
    if (this.usePostFfwNorm) norm('post_ffw_norm');
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return this.shapesByRole(inputShape).get('x') as Shape;
  }

  /**
   * The sublayers of one call by keras-hub's names (norms, attention, feed-forward Dense layers;
   * the post norms null when unused), or null before build: what the compiled decoding step's
   * rule reads (gemma3_step_rules.ts).
   */
  get stepParts(): Gemma3BlockParts | null {
    const norm = (name: string) => this.norms.get(name) ?? null;
    const dense = (name: string) => this.feedForwardDense.get(name) ?? null;
    const [preAttentionNorm, preFfwNorm] = [norm('pre_attention_norm'), norm('pre_ffw_norm')];
    const [gate, up, down] = [dense('ffw_gating'), dense('ffw_gating_2'), dense('ffw_linear')];
    const attention = this.attention;
    if (preAttentionNorm == null || preFfwNorm == null || attention == null) return null;
    if (gate == null || up == null || down == null) return null;
    return {
      preAttentionNorm,
      attention,
      postAttentionNorm: norm('post_attention_norm'),
      preFfwNorm,
      gate,
      up,
      down,
      postFfwNorm: norm('post_ffw_norm'),
    };
  }

  /** Eager calls return a tensor, or `[output, cache]` with `cache`. */
  override apply(
    inputs: tf.Tensor | tf.Tensor[],
    kwargs: Kwargs & {cache: tf.Tensor},
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

  /** The attention mask `[B, T, S]` of a call (keras-hub's `_compute_attention_mask`), or null. */
  private attentionMask(
    padding: tf.Tensor | null,
    B: number,
    T: number,
    S: number,
    index: number,
  ): tf.Tensor | null {
    const keys = padding == null ? null : tf.expandDims(tf.cast(padding, 'bool'), 1); // [B, 1, S]
    if (this.useBidirectionalAttention) {
      if (keys == null) return null;
      return tf.logicalAnd(keys, tf.transpose(keys, [0, 2, 1])); // [B, T, T]
    }
    const causal = tf.broadcastTo(tf.expandDims(tf.cast(causalMask(T, S, index), 'bool'), 0), [
      B,
      T,
      S,
    ]);
    return keys == null ? causal : tf.logicalAnd(causal, keys);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    this.checkOptions(kwargs);
    return tf.tidy(() => {
      const list = Array.isArray(inputs) ? inputs : [inputs];
      const roles = this.rolesOf(list.length);
      const parts = new Map(roles.map((r, i) => [r, list[i]]));
      const x = parts.get('x') as tf.Tensor;
      if (x.rank !== 3 || x.dtype !== 'float32') {
        throw new Error(
          `Layer '${this.name}' expected a float32 x of shape [batch, length, hidden], received ` +
            `${x.dtype} of shape ${formatShape(x.shape)}`,
        );
      }
      const cache = (kwargs.cache as tf.Tensor | undefined) ?? null;
      const index = (kwargs.cacheUpdateIndex as number | undefined) ?? null;
      if (cache == null && index != null) {
        throw new Error(`Layer '${this.name}': cacheUpdateIndex was given without a cache`);
      }
      const [B, T] = x.shape;
      const training = kwargs.training === true;
      const padding =
        (kwargs.paddingMask as tf.Tensor | undefined) ??
        parts.get('paddingMask') ??
        kerasMaskOf(x, kwargs.mask, roles.indexOf('x'));
      this.checkMaskShape(padding, [B, T], 'paddingMask');
      const S = cache == null ? T : (cache.shape[2] as number);
      const mask = this.attentionMask(cache == null ? padding : null, B, T, S, index ?? 0);
      const norm = (name: string, t: tf.Tensor) =>
        (this.norms.get(name) as Gemma3RMSNormalization).call(t, {});
      const attended = (this.attention as CachedGemma3Attention).call(
        norm('pre_attention_norm', x),
        {
          attentionMask: mask ?? undefined,
          cache: cache ?? undefined,
          cacheUpdateIndex: index ?? undefined,
          training,
        },
      );
      const [attendedOut, newCache] = Array.isArray(attended) ? attended : [attended, null];
      let a = attendedOut;
      if (this.usePostAttentionNorm) a = norm('post_attention_norm', a);
      const h = tf.add(x, this.drop(a, training));
      const rows = reshapeTo(norm('pre_ffw_norm', h), [-1, this.hiddenDim]);
      const dense = (name: string, t: tf.Tensor) =>
        (this.feedForwardDense.get(name) as layers.Layer).call(t, {}) as tf.Tensor;
      const gated = tf.mul(geluTanh(dense('ffw_gating', rows)), dense('ffw_gating_2', rows));
      let f = reshapeTo(dense('ffw_linear', gated), [B, T, this.hiddenDim]);
      if (this.usePostFfwNorm) f = norm('post_ffw_norm', f);
      const output = tf.add(h, this.drop(f, training));
      this.lastOutputCount = newCache == null ? 1 : 2;
      return newCache == null ? output : [output, newCache];
    });
  }

  override computeMask(
    inputs: tf.Tensor | tf.Tensor[],
    mask?: tf.Tensor | tf.Tensor[],
  ): tf.Tensor | tf.Tensor[] {
    return this.outputMasks(inputs, mask, 'x');
  }

  override getConfig(): tf.serialization.ConfigDict {
    const {inputRoles} = this.blockConfig();
    return {
      ...super.getConfig(),
      hiddenDim: this.hiddenDim,
      intermediateDim: this.intermediateDim,
      headDim: this.headDim,
      numQueryHeads: this.numQueryHeads,
      numKeyValueHeads: this.numKeyValueHeads,
      queryHeadDimNormalize: this.queryHeadDimNormalize,
      useQueryKeyNorm: this.useQueryKeyNorm,
      usePostFfwNorm: this.usePostFfwNorm,
      usePostAttentionNorm: this.usePostAttentionNorm,
      gateDimReduction: this.gateDimReduction,
      logitSoftCap: this.logitSoftCap,
      useSlidingWindowAttention: this.useSlidingWindowAttention,
      slidingWindowSize: this.slidingWindowSize,
      layerNormEpsilon: this.layerNormEpsilon,
      ropeWavelength: this.ropeWavelength,
      ropeScalingFactor: this.ropeScalingFactor,
      useBidirectionalAttention: this.useBidirectionalAttention,
      dropout: this.dropout,
      ...(inputRoles != null ? {inputRoles} : {}),
    };
  }
}
