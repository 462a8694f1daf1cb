/**
 * keras-hub's SmolLM3 (keras_hub/src/models/smollm3/, 0.32): `SmolLM3Backbone` and
 * `SmolLM3CausalLM`.
 *
 * Backbone: token ids -> `ReversibleEmbedding` (`token_embedding`, tied) -> `num_layers`
 * `SmolLM3DecoderLayer`s (RMS norms, causal grouped-query attention, rotary on the layers whose
 * `rope_layer_enabled_list` entry is true and none on the others, gated SiLU feed-forward, keys
 * masked by `padding_mask`) -> Keras' `RMSNormalization` (`sequence_output_layernorm`):
 * `sequence_output [b, T, hidden_dim]`. The causal LM's logits are the tied embedding's reverse
 * call. Refused: `attention_bias` or `mlp_bias` true, a `partial_rotary_factor` other than 1.
 */
import * as tf from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import type {Json, JsonObject} from '../../layers/engine/contract';
import {ReversibleEmbedding} from '../../layers/hub/reversible_embedding';
import {configFloat, configInt, configRate, KerasHubFamily, WeightTerm} from '../family';
import {RMSNormalization} from './rms_normalization';
import {SmolLM3DecoderLayer} from './smollm3_decoder';
import {SMOLLM3_LAYERS} from './smollm3_layers';
import {SMOLLM3_STEP_RULES} from './smollm3_step_rules';
import {SmolLM3Tokenizer} from './smollm3_tokenizer';

const CLS = 'SmolLM3Backbone';

/** A list option of the config, checked (an error names the key). */
function list<T>(config: JsonObject, key: string, ok: (v: Json) => boolean, what: string): T[] {
  const v = config[key];
  if (!Array.isArray(v) || !v.every(ok)) {
    throw new Error(
      `${CLS}: expected config ${key} to be a list of ${what}, received ${JSON.stringify(v)}`,
    );
  }
  return v as T[];
}

/** The config's options, checked. */
function options(config: JsonObject) {
  return {
    vocab: configInt(config, 'vocabulary_size', CLS),
    hidden: configInt(config, 'hidden_dim', CLS),
    intermediate: configInt(config, 'intermediate_dim', CLS),
    numLayers: configInt(config, 'num_layers', CLS),
    heads: configInt(config, 'num_attention_heads', CLS),
    kvHeads: configInt(config, 'num_key_value_heads', CLS),
    attentionDropout: configRate(config, 'attention_dropout', CLS, 0),
    ropeList: list<boolean>(
      config,
      'rope_layer_enabled_list',
      (v) => typeof v === 'boolean',
      'booleans',
    ),
    layerTypes: list<string>(config, 'layer_types', (v) => typeof v === 'string', 'strings'),
    epsilon: configFloat(config, 'layer_norm_epsilon', CLS, 1e-6),
    maxPositions: configInt(config, 'max_position_embeddings', CLS),
    theta: configFloat(config, 'rope_theta', CLS, 10000),
  };
}

const onlyFalse = (v: Json) =>
  v == null || v === false ? null : "only false is implemented (every SmolLM3 preset's)";

/** keras-hub's SmolLM3 family: `SmolLM3Backbone`, `SmolLM3CausalLM`. */
export const SMOLLM3: KerasHubFamily = {
  name: 'SmolLM3',
  backbone: CLS,
  tasks: {SmolLM3CausalLM: 'causalLM'},
  inputs: ['token_ids', 'padding_mask'],
  outputs: ['sequence_output'],
  configKeys: [
    'vocabulary_size',
    'hidden_dim',
    'intermediate_dim',
    'num_layers',
    'num_attention_heads',
    'num_key_value_heads',
    'attention_bias',
    'attention_dropout',
    'rope_layer_enabled_list',
    'layer_types',
    'mlp_bias',
    'layer_norm_epsilon',
    'max_position_embeddings',
    'rope_theta',
    'partial_rotary_factor',
  ],
  requiredKeys: [
    'vocabulary_size',
    'hidden_dim',
    'intermediate_dim',
    'num_layers',
    'num_attention_heads',
    'num_key_value_heads',
    'rope_layer_enabled_list',
    'layer_types',
    'max_position_embeddings',
  ],
  refuse: {
    attention_bias: onlyFalse,
    mlp_bias: onlyFalse,
    partial_rotary_factor: (v: Json) =>
      v == null || v === 1
        ? null
        : "only 1 is implemented (keras-hub's rotation needs the whole head)",
  },
  layers: SMOLLM3_LAYERS,
  tokenizer: SmolLM3Tokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  stepRules: SMOLLM3_STEP_RULES,
  weightTerms(config: JsonObject): WeightTerm[] {
    const {vocab, numLayers, hidden, intermediate} = options(config);
    return [
      {
        keys: {vocabulary_size: vocab, hidden_dim: hidden},
        what: 'a tied token embedding',
        values: vocab * hidden,
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
    if (o.layerTypes.length < o.numLayers) {
      throw new Error(
        `${CLS}: expected config layer_types to name each of the ${o.numLayers} layers, ` +
          `received ${o.layerTypes.length}`,
      );
    }
    const decoders = Array.from(
      {length: o.numLayers},
      (_, i) =>
        new SmolLM3DecoderLayer({
          name: `transformer_layer_${i}`,
          hiddenSize: o.hidden,
          numAttentionHeads: o.heads,
          numKeyValueHeads: o.kvHeads,
          attentionDropout: o.attentionDropout,
          ropeLayerEnabledList: o.ropeList,
          layerTypes: o.layerTypes,
          layerIdx: i,
          intermediateSize: o.intermediate,
          layerNormEpsilon: o.epsilon,
          maxPositionEmbeddings: o.maxPositions,
          ropeTheta: o.theta,
        }),
    );
    const tokenIds = tf.input({shape: [null], dtype: 'int32', name: 'token_ids'});
    const paddingMask = tf.input({shape: [null], dtype: 'int32', name: 'padding_mask'});
    const tokenEmbedding = new ReversibleEmbedding({
      name: 'token_embedding',
      inputDim: o.vocab,
      outputDim: o.hidden,
      tieWeights: true,
      embeddingsInitializer: 'zeros',
    });
    let x = tokenEmbedding.apply(tokenIds) as SymbolicTensor;
    for (const decoder of decoders) x = decoder.apply(x, {decoderPaddingMask: paddingMask});
    const norm = new RMSNormalization({name: 'sequence_output_layernorm', epsilon: o.epsilon});
    const sequenceOutput = norm.apply(x) as SymbolicTensor;
    return {
      inputs: [tokenIds, paddingMask],
      outputs: {sequence_output: sequenceOutput},
      tokenEmbedding,
    };
  },
};
