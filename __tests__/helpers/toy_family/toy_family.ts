/**
 * The toy keras-hub family (fixtures/toy_family.py) as the package takes a family: one object
 * with keras-hub's class names, the config keys it reads, its inputs and outputs, the weights a
 * config implies, and `build` (the functional backbone, each weight bound to its Keras 3 path);
 * with what the family's folder brings of its own: its layer classes, its tokenizer class and its
 * preprocessor's defaults.
 *
 * Backbone: token ids -> ReversibleEmbedding (`token_embedding`, tied) -> `num_layers` ToyDecoders
 * (keys masked by `padding_mask`) -> ToyRMSNorm (`sequence_output_layernorm`):
 * `sequence_output [b, T, hidden_dim]`. The causal LM's logits: the embedding's reverse call.
 */
import * as tfl from '@tensorflow/tfjs-layers';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';

import {
  CompositeLayer,
  configFloat,
  configInt,
  contractOf,
  numbered,
  ReversibleEmbedding,
} from '../../../src';
import type {JsonObject, KerasHubFamily, WeightBinding, WeightTerm} from '../../../src';
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

/** A layer's own weights in order, `<folder>/vars/<i>` (Keras 3's layout). */
const inOrder = (layer: tfl.layers.Layer, folder: string): WeightBinding[] =>
  layer.weights.map((variable, i) => ({path: `${folder}/vars/${i}`, variable}));

/**
 * A built ToyDecoder's weights under its Keras 3 folder, from the contracts: each sublayer in the
 * folder its class's contract names (`keras3Folders`, else `_<name>`), and the projections of an
 * attention sublayer in the folders its own contract names (`query` -> `query_dense`).
 */
function decoderWeights(decoder: ToyDecoder, folder: string): WeightBinding[] {
  const folders = ToyDecoder.contract.weights.keras3Folders;
  return decoder.sublayers.flatMap((sub) => {
    const top = `${folder}/${folders[sub.name] ?? `_${sub.name}`}`;
    const projections = contractOf(sub.getClassName())?.weights.sublayers ?? null;
    if (projections == null || !(sub instanceof CompositeLayer)) return inOrder(sub, top);
    return projections.flatMap(({name, keras3}) => {
      const projection = sub.sublayers.find((s) => s.name === name);
      return projection == null ? [] : inOrder(projection, `${top}/${keras3}`);
    });
  });
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
    const weights: WeightBinding[] = [];
    decoders.forEach((decoder, i) => {
      x = decoder.apply([x, paddingMask]) as SymbolicTensor;
      weights.push(...decoderWeights(decoder, `layers/${numbered('toy_decoder', i)}`));
    });
    const norm = new ToyRMSNorm({name: 'sequence_output_layernorm', epsilon});
    const sequenceOutput = norm.apply(x) as SymbolicTensor;
    weights.push(
      ...inOrder(tokenEmbedding, 'layers/reversible_embedding'),
      ...inOrder(norm, 'layers/toy_rms_norm'),
    );
    return {
      inputs: [tokenIds, paddingMask],
      outputs: {sequence_output: sequenceOutput},
      tokenEmbedding,
      weights,
    };
  },
  layers: [ToyDecoder, ToyRMSNorm],
  tokenizer: ToyTokenizer,
  preprocessor: {addStartToken: true, addEndToken: true},
  stepRules: TOY_STEP_RULES,
};
