/**
 * What the attention layers' contracts (engine/contract.ts) share: the Keras 3 config keys of
 * the multi-head layers, the config keys every attention layer writes, the weight sizes a
 * multi-head config implies, the cache refusals, and Keras' lack of DotProductAttention.
 */
import {configNumber, largestOption, NodeCheck, WeightContract} from '../engine/contract';
import {refuseSelfAttention} from '../engine/decoding_checks';
import {PROJECTION_CONFIG_KEYS, PROJECTION_KERAS3_KEYS} from '../core/projection_options';

export {PROJECTION_CONFIG_KEYS, PROJECTION_KERAS3_KEYS};

/** The Keras 3 config keys of MultiHeadAttention (and keras-hub's CachedMultiHeadAttention). */
export const MULTI_HEAD_KERAS3_KEYS: readonly string[] = [
  'num_heads',
  'key_dim',
  'value_dim',
  'dropout',
  'use_bias',
  'output_shape',
  'attention_axes',
  'seed',
  // Keras 3.15 has both (keras/src/layers/attention/multi_head_attention.py)
  'use_gate',
  'sliding_window',
  ...PROJECTION_KERAS3_KEYS,
];

/** The config keys every attention layer writes (BaseAttention), its call settings included. */
export const ATTENTION_CONFIG_KEYS: readonly string[] = [
  'dropout',
  'seed',
  'useCausalMask',
  'returnAttentionScores',
  'inputRoles',
  'zeroFullyMaskedRows',
];

/** At least query, key, value and output kernels of `num_heads` heads. */
export const multiHeadImplied: WeightContract['implied'] = (c) => ({
  values:
    configNumber(c, 'numHeads') *
    (2 * configNumber(c, 'keyDim') +
      2 * (configNumber(c, 'valueDim') || configNumber(c, 'keyDim'))),
  option: largestOption(c, ['numHeads', 'keyDim', 'valueDim']),
});

/** Causal self-attention, and one head size (keras-hub's cache layout holds one). */
export const refuseMultiHeadCache: NodeCheck = (config, node) =>
  refuseSelfAttention(config, node) ??
  (config.keyDim !== config.valueDim
    ? `its keyDim ${config.keyDim} differs from its valueDim ${config.valueDim} (keras-hub's ` +
      `cache layout holds one head size)`
    : null);

/** Attention layers without a key / value cache. */
export const NO_CACHE = {
  kind: 'refused' as const,
  reason:
    'not known to compute each position alone (it has no key / value cache: use ' +
    'MultiHeadAttention or GroupQueryAttention with useCausalMask)',
};

/** Keras has no DotProductAttention layer (this package's d2l name for it). */
export const NO_KERAS_DOT_PRODUCT =
  'Keras has no class for; build the model with Attention (the same scaled dot product, ' +
  "Keras' keras.layers.Attention) or MultiHeadAttention instead";
