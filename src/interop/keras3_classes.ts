/**
 * What each layer of this package is in Keras 3, for {@link toKeras3Artifacts}
 * (keras3_export.ts): its class and package, the config keys Keras takes, the layers Keras has no
 * class for (and what to use instead), and how input roles become call arguments.
 */
const HUB = 'keras_hub';
export const COMMON = ['name', 'trainable', 'dtype'];
const INIT = ['kernel_initializer', 'bias_initializer'];
const REG = [
  'kernel_regularizer',
  'bias_regularizer',
  'activity_regularizer',
  'kernel_constraint',
  'bias_constraint',
];

/** Keras 3 classes this package's layers map to: the package, and the config keys Keras takes. */
export const CLASSES: Record<string, {pkg?: string; keys: string[]}> = {
  MultiHeadAttention: {
    keys: ['num_heads', 'key_dim', 'value_dim', 'dropout', 'use_bias', 'output_shape'].concat([
      'attention_axes',
      'seed',
      ...INIT,
      ...REG,
    ]),
  },
  CachedMultiHeadAttention: {
    pkg: HUB,
    keys: ['num_heads', 'key_dim', 'value_dim', 'dropout', 'use_bias', 'output_shape'].concat([
      'attention_axes',
      'seed',
      ...INIT,
      ...REG,
    ]),
  },
  GroupQueryAttention: {
    keys: [
      'head_dim',
      'num_query_heads',
      'num_key_value_heads',
      'dropout',
      'use_bias',
      'seed',
    ].concat([...INIT, ...REG]),
  },
  Attention: {keys: ['use_scale', 'score_mode', 'dropout', 'seed']},
  AdditiveAttention: {keys: ['use_scale', 'dropout', 'seed']},
  EinsumDense: {keys: ['equation', 'output_shape', 'activation', 'bias_axes', ...INIT, ...REG]},
  TokenAndPositionEmbedding: {
    pkg: HUB,
    keys: ['vocabulary_size', 'sequence_length', 'embedding_dim', 'embeddings_initializer'].concat([
      'mask_zero',
    ]),
  },
  PositionEmbedding: {pkg: HUB, keys: ['sequence_length', 'initializer']},
  SinePositionEncoding: {pkg: HUB, keys: ['max_wavelength']},
  RotaryEmbedding: {
    pkg: HUB,
    keys: ['max_wavelength', 'scaling_factor', 'sequence_axis', 'feature_axis'],
  },
  ReversibleEmbedding: {
    pkg: HUB,
    keys: ['input_dim', 'output_dim', 'tie_weights', 'embeddings_initializer', 'mask_zero'].concat([
      'logit_soft_cap',
      'embeddings_regularizer',
      'embeddings_constraint',
      'activity_regularizer',
    ]),
  },
  TransformerEncoder: {
    pkg: HUB,
    keys: ['intermediate_dim', 'num_heads', 'dropout', 'activation', 'layer_norm_epsilon'].concat([
      'normalize_first',
      ...INIT,
    ]),
  },
  TransformerDecoder: {
    pkg: HUB,
    keys: ['intermediate_dim', 'num_heads', 'dropout', 'activation', 'layer_norm_epsilon'].concat([
      'normalize_first',
      ...INIT,
    ]),
  },
  GetItem: {keys: ['index']},
};

/** This package's layers Keras has no class for, and what to use instead. */
export const REFUSED: Record<string, string> = {
  DotProductAttention:
    'Keras has no DotProductAttention layer; build the model with Attention (the same scaled ' +
    "dot product, Keras' keras.layers.Attention) or MultiHeadAttention instead",
};

/** Config keys of this package that Keras 3 has as call arguments instead. */
export const CALL_OPTIONS = ['use_causal_mask', 'return_attention_scores'];
/** Config keys of this package that Keras 3 derives from the inputs. */
export const DERIVED = ['query_shape', 'value_shape', 'key_shape', 'input_roles'];

/** Which call argument each input role becomes, per class (positional: the first n). */
export const ATTENTION = ['MultiHeadAttention', 'CachedMultiHeadAttention', 'GroupQueryAttention'];
export const KEYWORD: Record<string, {roles: string[]; positional: number}> = {
  TransformerEncoder: {roles: ['inputs', 'padding_mask', 'attention_mask'], positional: 1},
  TransformerDecoder: {
    roles: [
      'decoder_sequence',
      'encoder_sequence',
      'decoder_padding_mask',
      'decoder_attention_mask',
      'encoder_padding_mask',
      'encoder_attention_mask',
    ],
    positional: 2,
  },
};
