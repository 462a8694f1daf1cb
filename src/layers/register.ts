/** Registers every layer class, so `tf.loadLayersModel` and `tf.layers.deserialize` find them. */
import * as tf from '@tensorflow/tfjs-core';

import {AdditiveAttention} from './additive_attention';
import {Attention, DotProductAttention} from './dot_product_attention';
import {EinsumDense} from './einsum_dense';
import {MultiHeadAttention} from './multi_head_attention';

export const LAYER_CLASSES = [
  MultiHeadAttention,
  DotProductAttention,
  Attention,
  AdditiveAttention,
  EinsumDense,
];

for (const cls of LAYER_CLASSES) {
  tf.serialization.registerClass(cls);
}
