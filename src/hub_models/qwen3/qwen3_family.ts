/**
 * keras-hub's Qwen 3 (keras_hub/src/models/qwen3/, 0.32): `Qwen3Backbone` and `Qwen3CausalLM`.
 *
 * As Qwen 2.5's backbone (qwen/qwen_family.ts) with `Qwen3TransformerDecoder`s: no attention
 * biases, each head of the queries and keys RMS-normalised before the rotation, heads of
 * `head_dim` (which need not be hidden_dim / num_query_heads), and a sliding window of
 * `sliding_window_size` positions in every layer whenever it is set (keras-hub's default 32768),
 * as keras-hub's TensorFlow path computes it. Tied embedding unless `tie_word_embeddings` is false.
 */
import type {JsonObject} from '../../layers/engine/contract';
import {configInt, KerasHubFamily} from '../family';
import {booleanOption, qwenConfig, qwenGraph, qwenWeightTerms} from '../qwen/qwen_family';
import {Qwen3TransformerDecoder} from './qwen3_decoder';
import {Qwen3LayerNorm} from './qwen3_layer_norm';
import {QWEN3_LAYERS} from './qwen3_layers';
import {QWEN3_STEP_RULES} from './qwen3_step_rules';
import {Qwen3Tokenizer} from './qwen3_tokenizer';

const CLS = 'Qwen3Backbone';

/** keras-hub's Qwen 3 family: `Qwen3Backbone`, `Qwen3CausalLM`. */
export const QWEN3: KerasHubFamily = {
  name: 'Qwen 3',
  backbone: CLS,
  tasks: {Qwen3CausalLM: 'causalLM'},
  inputs: ['token_ids', 'padding_mask'],
  outputs: ['sequence_output'],
  configKeys: [
    'vocabulary_size',
    'num_layers',
    'num_query_heads',
    'hidden_dim',
    'head_dim',
    'intermediate_dim',
    'rope_max_wavelength',
    'rope_scaling_factor',
    'num_key_value_heads',
    'layer_norm_epsilon',
    'dropout',
    'tie_word_embeddings',
    'sliding_window_size',
  ],
  requiredKeys: [
    'vocabulary_size',
    'num_layers',
    'num_query_heads',
    'hidden_dim',
    'head_dim',
    'intermediate_dim',
    'num_key_value_heads',
  ],
  refuse: {tie_word_embeddings: booleanOption},
  layers: QWEN3_LAYERS,
  tokenizer: Qwen3Tokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  weightTerms: (config: JsonObject) =>
    qwenWeightTerms(
      config,
      CLS,
      configInt(config, 'head_dim', CLS) * configInt(config, 'num_query_heads', CLS),
    ),
  build(config: JsonObject) {
    const o = qwenConfig(config, CLS);
    const headDim = configInt(config, 'head_dim', CLS);
    const window = config.sliding_window_size === undefined ? 32768 : config.sliding_window_size;
    const decoders = Array.from(
      {length: o.numLayers},
      (_, i) =>
        new Qwen3TransformerDecoder({
          name: `transformer_layer_${i}`,
          intermediateDim: o.intermediate,
          numQueryHeads: o.numQueryHeads,
          numKeyValueHeads: o.numKeyValueHeads,
          headDim,
          ropeMaxWavelength: o.wavelength,
          ropeScalingFactor: o.scaling,
          layerNormEpsilon: o.epsilon,
          activation: 'silu',
          kernelInitializer: 'zeros',
          dropout: o.dropout,
          slidingWindowSize: window as number | null,
        }),
    );
    const norm = new Qwen3LayerNorm({name: 'sequence_output_layernorm', epsilon: o.epsilon});
    return qwenGraph(config, CLS, decoders, norm);
  },
  stepRules: QWEN3_STEP_RULES,
};
