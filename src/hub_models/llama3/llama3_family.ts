/**
 * keras-hub's Llama 3 (keras_hub/src/models/llama/ and llama3/, 0.32): `Llama3Backbone` and
 * `Llama3CausalLM`.
 *
 * Backbone: token ids -> `ReversibleEmbedding` (`token_embedding`, tied or not:
 * `tie_word_embeddings`, default untied) -> `num_layers` `LlamaTransformerDecoder`s (RMS norms,
 * causal grouped-query attention with rotary embeddings, gated SiLU feed-forward, keys masked by
 * `padding_mask`) -> `LlamaLayerNorm` (`sequence_output_layernorm`): `sequence_output
 * [b, T, hidden_dim]`. The causal LM's logits are the token embedding's reverse call.
 * Llama 3.1's rope frequency smoothing (`rope_frequency_adjustment_factor`, `rope_low_freq_factor`,
 * `rope_high_freq_factor`, `rope_pretraining_sequence_length`, set together) is implemented.
 * Refused: a `rope_position_scaling_factor` other than 1 (keras-hub 0.32 ignores it), and the
 * smoothing options set in part.
 */
import * as tf from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import {LlamaTransformerDecoder} from './llama_decoder';
import {refuseLlamaRope} from './llama_rope';
import {LlamaLayerNorm} from './llama_layer_norm';
import {ReversibleEmbedding} from '../../layers/hub/reversible_embedding';
import type {Json, JsonObject} from '../../layers/engine/contract';
import {configFloat, configInt, configRate, KerasHubFamily, WeightTerm} from '../family';
import type {ConfigReadFromWeights} from '../family';
import {LLAMA3_LAYERS} from './llama3_layers';
import {LLAMA3_STEP_RULES} from './llama3_step_rules';
import {Llama3Tokenizer} from './llama3_tokenizer';

const CLS = 'Llama3Backbone';

const SMOOTHING = [
  'rope_frequency_adjustment_factor',
  'rope_low_freq_factor',
  'rope_high_freq_factor',
  'rope_pretraining_sequence_length',
];

/**
 * The smoothing options are set together (keras-hub reads the four at once) or not at all; the
 * error names an option that is set.
 */
const together = (value: Json, config: JsonObject) => {
  if (value == null) return null;
  const set = SMOOTHING.filter((k) => config[k] != null);
  return set.length === 0 || set.length === SMOOTHING.length
    ? null
    : `keras-hub sets ${SMOOTHING.join(', ')} together; received only ${set.join(', ')}`;
};

/** A smoothing option's number, or null. */
const smoothing = (config: JsonObject, key: string): number | null =>
  config[key] == null ? null : configFloat(config, key, CLS, 0);

/** The Keras 3 path of a weight of the token embedding (`ReversibleEmbedding`) in the backbone. */
const EMBEDDING_WEIGHT = /^layers\/reversible_embedding\/vars\/\d+$/;

/**
 * keras-hub 0.32's `LlamaBackbone.get_config` drops `tie_word_embeddings`: a tied Llama's preset
 * has a config without it (keras-hub's default: untied) and weights holding one embedding table.
 * Without the option, the weights decide: one table (`[vocabulary_size, ...]`, an int8 table's
 * 1-D scale aside; an int4 table's three, its values, scale and zero points, count as one) is
 * tied; the table and its reverse (`[hidden_dim or its packed half or groups, vocabulary_size]`,
 * as many) untied; any other count fits neither reading and is refused.
 */
function tieFromWeights(
  config: JsonObject,
  shapes: ReadonlyMap<string, readonly number[]>,
): ConfigReadFromWeights | null {
  if (config.tie_word_embeddings != null) return null;
  const vocab = config.vocabulary_size;
  const tables = [...shapes].filter(([p, s]) => EMBEDDING_WEIGHT.test(p) && s.length === 2);
  const reverse = tables.filter(([, s]) => s[0] !== vocab).length;
  const forward = tables.length - reverse;
  const one = forward === 1 || forward === 3; // a table (int4 grouped: values, scale, zeros)
  if (one && reverse === forward) return null;
  if (one && reverse === 0) {
    return {
      config: {...config, tie_word_embeddings: true},
      note:
        'config has no tie_word_embeddings (keras-hub 0.32 does not write it) and the weights ' +
        `hold one embedding table (${tables[0][0]}): loaded with tied embeddings`,
    };
  }
  throw new Error(
    `${CLS}: config has no tie_word_embeddings (keras-hub 0.32 does not write it), so the ` +
      'weights decide; expected one token embedding table at layers/reversible_embedding/vars/0 ' +
      '(tied) or two, the table and its reverse (untied); received ' +
      (tables.length === 0
        ? 'none'
        : `${tables.length}: ${tables.map(([p, s]) => `${p} [${s.join(', ')}]`).join(', ')}`),
  );
}

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
    tied: config.tie_word_embeddings === true,
  };
}

/** keras-hub's Llama 3 family: `Llama3Backbone`, `Llama3CausalLM`. */
export const LLAMA3: KerasHubFamily = {
  name: 'Llama 3',
  backbone: CLS,
  tasks: {Llama3CausalLM: 'causalLM'},
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
    'rope_position_scaling_factor',
    'rope_frequency_adjustment_factor',
    'rope_low_freq_factor',
    'rope_high_freq_factor',
    'rope_pretraining_sequence_length',
    'layer_norm_epsilon',
    'dropout',
    'tie_word_embeddings',
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
    // a function, not a call at module level: the object stays tree-shakable (a layers-only app
    // carries no family and no tokenizer)
    rope_position_scaling_factor: (value: Json) =>
      refuseLlamaRope('rope_position_scaling_factor', value),
    rope_frequency_adjustment_factor: together,
    rope_low_freq_factor: together,
    rope_high_freq_factor: together,
    rope_pretraining_sequence_length: together,
    tie_word_embeddings: (v) =>
      v == null || typeof v === 'boolean' ? null : 'expected true, false or null',
  },
  layers: LLAMA3_LAYERS,
  tokenizer: Llama3Tokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  stepRules: LLAMA3_STEP_RULES,
  configFromWeights: tieFromWeights,
  weightTerms(config: JsonObject): WeightTerm[] {
    const {vocab, numLayers, hidden, intermediate, tied} = options(config);
    return [
      {
        keys: {vocabulary_size: vocab, hidden_dim: hidden},
        what: tied ? 'a token embedding' : 'a token embedding and its untied reverse',
        values: (tied ? 1 : 2) * vocab * hidden,
      },
      {
        keys: {num_layers: numLayers, hidden_dim: hidden, intermediate_dim: intermediate},
        what: "the blocks' query, output and feed-forward kernels",
        values: numLayers * (2 * hidden * hidden + 3 * hidden * intermediate),
      },
    ];
  },
  build(config: JsonObject) {
    const {
      vocab,
      numLayers,
      numQueryHeads,
      numKeyValueHeads,
      hidden,
      intermediate,
      wavelength,
      epsilon,
      dropout,
      tied,
    } = options(config);
    // every layer is checked by its constructor before any weight exists
    const decoders = Array.from(
      {length: numLayers},
      (_, i) =>
        new LlamaTransformerDecoder({
          name: `transformer_layer_${i}`,
          intermediateDim: intermediate,
          numQueryHeads,
          numKeyValueHeads,
          ropeMaxWavelength: wavelength,
          ropeFrequencyAdjustmentFactor: smoothing(config, 'rope_frequency_adjustment_factor'),
          ropeLowFreqFactor: smoothing(config, 'rope_low_freq_factor'),
          ropeHighFreqFactor: smoothing(config, 'rope_high_freq_factor'),
          ropePretrainingSequenceLength: smoothing(config, 'rope_pretraining_sequence_length'),
          layerNormEpsilon: epsilon,
          activation: 'silu',
          kernelInitializer: 'zeros',
          dropout,
        }),
    );
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
    for (const decoder of decoders) x = decoder.apply(x, {decoderPaddingMask: paddingMask});
    const norm = new LlamaLayerNorm({name: 'sequence_output_layernorm', epsilon});
    const sequenceOutput = norm.apply(x) as SymbolicTensor;
    return {
      inputs: [tokenIds, paddingMask],
      outputs: {sequence_output: sequenceOutput},
      tokenEmbedding,
    };
  },
};
