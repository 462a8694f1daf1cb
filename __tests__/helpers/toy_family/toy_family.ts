/**
 * The toy keras-hub family (fixtures/toy_family.py) as the package takes a family: one object
 * with keras-hub's class names, the config keys it reads, its inputs and outputs, the weights a
 * config implies, and `build` (the functional backbone; its weights' Keras 3 paths derived from the layers'
 * contracts);
 * with what the family's folder brings of its own: its layer classes, its tokenizer class and its
 * preprocessor's defaults.
 *
 * Backbone: token ids -> ReversibleEmbedding (`token_embedding`, tied) -> `num_layers` ToyDecoders
 * (keys masked by `padding_mask`) -> ToyRMSNorm (`sequence_output_layernorm`):
 * `sequence_output [b, T, hidden_dim]`. The causal LM's logits: the embedding's reverse call.
 */
import * as tfl from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import {configFloat, configInt, ReversibleEmbedding} from '../../../src';
import type {JsonObject, KerasHubFamily, WeightTerm} from '../../../src';
import {ToyDecoder} from './toy_decoder';
import {ToyRMSNorm} from './toy_rms_norm';
import {TOY_STEP_RULES} from './toy_step_rules';
import {ToyTokenizer} from './toy_tokenizer';

const CLS = 'ToyBackbone';

/** The config's options, checked (the Python backbone's default epsilon). */
function options(config: JsonObject) {
  return {
    vocab: configInt(config, 'vocabulary_size', CLS),
    numLayers: configInt(config, 'num_layers', CLS),
    numHeads: configInt(config, 'num_heads', CLS),
    hidden: configInt(config, 'hidden_dim', CLS),
    intermediate: configInt(config, 'intermediate_dim', CLS),
    epsilon: configFloat(config, 'layer_norm_epsilon', CLS, 1e-6),
  };
}

/** The toy family: `ToyBackbone`, `ToyCausalLM`, their layers and tokenizer. */
export const TOY: KerasHubFamily = {
  name: 'Toy',
  backbone: CLS,
  tasks: {ToyCausalLM: 'causalLM'},
  inputs: ['token_ids', 'padding_mask'],
  outputs: ['sequence_output'],
  configKeys: [
    'vocabulary_size',
    'num_layers',
    'num_heads',
    'hidden_dim',
    'intermediate_dim',
    'layer_norm_epsilon',
  ],
  requiredKeys: ['vocabulary_size', 'num_layers', 'num_heads', 'hidden_dim', 'intermediate_dim'],
  refuse: {},
  weightTerms(config: JsonObject): WeightTerm[] {
    const {vocab, numLayers, hidden, intermediate} = options(config);
    return [
      {
        keys: {vocabulary_size: vocab, hidden_dim: hidden},
        what: 'a token embedding',
        values: vocab * hidden,
      },
      {
        keys: {num_layers: numLayers, hidden_dim: hidden, intermediate_dim: intermediate},
        what: "the blocks' attention and feed-forward kernels",
        values: numLayers * (4 * hidden * hidden + 2 * hidden * intermediate),
      },
    ];
  },
  build(config: JsonObject) {
    const {vocab, numLayers, numHeads, hidden, intermediate, epsilon} = options(config);
    // every layer is made (its options checked by its constructor) before any weight exists
    const decoders = Array.from(
      {length: numLayers},
      (_, i) =>
        new ToyDecoder({
          name: `transformer_layer_${i}`,
          numHeads,
          intermediateDim: intermediate,
          layerNormEpsilon: epsilon,
        }),
    );
    const tokenIds = tfl.input({shape: [null], dtype: 'int32', name: 'token_ids'});
    const paddingMask = tfl.input({shape: [null], dtype: 'int32', name: 'padding_mask'});
    const tokenEmbedding = new ReversibleEmbedding({
      name: 'token_embedding',
      inputDim: vocab,
      outputDim: hidden,
      tieWeights: true,
    });
    let x = tokenEmbedding.apply(tokenIds) as SymbolicTensor;
    for (const decoder of decoders) x = decoder.apply([x, paddingMask]) as SymbolicTensor;
    const norm = new ToyRMSNorm({name: 'sequence_output_layernorm', epsilon});
    const sequenceOutput = norm.apply(x) as SymbolicTensor;
    return {
      inputs: [tokenIds, paddingMask],
      outputs: {sequence_output: sequenceOutput},
      tokenEmbedding,
    };
  },
  layers: [ToyDecoder, ToyRMSNorm],
  tokenizer: ToyTokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  stepRules: TOY_STEP_RULES,
};
