/**
 * keras-hub's weight paths of the package's layers: a layer's own weights in order
 * (`<folder>/vars/<i>`), and keras-hub's transformer blocks, whose sublayers Keras 3 keeps under
 * their attribute names (`_self_attention_layer/query_dense/vars/0`).
 */
import type {layers} from '@tensorflow/tfjs-layers';

import type {WeightBinding} from './family';

/** A layer's weights in creation order as `<folder>/vars/<i>` (Dense, LayerNormalization, embeddings). */
export function weightsInOrder(layer: layers.Layer, folder: string): WeightBinding[] {
  return layer.weights.map((variable, i) => ({path: `${folder}/vars/${i}`, variable}));
}

/** keras-hub's attribute folders of the blocks' sublayers (tfjs sublayer name -> Keras 3 folder). */
const BLOCK_FOLDERS: Readonly<Record<string, string>> = {
  self_attention: '_self_attention_layer',
  self_attention_layer: '_self_attention_layer',
  self_attention_layer_norm: '_self_attention_layer_norm',
  feedforward_intermediate_dense: '_feedforward_intermediate_dense',
  feedforward_output_dense: '_feedforward_output_dense',
  feedforward_layer_norm: '_feedforward_layer_norm',
};

/** Keras' MultiHeadAttention folders of its projections. */
const ATTENTION_FOLDERS: Readonly<Record<string, string>> = {
  query: 'query_dense',
  key: 'key_dense',
  value: 'value_dense',
  attention_output: 'output_dense',
};

/** keras-hub's attribute folders of LlamaTransformerDecoder's sublayers. */
const LLAMA_FOLDERS: Readonly<Record<string, string>> = {
  self_attention: '_self_attention_layer',
  self_attention_layernorm: '_self_attention_layernorm',
  feedforward_intermediate_dense: '_feedforward_intermediate_dense',
  feedforward_gate_dense: '_feedforward_gate_dense',
  feedforward_output_dense: '_feedforward_output_dense',
  feedforward_layernorm: '_feedforward_layernorm',
};

/** LlamaAttention's folders of its projections (Keras 3 attribute names). */
const LLAMA_ATTENTION_FOLDERS: Readonly<Record<string, string>> = {
  query: '_query_dense',
  key: '_key_dense',
  value: '_value_dense',
  attention_output: '_output_dense',
};

/** The variable index of a weight in its Keras 3 layer. */
const VAR_INDEX: Readonly<Record<string, number>> = {
  kernel: 0,
  bias: 1,
  gamma: 0,
  beta: 1,
  scale: 0,
};

/**
 * The weights of a (built) keras-hub `TransformerEncoder` / `TransformerDecoder` of this package
 * under the Keras 3 folder `folder` (`layers/transformer_decoder_1`).
 */
export function transformerBlockWeights(layer: layers.Layer, folder: string): WeightBinding[] {
  return blockWeights(layer, folder, BLOCK_FOLDERS, ATTENTION_FOLDERS);
}

/** The weights of a (built) `LlamaTransformerDecoder` under the Keras 3 folder `folder`. */
export function llamaDecoderWeights(layer: layers.Layer, folder: string): WeightBinding[] {
  return blockWeights(layer, folder, LLAMA_FOLDERS, LLAMA_ATTENTION_FOLDERS);
}

function blockWeights(
  layer: layers.Layer,
  folder: string,
  folders: Readonly<Record<string, string>>,
  attentionFolders: Readonly<Record<string, string>>,
): WeightBinding[] {
  return layer.weights.map((variable) => {
    const parts = variable.originalName.split('/').slice(1); // drop the layer's own name
    const weight = parts[parts.length - 1];
    const sub = parts.slice(0, -1);
    const top = folders[sub[0]];
    const inner = sub.length === 2 ? attentionFolders[sub[1]] : sub.length === 1 ? '' : undefined;
    if (top == null || inner == null || VAR_INDEX[weight] == null) {
      throw new Error(
        `Layer '${layer.name}': no keras-hub path is known for its weight ${variable.originalName}`,
      );
    }
    const path = [folder, top, inner, `vars/${VAR_INDEX[weight]}`].filter((p) => p !== '');
    return {path: path.join('/'), variable};
  });
}
