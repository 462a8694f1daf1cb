/**
 * keras-hub's Mistral (keras_hub/src/models/mistral/, 0.32): `MistralBackbone` and
 * `MistralCausalLM`.
 *
 * Backbone: token ids -> `ReversibleEmbedding` (`token_embedding`, untied) -> `num_layers`
 * `MistralTransformerDecoder`s (RMS norms, causal grouped-query rotary attention over a sliding
 * window of `sliding_window` positions, gated SiLU feed-forward, keys masked by `padding_mask`)
 * -> `MistralLayerNormalization` (`sequence_output_layernorm`): `sequence_output
 * [b, T, hidden_dim]`. The causal LM's logits are the token embedding's reverse call.
 * Refused: a `rope_scaling_factor` other than 1, a `head_dim` other than hidden_dim /
 * num_query_heads.
 */
import * as tf from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import type {Json, JsonObject} from '../../layers/engine/contract';
import {ReversibleEmbedding} from '../../layers/hub/reversible_embedding';
import {configFloat, configInt, configRate, KerasHubFamily, WeightTerm} from '../family';
import {MistralTransformerDecoder} from './mistral_decoder';
import {MistralLayerNormalization} from './mistral_layer_norm';
import {MISTRAL_LAYERS} from './mistral_layers';
import {refuseHeadDim} from './mistral_options';
import {MISTRAL_STEP_RULES} from './mistral_step_rules';
import {MistralTokenizer} from './mistral_tokenizer';

const CLS = 'MistralBackbone';

/** The config's options, checked (keras-hub's defaults where it has them). */
function options(config: JsonObject) {
  return {
    vocab: configInt(config, 'vocabulary_size', CLS),
    numLayers: configInt(config, 'num_layers', CLS),
    numQueryHeads: configInt(config, 'num_query_heads', CLS),
    numKeyValueHeads: configInt(config, 'num_key_value_heads', CLS),
    hidden: configInt(config, 'hidden_dim', CLS),
    intermediate: configInt(config, 'intermediate_dim', CLS),
    wavelength: configFloat(config, 'rope_max_wavelength', CLS, 10000),
    epsilon: configFloat(config, 'layer_norm_epsilon', CLS, 1e-6),
    dropout: configRate(config, 'dropout', CLS, 0),
    // keras-hub's default 512; null: no window
    window:
      config.sliding_window === undefined
        ? 512
        : config.sliding_window === null
          ? null
          : configInt(config, 'sliding_window', CLS),
  };
}

/** keras-hub's Mistral family: `MistralBackbone`, `MistralCausalLM`. */
export const MISTRAL: KerasHubFamily = {
  name: 'Mistral',
  backbone: CLS,
  tasks: {MistralCausalLM: 'causalLM'},
  inputs: ['token_ids', 'padding_mask'],
  outputs: ['sequence_output'],
  configKeys: [
    'vocabulary_size',
    'num_layers',
    'num_query_heads',
    'hidden_dim',
    'intermediate_dim',
    'num_key_value_heads',
    'rope_max_wavelength',
    'rope_scaling_factor',
    'layer_norm_epsilon',
    'sliding_window',
    'head_dim',
    'dropout',
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
    rope_scaling_factor: (value: Json) =>
      value == null || value === 1 ? null : "only 1 is implemented (every Mistral preset's)",
    head_dim: (value: Json, config: JsonObject) =>
      value == null ||
      typeof config.hidden_dim !== 'number' ||
      typeof config.num_query_heads !== 'number'
        ? null
        : refuseHeadDim(value as number, config.hidden_dim, config.num_query_heads),
  },
  layers: MISTRAL_LAYERS,
  tokenizer: MistralTokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  stepRules: MISTRAL_STEP_RULES,
  weightTerms(config: JsonObject): WeightTerm[] {
    const {vocab, numLayers, hidden, intermediate} = options(config);
    return [
      {
        keys: {vocabulary_size: vocab, hidden_dim: hidden},
        what: 'a token embedding and its untied reverse',
        values: 2 * vocab * hidden,
      },
      {
        keys: {num_layers: numLayers, hidden_dim: hidden, intermediate_dim: intermediate},
        what: "the blocks' query, output and feed-forward kernels",
        values: numLayers * (2 * hidden * hidden + 3 * hidden * intermediate),
      },
    ];
  },
  build(config: JsonObject) {
    const o = options(config);
    // every layer is checked by its constructor before any weight exists
    const decoders = Array.from(
      {length: o.numLayers},
      (_, i) =>
        new MistralTransformerDecoder({
          name: `transformer_layer_${i}`,
          intermediateDim: o.intermediate,
          numQueryHeads: o.numQueryHeads,
          numKeyValueHeads: o.numKeyValueHeads,
          ropeMaxWavelength: o.wavelength,
          slidingWindow: o.window,
          layerNormEpsilon: o.epsilon,
          activation: 'silu',
          kernelInitializer: 'zeros',
          dropout: o.dropout,
        }),
    );
    const tokenIds = tf.input({shape: [null], dtype: 'int32', name: 'token_ids'});
    const paddingMask = tf.input({shape: [null], dtype: 'int32', name: 'padding_mask'});
    const tokenEmbedding = new ReversibleEmbedding({
      name: 'token_embedding',
      inputDim: o.vocab,
      outputDim: o.hidden,
      tieWeights: false,
      embeddingsInitializer: 'zeros',
    });
    let x = tokenEmbedding.apply(tokenIds) as SymbolicTensor;
    for (const decoder of decoders) x = decoder.apply(x, {decoderPaddingMask: paddingMask});
    const norm = new MistralLayerNormalization({
      name: 'sequence_output_layernorm',
      epsilon: o.epsilon,
    });
    const sequenceOutput = norm.apply(x) as SymbolicTensor;
    return {
      inputs: [tokenIds, paddingMask],
      outputs: {sequence_output: sequenceOutput},
      tokenEmbedding,
    };
  },
};
