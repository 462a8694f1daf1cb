/**
 * The int8 and int4 forms of keras-hub's ReversibleEmbedding (reversible_embedding.ts): Keras'
 * variables in Keras' order, the int4 tables' layouts, and the int4 call (the lookup forward, the
 * logits reverse), as pure functions of the layer's sizes and weights.
 */
import * as tf from '@tensorflow/tfjs-core';
import {initializers, LayerVariable} from '@tensorflow/tfjs-layers';

import type {Int4Layout} from '../../ops/int4';
import {int4Lookup, int4MatMul, int4MatMulT} from '../../ops/int4_products';
import {absMaxQuantize, INT8_DTYPE} from '../../ops/int8';
import {
  AddWeight,
  addInt4Params,
  addInt4Table,
  addInt4Values,
  int4TensorsOf,
  Int4Weight,
} from '../core/quantization';

/** A quantized ReversibleEmbedding's variables (null where its form has none). */
export interface QuantizedTables {
  embeddings: LayerVariable;
  embeddingsScale: LayerVariable;
  /** int4: the table's zero points and the group index the reverse table shares. */
  embeddingsZero: LayerVariable | null;
  gIdx: LayerVariable | null;
  /** Untied only. */
  reverseEmbeddings: LayerVariable | null;
  reverseEmbeddingsScale: LayerVariable | null;
  /** Untied int4 only (float32, as Keras makes it). */
  reverseEmbeddingsZero: LayerVariable | null;
}

/** The int4 table's layout `[V, D]`: packed and grouped along the hidden axis. */
export function int4TableLayout(V: number, D: number, blockSize: number): Int4Layout {
  return {rows: V, cols: D, packAxis: 1, groupAxis: 1, blockSize};
}

/** The int4 reverse table's `[D, V]`: packed and grouped along the hidden axis. */
export function int4ReverseLayout(V: number, D: number, blockSize: number): Int4Layout {
  return {rows: D, cols: V, packAxis: 0, groupAxis: 0, blockSize};
}

/** Keras' int8 variables, in its order: the table and its per-row scale; untied, the reverse's. */
export function addInt8Tables(
  add: AddWeight,
  V: number,
  D: number,
  tied: boolean,
): QuantizedTables {
  const [zeros, ones] = [initializers.zeros(), initializers.ones()];
  const frozen = (name: string, shape: number[], dtype: 'float32' | typeof INT8_DTYPE) =>
    add(name, shape, dtype, dtype === 'float32' ? ones : zeros, undefined, false);
  const embeddings = frozen('embeddings', [V, D], INT8_DTYPE);
  const embeddingsScale = frozen('embeddings_scale', [V], 'float32');
  const reverseEmbeddings = tied ? null : frozen('reverse_embeddings', [D, V], INT8_DTYPE);
  const reverseEmbeddingsScale = tied ? null : frozen('reverse_embeddings_scale', [V], 'float32');
  return {
    embeddings,
    embeddingsScale,
    embeddingsZero: null,
    gIdx: null,
    reverseEmbeddings,
    reverseEmbeddingsScale,
    reverseEmbeddingsZero: null,
  };
}

/**
 * Keras' int4 variables, in its order: the table's packed values, scale, zero points and group
 * index; untied, the reverse table's, with a float32 zero point and the table's group index.
 */
export function addInt4Tables(
  add: AddWeight,
  V: number,
  D: number,
  blockSize: number,
  tied: boolean,
): QuantizedTables {
  const t = addInt4Table(add, int4TableLayout(V, D, blockSize));
  const tables: QuantizedTables = {
    embeddings: t.embeddings,
    embeddingsScale: t.scale,
    embeddingsZero: t.zero,
    gIdx: t.gIdx,
    reverseEmbeddings: null,
    reverseEmbeddingsScale: null,
    reverseEmbeddingsZero: null,
  };
  if (!tied) {
    const reverse = int4ReverseLayout(V, D, blockSize);
    tables.reverseEmbeddings = addInt4Values(add, 'reverse_embeddings', reverse);
    const r = addInt4Params(
      add,
      reverse,
      {scale: 'reverse_embeddings_scale', zero: 'reverse_embeddings_zero', gIdx: 'g_idx'},
      {zeroDtype: 'float32', gIdx: t.gIdx},
    );
    [tables.reverseEmbeddingsScale, tables.reverseEmbeddingsZero] = [r.scale, r.zero];
  }
  return tables;
}

/**
 * Keras' int4 `_int4_call` without the soft cap: int ids in, the rows at the ids dequantized
 * `[..., D]`; hidden states `[..., D]` in, the logits `[..., V]`: the hidden states quantized to
 * int8 per token (when `quantizeInputs`), the product with the reverse table (tied: the table
 * transposed) and the division by their scale.
 */
export function int4Call(
  x: tf.Tensor,
  [table, reverse]: Int4Weight[],
  D: number,
  V: number,
  quantizeInputs: boolean,
): tf.Tensor {
  if (x.dtype !== 'float32') return int4Lookup(int4TensorsOf(table), table.layout, x);
  const rows = tf.reshape(x, [-1, D]) as tf.Tensor2D; // [N, D]
  const q = quantizeInputs ? absMaxQuantize(rows, -1) : null;
  const inputs = (q?.values ?? rows) as tf.Tensor2D;
  let logits: tf.Tensor =
    reverse != null
      ? int4MatMul(inputs, int4TensorsOf(reverse), reverse.layout)
      : int4MatMulT(inputs, int4TensorsOf(table), table.layout); // [N, V]
  if (q != null) logits = tf.div(logits, q.scale);
  return tf.reshape(logits, [...x.shape.slice(0, -1), V]);
}
