/**
 * keras-hub's Qwen 2.5 (keras_hub/src/models/qwen/, 0.32): `QwenBackbone` and `QwenCausalLM`.
 *
 * Backbone: token ids -> `ReversibleEmbedding` (`token_embedding`, tied unless
 * `tie_word_embeddings` is false) -> `num_layers` `QwenTransformerDecoder`s (RMS norms, causal
 * grouped-query attention with query / key / value biases and rotary embeddings, gated SiLU
 * feed-forward, keys masked by `padding_mask`; with `use_sliding_window_attention`, each query
 * attends to the last `sliding_window_size` positions, as keras-hub's TensorFlow path computes
 * it) -> `QwenLayerNorm` (`sequence_output_layernorm`): `sequence_output [b, T, hidden_dim]`. The
 * causal LM's logits are the token embedding's reverse call.
 */
import * as tf from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import {ReversibleEmbedding} from '../../layers/hub/reversible_embedding';
import type {Json, JsonObject} from '../../layers/engine/contract';
import {configFloat, configInt, configRate, KerasHubFamily, WeightTerm} from '../family';
import {QwenTransformerDecoder} from './qwen_decoder';
import {QwenLayerNorm} from './qwen_layer_norm';
import {QWEN_LAYERS} from './qwen_layers';
import {QWEN_STEP_RULES} from './qwen_step_rules';
import {QwenTokenizer} from './qwen_tokenizer';

const CLS = 'QwenBackbone';

/** A config option that must be true, false or null. */
export const booleanOption = (v: Json) =>
  v == null || typeof v === 'boolean' ? null : 'expected true, false or null';

/** The options the Qwen backbones share, checked (keras-hub's defaults where it has them). */
export function qwenConfig(config: JsonObject, cls: string) {
  return {
    vocab: configInt(config, 'vocabulary_size', cls),
    numLayers: configInt(config, 'num_layers', cls),
    numQueryHeads: configInt(config, 'num_query_heads', cls),
    numKeyValueHeads: configInt(config, 'num_key_value_heads', cls),
    hidden: configInt(config, 'hidden_dim', cls),
    intermediate: configInt(config, 'intermediate_dim', cls),
    wavelength: configFloat(config, 'rope_max_wavelength', cls, 10000),
    scaling: configFloat(config, 'rope_scaling_factor', cls, 1),
    epsilon: configFloat(config, 'layer_norm_epsilon', cls, 1e-6),
    dropout: configRate(config, 'dropout', cls, 0),
    // keras-hub's Qwen backbones tie by default
    tied: config.tie_word_embeddings !== false,
  };
}

/**
 * The weights a Qwen config implies: the embedding (and its untied reverse), the blocks' query,
 * output and feed-forward kernels (`queryWidth`: the query heads' total width).
 */
export function qwenWeightTerms(
  config: JsonObject,
  cls: string,
  queryWidth?: number,
): WeightTerm[] {
  const {vocab, numLayers, hidden, intermediate, tied} = qwenConfig(config, cls);
  const q = queryWidth ?? hidden;
  return [
    {
      keys: {vocabulary_size: vocab, hidden_dim: hidden},
      what: tied ? 'a token embedding' : 'a token embedding and its untied reverse',
      values: (tied ? 1 : 2) * vocab * hidden,
    },
    {
      keys: {num_layers: numLayers, hidden_dim: hidden, intermediate_dim: intermediate},
      what: "the blocks' query, output and feed-forward kernels",
      values: numLayers * (2 * hidden * q + 3 * hidden * intermediate),
    },
  ];
}

/** A Qwen backbone's graph around its decoder blocks (`norm`: the final RMS norm). */
export function qwenGraph(
  config: JsonObject,
  cls: string,
  decoders: readonly tf.layers.Layer[],
  norm: tf.layers.Layer,
) {
  const {vocab, hidden, tied} = qwenConfig(config, cls);
  const tokenIds = tf.input({shape: [null], dtype: 'int32', name: 'token_ids'});
  const paddingMask = tf.input({shape: [null], dtype: 'int32', name: 'padding_mask'});
  const tokenEmbedding = new ReversibleEmbedding({
    name: 'token_embedding',
    inputDim: vocab,
    outputDim: hidden,
    tieWeights: tied,
    embeddingsInitializer: 'zeros',
  });
  let x = tokenEmbedding.apply(tokenIds) as SymbolicTensor;
  for (const decoder of decoders) {
    x = decoder.apply(x, {decoderPaddingMask: paddingMask}) as SymbolicTensor;
  }
  const sequenceOutput = norm.apply(x) as SymbolicTensor;
  return {
    inputs: [tokenIds, paddingMask],
    outputs: {sequence_output: sequenceOutput},
    tokenEmbedding,
  };
}

/** keras-hub's Qwen 2.5 family: `QwenBackbone`, `QwenCausalLM`. */
export const QWEN: KerasHubFamily = {
  name: 'Qwen 2.5',
  backbone: CLS,
  tasks: {QwenCausalLM: 'causalLM'},
  inputs: ['token_ids', 'padding_mask'],
  outputs: ['sequence_output'],
  configKeys: [
    'vocabulary_size',
    'num_layers',
    'num_query_heads',
    'hidden_dim',
    'intermediate_dim',
    'rope_max_wavelength',
    'rope_scaling_factor',
    'num_key_value_heads',
    'layer_norm_epsilon',
    'dropout',
    'tie_word_embeddings',
    'use_sliding_window_attention',
    'sliding_window_size',
  ],
  requiredKeys: [
    'vocabulary_size',
    'num_layers',
    'num_query_heads',
    'hidden_dim',
    'intermediate_dim',
    'num_key_value_heads',
  ],
  refuse: {
    tie_word_embeddings: booleanOption,
    use_sliding_window_attention: booleanOption,
  },
  layers: QWEN_LAYERS,
  tokenizer: QwenTokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  weightTerms: (config: JsonObject) => qwenWeightTerms(config, CLS),
  build(config: JsonObject) {
    const o = qwenConfig(config, CLS);
    const window = config.use_sliding_window_attention === true;
    // every layer is checked by its constructor before any weight exists
    const decoders = Array.from(
      {length: o.numLayers},
      (_, i) =>
        new QwenTransformerDecoder({
          name: `transformer_layer_${i}`,
          intermediateDim: o.intermediate,
          numQueryHeads: o.numQueryHeads,
          numKeyValueHeads: o.numKeyValueHeads,
          ropeMaxWavelength: o.wavelength,
          ropeScalingFactor: o.scaling,
          layerNormEpsilon: o.epsilon,
          activation: 'silu',
          kernelInitializer: 'zeros',
          dropout: o.dropout,
          useSlidingWindowAttention: window,
          // keras-hub's backbone default
          slidingWindowSize: (config.sliding_window_size as number | null) ?? 32768,
        }),
    );
    const norm = new QwenLayerNorm({name: 'sequence_output_layernorm', epsilon: o.epsilon});
    return qwenGraph(config, CLS, decoders, norm);
  },
  stepRules: QWEN_STEP_RULES,
};
