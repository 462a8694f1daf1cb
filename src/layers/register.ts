/** Registers every layer class, so `tf.loadLayersModel` and `tf.layers.deserialize` find them. */
import * as tf from '@tensorflow/tfjs-core';

import type {ContractClass} from './engine/contract';
import './engine/executor_masks';
import './engine/model_dispose';
import {AdditiveAttention} from './attention/additive_attention';
import {CachedMultiHeadAttention} from './hub/cached_multi_head_attention';
import {Attention, DotProductAttention} from './attention/dot_product_attention';
import {Dense} from './core/dense';
import {EinsumDense} from './core/einsum_dense';
import {Embedding} from './core/embedding';
import {GroupQueryAttention} from './attention/group_query_attention';
import {GetItem} from './core/get_item';
import {GlobalAveragePooling1D} from './core/global_average_pooling';
import {MERGE_CLASSES} from './core/merge_masks';
import {Softmax} from './core/softmax_layer';
import {QuantizedDense} from './core/quantized_dense';
import {QuantizedEmbedding} from './core/quantized_embedding';
import {MultiHeadAttention} from './attention/multi_head_attention';
import {PositionEmbedding} from './hub/position_embedding';
import {ReversibleEmbedding} from './hub/reversible_embedding';
import {RotaryEmbedding} from './hub/rotary_embedding';
import {SinePositionEncoding} from './hub/sine_position_encoding';
import {TransformerDecoder} from './hub/transformer_decoder';
import {TransformerEncoder} from './hub/transformer_encoder';
import {TokenAndPositionEmbedding} from './hub/token_and_position_embedding';

/**
 * The package's generic layer classes, each with its contract (engine/contract.ts): a class
 * without one does not compile here. A keras-hub family's own layers (Llama 3's) are registered
 * with their family (hub_models/register_layers.ts).
 */
export const LAYER_CLASSES: ReadonlyArray<
  ContractClass & tf.serialization.SerializableConstructor<tf.serialization.Serializable>
> = [
  MultiHeadAttention,
  CachedMultiHeadAttention,
  GroupQueryAttention,
  DotProductAttention,
  Attention,
  AdditiveAttention,
  EinsumDense,
  TokenAndPositionEmbedding,
  PositionEmbedding,
  SinePositionEncoding,
  RotaryEmbedding,
  ReversibleEmbedding,
  TransformerEncoder,
  TransformerDecoder,
  GetItem,
  QuantizedDense,
  QuantizedEmbedding,
];

/**
 * tfjs' own layers that Keras 3 hands a mask to, replaced under tfjs' class names so that loaded
 * models get Keras' masked average, masked softmax and merge masks (core/merge_masks.ts). They are
 * tfjs' layers, with no contract of the package's, so they are not in LAYER_CLASSES; their own
 * tests compare them with Keras.
 */
export const MASKED_TFJS_CLASSES = [GlobalAveragePooling1D, Softmax, ...MERGE_CLASSES] as const;

/**
 * tfjs' `Dense` and `Embedding`, extended with Keras 3's LoRA (`enableLora`) and registered under
 * tfjs' names, so that loaded models get it; without LoRA they are tfjs' classes as they are.
 */
export const LORA_TFJS_CLASSES = [Dense, Embedding] as const;

for (const cls of [...LAYER_CLASSES, ...MASKED_TFJS_CLASSES, ...LORA_TFJS_CLASSES]) {
  tf.serialization.registerClass(
    cls as tf.serialization.SerializableConstructor<tf.serialization.Serializable>,
  );
}
