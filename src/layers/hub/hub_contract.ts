/**
 * What the keras-hub layers' contracts (engine/contract.ts) share: the refusal for tf-keras 2,
 * the transformer blocks' Keras 3 keys, input roles and weight folders, and the decoder's cached
 * decoding.
 */
import {configNumber, largestOption, WeightContract} from '../engine/contract';
import type {CachedDecoding} from '../engine/contract';

/** tf-keras 2 has no keras-hub. */
export const HUB_NEEDS_KERAS3 =
  'tf-keras 2 cannot load (a keras-hub layer, which needs Keras 3); export the model with ' +
  'toKeras3Artifacts instead';

/** The Keras 3 config keys of keras-hub's TransformerEncoder and TransformerDecoder. */
export const TRANSFORMER_KERAS3_KEYS: readonly string[] = [
  'intermediate_dim',
  'num_heads',
  'dropout',
  'activation',
  'layer_norm_epsilon',
  'normalize_first',
  'kernel_initializer',
  'bias_initializer',
];

/** The config keys keras-hub's TransformerEncoder and TransformerDecoder write here (camelCase). */
export const TRANSFORMER_CONFIG_KEYS: readonly string[] = [
  'intermediateDim',
  'numHeads',
  'dropout',
  'activation',
  'layerNormEpsilon',
  'kernelInitializer',
  'biasInitializer',
  'kernelRegularizer',
  'biasRegularizer',
  'normalizeFirst',
  'seed',
  'inputRoles',
];

/** TransformerEncoder's inputs, in its call's argument order (camelCase). */
export const ENCODER_ROLES = ['inputs', 'paddingMask', 'attentionMask'] as const;

/** TransformerDecoder's inputs, in its call's argument order (camelCase). */
export const DECODER_ROLES = [
  'decoderSequence',
  'encoderSequence',
  'decoderPaddingMask',
  'decoderAttentionMask',
  'encoderPaddingMask',
  'encoderAttentionMask',
] as const;

/** The blocks' weights: attention sublayers in keras-hub's attribute folders. */
export const TRANSFORMER_WEIGHTS: WeightContract = {
  sublayers: null,
  keras3Folders: {
    self_attention: '_self_attention_layer',
    cross_attention: '_cross_attention_layer',
  },
  // at least the feed-forward biases, and a head size >= 1 per head in each projection
  implied: (c) => ({
    values: configNumber(c, 'intermediateDim') + 4 * configNumber(c, 'numHeads'),
    option: largestOption(c, ['intermediateDim', 'numHeads']),
  }),
};

/**
 * keras-hub's TransformerDecoder used decoder-only: causal self-attention, its cache
 * `[batch, 2, maxLength, numHeads, floor(hiddenDim / numHeads)]`, `[output, cache]` returned.
 */
export const DECODER_DECODING: CachedDecoding = {
  kind: 'cached',
  // (a padding mask input besides the sequence is checked by the planner)
  refuse: (config, node) =>
    node.inputTensors.length !== 1 && node.inputTensors[1]?.dtype === 'float32'
      ? `it is called on ${node.inputTensors.length} inputs (an encoder sequence or masks); ` +
        `only the decoder-only use runs with a cache`
      : node.inputTensors.length > 2
        ? `it is called on ${node.inputTensors.length} inputs (masks beyond a padding mask)`
        : config.useCausalMask === false
          ? 'it is not causal'
          : null,
  cacheShape: (config, input, batch, maxLength) => {
    const heads = config.numHeads as number;
    // keras-hub's head size is hidden // heads (the layer floors it too)
    return [batch, 2, maxLength, heads, Math.floor((input[input.length - 1] as number) / heads)];
  },
  cacheKwargs: (cache, index, keyMask) => ({
    selfAttentionCache: cache,
    selfAttentionCacheUpdateIndex: index,
    ...(keyMask != null ? {decoderAttentionMask: keyMask} : {}),
  }),
  readsKerasMasks: true,
  masksQueries: false,
  paddingMaskRole: 'decoderPaddingMask',
};
