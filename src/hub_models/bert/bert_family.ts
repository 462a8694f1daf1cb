/**
 * keras-hub's BERT (keras_hub/src/models/bert/, 0.32): `BertBackbone` and `BertTextClassifier`.
 *
 * Backbone: token ids -> `ReversibleEmbedding` (`token_embedding`) + `PositionEmbedding`
 * (`max_sequence_length` rows) + segment `Embedding` (`num_segments` rows) -> `LayerNormalization`
 * (epsilon 1e-12) -> dropout -> `num_layers` post-norm `TransformerEncoder`s (tanh GELU, epsilon
 * 1e-12, keys masked by `padding_mask`): `sequence_output [b, T, hidden_dim]`; the first
 * position through a tanh `Dense` (`pooled_dense`): `pooled_output [b, hidden_dim]`. The text
 * classifier adds dropout and a `Dense` of `num_classes` (`logits`) on `pooled_output`.
 */
import * as tf from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import {GetItem} from '../../layers/core/get_item';
import {PositionEmbedding} from '../../layers/hub/position_embedding';
import {ReversibleEmbedding} from '../../layers/hub/reversible_embedding';
import {TransformerEncoder} from '../../layers/hub/transformer_encoder';
import type {JsonObject} from '../../layers/engine/contract';
import {
  configInt,
  KerasHubFamily,
  positionalTransformerOptions,
  positionalTransformerTerms,
  WeightTerm,
} from '../family';
import {BertTokenizer} from './bert_tokenizer';
import {Dense} from '../../layers/core/dense';
import {Embedding} from '../../layers/core/embedding';

const CLS = 'BertBackbone';

/** The config's options, checked (keras-hub's defaults where it has them). */
function options(config: JsonObject) {
  return {
    ...positionalTransformerOptions(config, CLS, 512),
    segments: config.num_segments == null ? 2 : configInt(config, 'num_segments', CLS),
  };
}

/** keras-hub's BERT family: `BertBackbone`, `BertTextClassifier`. */
export const BERT: KerasHubFamily = {
  name: 'BERT',
  backbone: CLS,
  tasks: {BertTextClassifier: 'textClassifier'},
  inputs: ['token_ids', 'segment_ids', 'padding_mask'],
  outputs: ['sequence_output', 'pooled_output'],
  configKeys: [
    'vocabulary_size',
    'num_layers',
    'num_heads',
    'hidden_dim',
    'intermediate_dim',
    'dropout',
    'max_sequence_length',
    'num_segments',
  ],
  requiredKeys: ['vocabulary_size', 'num_layers', 'num_heads', 'hidden_dim', 'intermediate_dim'],
  refuse: {},
  layers: [],
  tokenizer: BertTokenizer,
  // BERT's packer always adds both
  preprocessor: {addStartToken: true, addEndToken: true},
  weightTerms(config: JsonObject): WeightTerm[] {
    const o = options(config);
    return [
      ...positionalTransformerTerms(o),
      {
        keys: {num_segments: o.segments, hidden_dim: o.hidden},
        what: 'a segment embedding',
        values: o.segments * o.hidden,
      },
    ];
  },
  build(config: JsonObject) {
    const {vocab, numLayers, numHeads, hidden, intermediate, dropout, maxLength, segments} =
      options(config);
    // every layer is made (its options checked by its constructor) before any weight exists
    const encoders = Array.from(
      {length: numLayers},
      (_, i) =>
        new TransformerEncoder({
          name: `transformer_layer_${i}`,
          intermediateDim: intermediate,
          numHeads,
          dropout,
          layerNormEpsilon: 1e-12,
          activation: 'gelu_approximate',
          kernelInitializer: 'zeros',
        }),
    );
    const tokenIds = tf.input({shape: [null], dtype: 'int32', name: 'token_ids'});
    const segmentIds = tf.input({shape: [null], dtype: 'int32', name: 'segment_ids'});
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
    const segmentEmbedding = new Embedding({
      name: 'segment_embedding',
      inputDim: segments,
      outputDim: hidden,
      embeddingsInitializer: 'zeros',
    });
    const tokens = tokenEmbedding.apply(tokenIds) as SymbolicTensor;
    const positions = positionEmbedding.apply(tokens) as SymbolicTensor;
    const segmentVectors = segmentEmbedding.apply(segmentIds) as SymbolicTensor;
    let x = tf.layers
      .add({name: 'embeddings_add'})
      .apply([tokens, positions, segmentVectors]) as SymbolicTensor;
    const norm = tf.layers.layerNormalization({name: 'embeddings_layer_norm', epsilon: 1e-12});
    x = norm.apply(x) as SymbolicTensor;
    x = tf.layers.dropout({name: 'embeddings_dropout', rate: dropout}).apply(x) as SymbolicTensor;
    for (const encoder of encoders) x = encoder.apply(x, {paddingMask}) as SymbolicTensor;
    const first = new GetItem({
      name: 'cls_token',
      index: [{start: null, stop: null, step: null}, 0],
    }).apply(x) as SymbolicTensor;
    const pooledDense = new Dense({
      name: 'pooled_dense',
      units: hidden,
      activation: 'tanh',
      kernelInitializer: 'zeros',
    });
    const pooled = pooledDense.apply(first) as SymbolicTensor;
    return {
      inputs: [tokenIds, segmentIds, paddingMask],
      outputs: {sequence_output: x, pooled_output: pooled},
      tokenEmbedding,
    };
  },
};
