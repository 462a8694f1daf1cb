/**
 * The config keys the Keras loader accepts for each attention layer: the keys the layer's own
 * `getConfig` writes (snake_cased, as Keras and the converter write them), plus the few keys only
 * Keras writes. An option added to a layer's config is accepted here without another list.
 */
import type * as tf from '@tensorflow/tfjs-core';

import {AdditiveAttention} from '../layers/attention/additive_attention';
import {GroupQueryAttention} from '../layers/attention/group_query_attention';
import {Attention} from '../layers/attention/dot_product_attention';
import {MultiHeadAttention} from '../layers/attention/multi_head_attention';

/** Keras' `to_snake_case`. */
export function snake(name: string): string {
  return name
    .replace(/(.)([A-Z][a-z]+)/g, '$1_$2')
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .toLowerCase();
}

/** Keys Keras writes that no config here has: the layer's build input and old spellings. */
const KERAS_ONLY: Record<string, string[]> = {
  common: ['batch_input_shape', 'dtype'],
  MultiHeadAttention: [],
  CachedMultiHeadAttention: [],
  GroupQueryAttention: [],
  // Keras <= 2.9 wrote `causal` (rewritten to use_causal_mask by the loader)
  Attention: ['causal'],
  AdditiveAttention: ['causal'],
};

/** Layers with every optional config key set, so each key appears in their config. */
const EVERY_OPTION = {
  common: {
    useCausalMask: true,
    returnAttentionScores: true,
    inputRoles: ['query' as const],
    zeroFullyMaskedRows: true,
  },
};
const mhaSample = () =>
  new MultiHeadAttention({
    ...EVERY_OPTION.common,
    numHeads: 1,
    keyDim: 1,
    useGate: true,
    slidingWindow: 1,
    softmaxRobustMasking: true,
    chunkSize: 1,
  });
const SAMPLES: Record<string, () => {getConfig(): tf.serialization.ConfigDict}> = {
  MultiHeadAttention: mhaSample,
  CachedMultiHeadAttention: mhaSample,
  GroupQueryAttention: () =>
    new GroupQueryAttention({
      ...EVERY_OPTION.common,
      headDim: 1,
      numQueryHeads: 1,
      numKeyValueHeads: 1,
      useGate: true,
      slidingWindow: 1,
    }),
  Attention: () => new Attention({...EVERY_OPTION.common}),
  AdditiveAttention: () => new AdditiveAttention({...EVERY_OPTION.common}),
};

const cache = new Map<string, Set<string>>();

/** The snake_case config keys accepted for Keras layer class `cls`. */
export function kerasConfigKeys(cls: string): Set<string> {
  let keys = cache.get(cls);
  if (keys == null) {
    const sample = SAMPLES[cls];
    if (sample == null) throw new Error(`kerasConfigKeys: no attention layer class '${cls}'`);
    keys = new Set([
      ...Object.keys(sample().getConfig()).map(snake),
      ...KERAS_ONLY.common,
      ...(KERAS_ONLY[cls] ?? []),
    ]);
    cache.set(cls, keys);
  }
  return keys;
}
