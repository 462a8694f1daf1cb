/**
 * keras-hub's GPT-2 (keras_hub/src/models/gpt2/, 0.32): `GPT2Backbone` and `GPT2CausalLM`.
 *
 * Backbone: token ids -> `ReversibleEmbedding` (`token_embedding`) + `PositionEmbedding`
 * (`position_embedding`, `max_sequence_length` rows) -> dropout -> `num_layers` pre-norm
 * `TransformerDecoder`s (tanh GELU, epsilon 1e-5, keys masked by `padding_mask`) -> final
 * `LayerNormalization` (epsilon 1e-5): `sequence_output [b, T, hidden_dim]`. The causal LM's logits
 * are the token embedding's reverse call (tied weights): `[b, T, vocabulary_size]`.
 */
import * as tf from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import {PositionEmbedding} from '../../layers/hub/position_embedding';
import {ReversibleEmbedding} from '../../layers/hub/reversible_embedding';
import {TransformerDecoder} from '../../layers/hub/transformer_decoder';
import type {JsonObject} from '../../layers/engine/contract';
import {
  KerasHubFamily,
  positionalTransformerOptions,
  positionalTransformerTerms,
  WeightTerm,
} from '../family';
import {GPT2Tokenizer} from './gpt2_tokenizer';

const CLS = 'GPT2Backbone';

/** The config's options, checked (keras-hub's defaults where it has them). */
const options = (config: JsonObject) => positionalTransformerOptions(config, CLS, 1024);

/** keras-hub's GPT-2 family: `GPT2Backbone`, `GPT2CausalLM`. */
export const GPT2: KerasHubFamily = {
  name: 'GPT-2',
  backbone: CLS,
  tasks: {GPT2CausalLM: 'causalLM'},
  inputs: ['token_ids', 'padding_mask'],
  outputs: ['sequence_output'],
  configKeys: [
    'vocabulary_size',
    'num_layers',
    'num_heads',
    'hidden_dim',
    'intermediate_dim',
    'dropout',
    'max_sequence_length',
  ],
  requiredKeys: ['vocabulary_size', 'num_layers', 'num_heads', 'hidden_dim', 'intermediate_dim'],
  refuse: {},
  layers: [],
  tokenizer: GPT2Tokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  weightTerms(config: JsonObject): WeightTerm[] {
    return positionalTransformerTerms(options(config));
  },
  build(config: JsonObject) {
    const {vocab, numLayers, numHeads, hidden, intermediate, dropout, maxLength} = options(config);
    // every layer is made (its options checked by its constructor) before any weight exists
    const decoders = Array.from(
      {length: numLayers},
      (_, i) =>
        new TransformerDecoder({
          name: `transformer_layer_${i}`,
          intermediateDim: intermediate,
          numHeads,
          dropout,
          layerNormEpsilon: 1e-5,
          activation: 'gelu_approximate',
          kernelInitializer: 'zeros',
          normalizeFirst: true,
        }),
    );
    const tokenIds = tf.input({shape: [null], dtype: 'int32', name: 'token_ids'});
    const paddingMask = tf.input({shape: [null], dtype: 'int32', name: 'padding_mask'});
    const tokenEmbedding = new ReversibleEmbedding({
      name: 'token_embedding',
      inputDim: vocab,
      outputDim: hidden,
      embeddingsInitializer: 'zeros',
    });
    const positionEmbedding = new PositionEmbedding({
      name: 'position_embedding',
      sequenceLength: maxLength,
      initializer: 'zeros',
    });
    const tokens = tokenEmbedding.apply(tokenIds) as SymbolicTensor;
    const positions = positionEmbedding.apply(tokens) as SymbolicTensor;
    let x = tf.layers.add({name: 'embeddings_add'}).apply([tokens, positions]) as SymbolicTensor;
    x = tf.layers.dropout({name: 'embeddings_dropout', rate: dropout}).apply(x) as SymbolicTensor;
    for (const decoder of decoders) x = decoder.apply(x, {decoderPaddingMask: paddingMask});
    const norm = tf.layers.layerNormalization({name: 'layer_norm', epsilon: 1e-5});
    const sequenceOutput = norm.apply(x) as SymbolicTensor;
    return {
      inputs: [tokenIds, paddingMask],
      outputs: {sequence_output: sequenceOutput},
      tokenEmbedding,
    };
  },
};
