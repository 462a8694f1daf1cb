/**
 * Keras 3's int4 layers' products and lookups (`model.quantize("int4")`, Keras 3.15) on weights
 * held as Keras stores them, in its arithmetic: the weight dequantized, then a float32 product.
 *
 * An int4 weight is a 2-D float weight `[R, C]` held as
 * - `packed`: its int4 values two to a byte along `packAxis` (the even index in the low nibble,
 *   an odd length padded; ops/int4.ts' `packInt4`), the bytes held as the package holds int8
 *   (dtype `bool`, ops/int8.ts);
 * - grouped (`blockSize > 0`, asymmetric): `scale` float32 and `zero` int8 (bytes) with the
 *   grouped axis `groupAxis` replaced by its `ceil(size / blockSize)` groups, and `gIdx` float32,
 *   the group of each index along `groupAxis`: `w = f32((q - zero[g]) * scale[g])` (Keras'
 *   `dequantize_with_sz_map`);
 * - per channel (`blockSize` -1, symmetric): `scale` float32 over the axis that is not grouped:
 *   `w ≈ q / scale` (a product is divided by the scale after it, as Keras' layers do).
 *
 * Keras' layouts: Dense / EinsumDense kernels `[k, n]` packed along n, grouped along k (`scale`
 * `[G, n]`); Embedding tables `[V, D]` packed along D, grouped along D (`scale` `[V, G]`); an
 * untied ReversibleEmbedding's `reverse_embeddings` `[D, V]` packed along D, grouped along D
 * (`scale` `[G, V]`).
 *
 * The weight is never dequantized whole: the products turn a block of its rows at a time into
 * float32 (at most {@link INT8_BLOCK_VALUES} values), so a product's float sum is split at block
 * boundaries (Keras sums in one product: float rounding apart).
 */
import * as tf from '@tensorflow/tfjs-core';

import {groupCount, Int4Layout, isGrouped} from './int4';
import {INT8_BLOCK_VALUES, int8ValuesOf, isInt8Tensor} from './int8';

/** An int4 weight's tensors, as Keras stores them. */
export interface Int4Tensors {
  /** int4 values, two to a byte (dtype `bool`). */
  packed: tf.Tensor;
  /** float32 scale. */
  scale: tf.Tensor;
  /** The zero point per group (int8 bytes, dtype `bool`; or float32), grouped only. */
  zero: tf.Tensor | null;
  /** float32 group of each index along the grouped axis, grouped only. */
  gIdx: tf.Tensor | null;
}

/** The values of an int4 weight's tensors read into JavaScript once (a product's inputs). */
interface Int4Values {
  packed: Int8Array;
  scale: Float32Array;
  /** int8 bytes; float32 where Keras made the zero point so (an untied reverse embedding). */
  zero: Int8Array | Float32Array | null;
  group: Int32Array | null;
}

/** The values, their group indices checked (`where` names the caller in the error). */
function valuesOf(t: Int4Tensors, layout: Int4Layout, where: string): Int4Values {
  const grouped = isGrouped(layout);
  const v: Int4Values = {
    packed: int8ValuesOf(t.packed),
    scale: t.scale.dataSync() as Float32Array,
    zero:
      grouped && t.zero != null
        ? isInt8Tensor(t.zero)
          ? int8ValuesOf(t.zero)
          : (t.zero.dataSync() as Float32Array)
        : null,
    group: grouped && t.gIdx != null ? Int32Array.from(t.gIdx.dataSync()) : null,
  };
  checkGroups(v, layout, where);
  return v;
}

/** The int4 value at `[r, c]` of packed bytes (sign-extended nibble). */
function nibble(v: Int4Values, layout: Int4Layout, r: number, c: number): number {
  const {cols, packAxis} = layout;
  const byte =
    packAxis === 1 ? v.packed[r * Math.ceil(cols / 2) + (c >> 1)] : v.packed[(r >> 1) * cols + c];
  const along = packAxis === 1 ? c : r;
  return ((((byte >> ((along & 1) * 4)) & 0xf) ^ 8) - 8) | 0;
}

/**
 * Rows `[from, from + count)` of the weight as float32 `[count, cols]`: grouped, Keras'
 * dequantized values `f32((q - zero) * scale)`; per channel, the int4 values `q` themselves (the
 * caller divides by the scale where Keras does).
 */
function floatRows(
  v: Int4Values,
  layout: Int4Layout,
  from: number,
  count: number,
  divide = false,
): Float32Array {
  const {cols, groupAxis} = layout;
  const out = new Float32Array(count * cols);
  const groups = groupCount(layout);
  for (let i = 0; i < count; i++) {
    const r = from + i;
    for (let c = 0; c < cols; c++) {
      const q = nibble(v, layout, r, c);
      if (v.group == null || v.zero == null) {
        // per channel: divided by the scale here only when asked (EinsumDense and Embedding
        // dequantize first; Dense divides its product)
        out[i * cols + c] = divide ? Math.fround(q / v.scale[groupAxis === 0 ? c : r]) : q;
        continue;
      }
      const at = groupAxis === 0 ? v.group[r] * cols + c : r * groups + v.group[c];
      out[i * cols + c] = Math.fround((q - v.zero[at]) * v.scale[at]);
    }
  }
  return out;
}

function checkGroups(v: Int4Values, layout: Int4Layout, where: string): void {
  if (v.group == null) return;
  const g = groupCount(layout);
  for (let i = 0; i < v.group.length; i++) {
    const x = v.group[i];
    if (!(x >= 0 && x < g)) {
      throw new Error(
        `${where}: expected g_idx values in [0, ${g}) (the groups), received ${x} at index ${i}`,
      );
    }
  }
}

/** Rows of the weight per block: at most {@link INT8_BLOCK_VALUES} values. */
const blockRows = (cols: number) => Math.max(1, Math.floor(INT8_BLOCK_VALUES / Math.max(cols, 1)));

/**
 * The whole weight dequantized, `[rows, cols]` float32 (per channel: `q / scale`): an
 * EinsumDense equation with no 2-D form reads its kernel this way, per call.
 */
export function int4ToFloat(w: Int4Tensors, layout: Int4Layout): tf.Tensor2D {
  const v = valuesOf(w, layout, 'int4ToFloat');
  return tf.tensor2d(floatRows(v, layout, 0, layout.rows, true), [layout.rows, layout.cols]);
}

/**
 * `x [M, rows] · W [rows, cols]` as Keras' int4 layers compute it: grouped, the dequantized
 * weight's float32 product; per channel, the product with the int4 values divided by `scale`
 * `[cols]` after it (Dense, an untied reverse embedding), or with `dequantizeFirst` the product
 * with `q / scale` (EinsumDense's per-channel `_int4_call` divides the kernel first).
 */
export function int4MatMul(
  x: tf.Tensor2D,
  w: Int4Tensors,
  layout: Int4Layout,
  dequantizeFirst = false,
): tf.Tensor2D {
  const {rows, cols} = layout;
  if (x.shape[1] !== rows) {
    throw new Error(
      `int4MatMul: expected inputs [M, ${rows}] for a weight [${rows}, ${cols}], received [${x.shape}]`,
    );
  }
  const v = valuesOf(w, layout, 'int4MatMul');
  const block = blockRows(cols);
  let sum: tf.Tensor2D | null = null;
  for (let r0 = 0; r0 < rows; r0 += block) {
    const r = Math.min(block, rows - r0);
    const part: tf.Tensor2D = tf.tidy(() =>
      tf.matMul(
        tf.slice(x, [0, r0], [-1, r]) as tf.Tensor2D,
        tf.tensor2d(floatRows(v, layout, r0, r, dequantizeFirst), [r, cols]),
      ),
    );
    if (sum == null) sum = part;
    else {
      const next = tf.add(sum, part) as tf.Tensor2D;
      tf.dispose([sum, part]);
      sum = next;
    }
  }
  const product: tf.Tensor2D = sum ?? tf.zeros([x.shape[0], cols]);
  if (isGrouped(layout) || dequantizeFirst) return product;
  const out: tf.Tensor2D = tf.div(product, w.scale);
  product.dispose();
  return out;
}

/**
 * `x [M, cols] · Wᵀ` (`W [rows, cols]`): the logits of a tied int4 table `[V, D]` against hidden
 * states, as Keras' ReversibleEmbedding computes them: grouped, the dequantized table's float32
 * product; per channel, the product with the int4 values divided by `scale` `[rows]` after it.
 */
export function int4MatMulT(x: tf.Tensor2D, w: Int4Tensors, layout: Int4Layout): tf.Tensor2D {
  const {rows, cols} = layout;
  if (x.shape[1] !== cols) {
    throw new Error(
      `int4MatMulT: expected inputs [M, ${cols}] for a weight [${rows}, ${cols}] transposed, ` +
        `received [${x.shape}]`,
    );
  }
  const v = valuesOf(w, layout, 'int4MatMulT');
  const block = blockRows(cols);
  const parts: tf.Tensor2D[] = [];
  for (let r0 = 0; r0 < rows; r0 += block) {
    const r = Math.min(block, rows - r0);
    parts.push(
      tf.tidy(() => tf.matMul(x, tf.tensor2d(floatRows(v, layout, r0, r), [r, cols]), false, true)),
    );
  }
  const product = parts.length === 1 ? parts[0] : (tf.concat(parts, 1) as tf.Tensor2D);
  if (parts.length > 1) tf.dispose(parts);
  if (isGrouped(layout)) return product;
  const out: tf.Tensor2D = tf.div(product, w.scale);
  product.dispose();
  return out;
}

/**
 * Rows of an int4 table `[V, D]` at `ids` (int32, any shape) as Keras' int4 Embedding reads them:
 * grouped, `f32((q - zero) * scale)`; per channel, `q / scale[id]`; `[...ids.shape, D]`. Ids
 * outside [0, V) are an error naming the id.
 */
export function int4Lookup(table: Int4Tensors, layout: Int4Layout, ids: tf.Tensor): tf.Tensor {
  const {rows, cols} = layout;
  const v = valuesOf(table, layout, 'int4 lookup');
  const at = ids.dataSync();
  const out = new Float32Array(at.length * cols);
  for (let i = 0; i < at.length; i++) {
    const id = at[i] as number;
    if (!(Number.isInteger(id) && id >= 0 && id < rows)) {
      throw new Error(`int4 lookup: expected ids in [0, ${rows}), received ${id}`);
    }
    // per channel: q / scale[id], as Keras' Embedding divides
    out.set(floatRows(v, layout, id, 1, true), i * cols);
  }
  return tf.tensor(out, [...ids.shape, cols]);
}
