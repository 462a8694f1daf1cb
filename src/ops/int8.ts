/**
 * Keras 3's int8 arithmetic (`model.quantize("int8")`, Keras 3.15) as tfjs ops, exact on every
 * backend.
 *
 * - Quantization (`keras.quantizers.abs_max_quantize`): `scale = 127 / (max|x| + 1e-7)` over the
 *   reduced axes (float32, epsilon = `keras.config.epsilon()` as a float32), `q = clip(round(x ·
 *   scale), -127, 127)` with round half to even; the stored value means `x ≈ q / scale`.
 * - The int8 product: Keras multiplies int8 by int8 with an int32 accumulator, casts to float32
 *   and divides by (input scale · kernel scale). tfjs has no integer product on wasm / webgl, so
 *   the int8 values (whole numbers in [-127, 127]: a quantized input in a float32 tensor, a weight
 *   turned into float32 a block of rows at a time) are multiplied with float32 `matMul` over chunks of at most {@link INT8_EXACT_CHUNK} inner values:
 *   every partial sum of a chunk is then a whole number of magnitude at most 1040 · 127² < 2²⁴,
 *   which float32 holds exactly, in any summation order. The chunk results are added in int32.
 * - int8 weights are held as bytes: tfjs has no int8 dtype, so an int8 weight is a tensor of
 *   tfjs' one-byte dtype (`bool`) whose bytes are the int8 values in two's complement, in Keras'
 *   layout ({@link int8Tensor}, {@link int8ValuesOf}): one byte per value on the cpu, wasm and
 *   tensorflow backends, read in place by the compiled decoding step. No tfjs op runs on such a
 *   tensor (a `bool` op would read 0 / 1): the products below turn a block of its rows at a time
 *   into float32 whole numbers ({@link INT8_BLOCK_VALUES} at most), never the whole weight.
 */
import * as tf from '@tensorflow/tfjs-core';

/** Keras' `backend.epsilon()` (1e-7), added to the abs-max before dividing. */
export const KERAS_EPSILON = 1e-7;

/** The largest int8 magnitude Keras' int8 scheme uses (`value_range=(-127, 127)`). */
export const INT8_MAX = 127;

/**
 * The largest inner length of a float32 product of int8 values whose every partial sum is exact:
 * `floor(2^24 / 127^2)`.
 */
export const INT8_EXACT_CHUNK = Math.floor(2 ** 24 / (INT8_MAX * INT8_MAX)); // 1040

/** tfjs' one-byte dtype, which holds the package's int8 weights (their two's-complement bytes). */
export const INT8_DTYPE = 'bool';

/**
 * The most int8 values the eager products turn into float32 at a time (4 MB of float32): a block
 * of a weight's rows, never the whole weight.
 */
export const INT8_BLOCK_VALUES = 1 << 20;

/** Whether `t` holds int8 values as bytes (dtype {@link INT8_DTYPE}). */
export function isInt8Tensor(t: tf.Tensor): boolean {
  return t.dtype === INT8_DTYPE;
}

/**
 * An int8 weight as the package holds it: `values` (int8, or their bytes) in a tensor of dtype
 * `bool` (tfjs' one-byte dtype) of `shape`, one byte per value. The bytes are copied (tfjs takes
 * the array).
 */
export function int8Tensor(values: Int8Array | Uint8Array, shape: readonly number[]): tf.Tensor {
  const size = shape.reduce((p, d) => p * d, 1);
  if (values.length !== size) {
    throw new Error(
      `int8Tensor: expected ${size} values for shape [${shape}], received ${values.length}`,
    );
  }
  return ownedInt8Tensor(values.slice(), shape);
}

/**
 * {@link int8Tensor} of values nothing else holds (made for it): taken as they are, not copied
 * (the cpu backend keeps the array).
 */
export function ownedInt8Tensor(
  values: Int8Array | Uint8Array,
  shape: readonly number[],
): tf.Tensor {
  const bytes = new Uint8Array(values.buffer, values.byteOffset, values.length);
  return tf.tensor(bytes, [...shape], INT8_DTYPE);
}

/** The int8 values of a tensor from {@link int8Tensor} (read now: a copy on wasm and tfjs-node). */
export function int8ValuesOf(t: tf.Tensor): Int8Array {
  if (!isInt8Tensor(t)) {
    throw new Error(
      `int8ValuesOf: expected int8 values held as bytes (dtype '${INT8_DTYPE}'), received ${t.dtype}`,
    );
  }
  const bytes = t.dataSync() as Uint8Array;
  return new Int8Array(bytes.buffer, bytes.byteOffset, bytes.length);
}

/**
 * int8 values as bytes, from whole numbers in [-127, 127] (a float32 or int32 tensor, e.g.
 * {@link absMaxQuantize}'s `values`); any other value is an error naming its flat index.
 */
export function int8FromWholeNumbers(t: tf.Tensor): tf.Tensor {
  const values = t.dataSync();
  const out = new Int8Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] as number;
    if (!(Number.isInteger(v) && v >= -128 && v <= 127)) {
      throw new Error(
        `int8FromWholeNumbers: expected whole numbers in [-128, 127], received ${v} at flat index ${i}`,
      );
    }
    out[i] = v;
  }
  return int8Tensor(out, t.shape);
}

/**
 * Rows `[from, from + rows)` of int8 values laid out `[*, cols]` (flat, row-major), as float32
 * whole numbers `[rows, cols]`.
 */
function floatRows(values: Int8Array, from: number, rows: number, cols: number): tf.Tensor2D {
  return tf.tensor2d(Float32Array.from(values.subarray(from * cols, (from + rows) * cols)), [
    rows,
    cols,
  ]);
}

/**
 * Columns `[c0, c0 + c)` of rows `[from, from + rows)` of int8 values laid out `[*, cols]` (flat,
 * row-major), as float32 whole numbers `[rows, c]`.
 */
function floatBlock(
  values: Int8Array,
  from: number,
  rows: number,
  cols: number,
  c0: number,
  c: number,
): tf.Tensor2D {
  const out = new Float32Array(rows * c);
  for (let i = 0; i < rows; i++) {
    const at = (from + i) * cols + c0;
    for (let j = 0; j < c; j++) out[i * c + j] = values[at + j] as number;
  }
  return tf.tensor2d(out, [rows, c]);
}

/**
 * The exact product of int8 values `a [M, K]` (whole numbers in a float32 tensor) by an int8
 * weight held as bytes, `b [K, N]` (`[N, K]` with `transposeB`), as int32 `[M, N]`: the weight is
 * turned into float32 a block of its rows at a time (at most {@link INT8_BLOCK_VALUES} values):
 * `[K, N]` by blocks of K (their int32 products added), `[N, K]` by blocks of N (side by side),
 * each by chunks of at most {@link INT8_EXACT_CHUNK} columns cut from the bytes.
 */
function int8BytesMatMul(a: tf.Tensor2D, b: tf.Tensor2D, transposeB: boolean): tf.Tensor2D {
  const values = int8ValuesOf(b);
  const [rows, cols] = b.shape;
  const block = Math.max(1, Math.floor(INT8_BLOCK_VALUES / Math.max(cols, 1)));
  if (!transposeB) {
    let sum: tf.Tensor2D | null = null;
    for (let r0 = 0; r0 < rows; r0 += block) {
      const r = Math.min(block, rows - r0);
      const part = tf.tidy(() =>
        int8MatMul(tf.slice(a, [0, r0], [-1, r]), floatRows(values, r0, r, cols)),
      );
      if (sum == null) sum = part;
      else {
        const next: tf.Tensor2D = tf.add(sum, part);
        tf.dispose([sum, part]);
        sum = next;
      }
    }
    return sum ?? tf.zeros([a.shape[0], cols], 'int32');
  }
  // [N, K]: each block of N rows by chunks of at most INT8_EXACT_CHUNK columns, cut from the bytes
  // (not sliced from a float tensor: the cpu backend slices a strided block value by value)
  const parts: tf.Tensor2D[] = [];
  for (let r0 = 0; r0 < rows; r0 += block) {
    const r = Math.min(block, rows - r0);
    parts.push(
      tf.tidy(() => {
        const af = a.dtype === 'float32' ? a : tf.cast(a, 'float32');
        let sum: tf.Tensor2D | null = null;
        for (let c0 = 0; c0 < cols; c0 += INT8_EXACT_CHUNK) {
          const c = Math.min(INT8_EXACT_CHUNK, cols - c0);
          const ac = c === cols ? af : tf.slice(af, [0, c0], [-1, c]);
          const bc = floatBlock(values, r0, r, cols, c0, c);
          const part = tf.cast(tf.matMul(ac, bc, false, true), 'int32') as tf.Tensor2D;
          sum = sum == null ? part : (tf.add(sum, part) as tf.Tensor2D);
        }
        return sum ?? (tf.zeros([a.shape[0], r], 'int32') as tf.Tensor2D);
      }),
    );
  }
  if (parts.length === 1) return parts[0];
  const out = tf.concat(parts, 1);
  tf.dispose(parts);
  return out;
}

/**
 * Rows of an int8 table held as bytes (`[V, D]`) at `ids` (int32, any shape), as float32 whole
 * numbers `[...ids.shape, D]`; ids outside [0, V) are an error naming the id.
 */
export function int8Rows(table: tf.Tensor, ids: tf.Tensor): tf.Tensor {
  const values = int8ValuesOf(table);
  const [V, D] = table.shape;
  const at = ids.dataSync();
  const out = new Float32Array(at.length * D);
  for (let i = 0; i < at.length; i++) {
    const id = at[i] as number;
    if (!(Number.isInteger(id) && id >= 0 && id < V)) {
      throw new Error(`int8 lookup: expected ids in [0, ${V}), received ${id}`);
    }
    for (let j = 0; j < D; j++) out[i * D + j] = values[id * D + j];
  }
  return tf.tensor(out, [...ids.shape, D]);
}

/** An int8 weight held as bytes, whole, as float32 whole numbers (small weights, einsum kernels). */
export function int8ToFloat(t: tf.Tensor): tf.Tensor {
  return tf.tensor(Float32Array.from(int8ValuesOf(t)), t.shape);
}

/** Round half to even, as Keras' `ops.round` (numpy's `round`). */
function roundHalfEven(v: number): number {
  const r = Math.round(v);
  return Math.abs(v % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * {@link absMaxQuantize} on values held in JavaScript (a weight read from its file): `values`
 * row-major of `shape`, reduced over `axes`, in float32 arithmetic as Keras computes it (`scale =
 * 127 / (max|x| + 1e-7)`, `q = clip(round_half_even(x · scale), -127, 127)`). Returns the int8
 * values (the input's shape) and the scale with the reduced axes kept as 1 (`scaleShape`).
 * No tensor is made: a float weight is quantized while it streams in (`loadKerasHubPreset(...,
 * {quantize: 'int8'})`) without a float copy in the backend's memory.
 */
export function absMaxQuantizeValues(
  values: ArrayLike<number>,
  shape: readonly number[],
  axes: readonly number[],
): {values: Int8Array; scale: Float32Array; scaleShape: number[]} {
  const size = shape.reduce((p, d) => p * d, 1);
  if (values.length !== size) {
    throw new Error(
      `absMaxQuantizeValues: expected ${size} values for shape [${shape}], received ${values.length}`,
    );
  }
  const reduced = new Set(axes.map((a) => (a < 0 ? a + shape.length : a)));
  const scaleShape = shape.map((d, i) => (reduced.has(i) ? 1 : d));
  // each value's place in the scale: its index with the reduced axes dropped
  const strides = new Array<number>(shape.length);
  let stride = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = reduced.has(i) ? 0 : stride;
    stride *= reduced.has(i) ? 1 : shape[i];
  }
  // each value's slot in the scale, walked a row (the last axis) at a time in row-major order:
  // the row's first slot from the outer axes, then a step of 1 (the last axis kept) or 0 (reduced)
  // along it; no array of slots (a weight of 1B values would need 4 GB for it)
  const last = shape.length - 1;
  const inner = last >= 0 ? shape[last] : 1;
  const step = last >= 0 ? strides[last] : 0;
  const eachRow = (visit: (f0: number, s0: number) => void) => {
    if (inner === 0) return;
    const index = new Array<number>(Math.max(last, 0)).fill(0);
    for (let f0 = 0, s0 = 0; f0 < size; f0 += inner) {
      visit(f0, s0);
      for (let i = last - 1; i >= 0; i--) {
        index[i]++;
        s0 += strides[i];
        if (index[i] < shape[i]) break;
        s0 -= strides[i] * shape[i];
        index[i] = 0;
      }
    }
  };
  const amax = new Float32Array(stride);
  eachRow((f0, s0) => {
    for (let j = 0, s = s0; j < inner; j++, s += step) {
      const a = Math.abs(values[f0 + j]);
      if (a > amax[s] || Number.isNaN(a)) amax[s] = a;
    }
  });
  const eps = Math.fround(KERAS_EPSILON);
  const scale = amax.map((m) => Math.fround(INT8_MAX / Math.fround(m + eps)));
  const q = new Int8Array(size);
  eachRow((f0, s0) => {
    for (let j = 0, s = s0; j < inner; j++, s += step) {
      const v = roundHalfEven(Math.fround(values[f0 + j] * scale[s]));
      q[f0 + j] = v > INT8_MAX ? INT8_MAX : v < -INT8_MAX ? -INT8_MAX : v;
    }
  });
  return {values: q, scale, scaleShape};
}

/** A tensor quantized by {@link absMaxQuantize}. */
export interface Int8Quantized {
  /** The int8 values (whole numbers in [-127, 127]) in a float32 tensor, the input's shape. */
  values: tf.Tensor;
  /** float32 scale, the input's shape with the reduced axes kept as 1: `x ≈ values / scale`. */
  scale: tf.Tensor;
}

/**
 * Keras' `abs_max_quantize(x, axis)`: `scale = 127 / (max(|x|, axis) + 1e-7)` and
 * `values = clip(round_half_even(x · scale), -127, 127)`, all in float32.
 */
export function absMaxQuantize(x: tf.Tensor, axis: number | number[]): Int8Quantized {
  if (x.dtype !== 'float32') {
    throw new Error(`absMaxQuantize: expected a float32 tensor, received ${x.dtype}`);
  }
  return tf.tidy(() => {
    const amax = tf.max(tf.abs(x), axis, true);
    const scale = tf.div(tf.scalar(INT8_MAX), tf.add(amax, tf.scalar(KERAS_EPSILON)));
    const values = tf.clipByValue(tf.round(tf.mul(x, scale)), -INT8_MAX, INT8_MAX);
    return {values, scale};
  });
}

/**
 * The exact product of int8 values held in float32 (or int32) tensors: `a [M, K] · b [K, N]`
 * (`b [N, K]` with `transposeB`), as an int32 tensor `[M, N]`, equal to an int32-accumulated
 * integer product. Inner lengths up to {@link INT8_EXACT_CHUNK} take one float32 `matMul`; longer
 * ones one per chunk, added in int32. `b` may be an int8 weight held as bytes
 * ({@link int8Tensor}): it is then read a block of rows at a time.
 */
export function int8MatMul(a: tf.Tensor2D, b: tf.Tensor2D, transposeB = false): tf.Tensor2D {
  const K = a.shape[1];
  const bK = transposeB ? b.shape[1] : b.shape[0];
  if (K !== bK) {
    throw new Error(
      `int8MatMul: inner sizes differ: a is [${a.shape}], b is [${b.shape}]` +
        `${transposeB ? ' (transposed)' : ''}; expected equal inner sizes, received ${K} and ${bK}`,
    );
  }
  if (isInt8Tensor(b)) return int8BytesMatMul(a, b, transposeB);
  return tf.tidy(() => {
    const af = a.dtype === 'float32' ? a : tf.cast(a, 'float32');
    const bf = b.dtype === 'float32' ? b : tf.cast(b, 'float32');
    if (K <= INT8_EXACT_CHUNK) {
      return tf.cast(tf.matMul(af, bf, false, transposeB), 'int32') as tf.Tensor2D;
    }
    let sum: tf.Tensor2D | null = null;
    for (let k0 = 0; k0 < K; k0 += INT8_EXACT_CHUNK) {
      const k = Math.min(INT8_EXACT_CHUNK, K - k0);
      const ac = tf.slice(af, [0, k0], [-1, k]);
      const bc = transposeB ? tf.slice(bf, [0, k0], [-1, k]) : tf.slice(bf, [k0, 0], [k, -1]);
      const part = tf.cast(tf.matMul(ac, bc, false, transposeB), 'int32') as tf.Tensor2D;
      sum = sum == null ? part : (tf.add(sum, part) as tf.Tensor2D);
    }
    return sum as tf.Tensor2D;
  });
}

/**
 * {@link int8MatMul} over a batch: `a [S, M, K] · b [S, K, N]` as an int32 tensor `[S, M, N]`,
 * exact (float32 products over chunks of at most {@link INT8_EXACT_CHUNK} inner values, added in
 * int32).
 */
export function int8BatchMatMul(a: tf.Tensor3D, b: tf.Tensor3D): tf.Tensor3D {
  const K = a.shape[2];
  if (K !== b.shape[1] || a.shape[0] !== b.shape[0]) {
    throw new Error(
      `int8BatchMatMul: expected a [S, M, K] and b [S, K, N] of equal S and K, received ` +
        `[${a.shape}] and [${b.shape}]`,
    );
  }
  return tf.tidy(() => {
    if (K <= INT8_EXACT_CHUNK) return tf.cast(tf.matMul(a, b), 'int32') as tf.Tensor3D;
    let sum: tf.Tensor3D | null = null;
    for (let k0 = 0; k0 < K; k0 += INT8_EXACT_CHUNK) {
      const k = Math.min(INT8_EXACT_CHUNK, K - k0);
      const ac = tf.slice(a, [0, 0, k0], [-1, -1, k]);
      const bc = tf.slice(b, [0, k0, 0], [-1, k, -1]);
      const part = tf.cast(tf.matMul(ac, bc), 'int32') as tf.Tensor3D;
      sum = sum == null ? part : (tf.add(sum, part) as tf.Tensor3D);
    }
    return sum as tf.Tensor3D;
  });
}

/**
 * Keras' dequantized int8 product of float rows `x [M, K]` with an int8 kernel `[K, N]`
 * (`[N, K]` with `transposeB`) and its float32 scale `[N]`: the rows are quantized per row
 * (abs-max over K), multiplied as int8, cast to float32 and divided by `(x scale · kernel scale)`
 * (the two scales multiplied first, as Keras' `_int8_call` does).
 */
export function int8Dense(
  x: tf.Tensor2D,
  kernel: tf.Tensor2D,
  kernelScale: tf.Tensor1D,
  transposeB = false,
): tf.Tensor2D {
  return tf.tidy(() => {
    const {values, scale} = absMaxQuantize(x, -1); // [M, K], [M, 1]
    const product = tf.cast(int8MatMul(values as tf.Tensor2D, kernel, transposeB), 'float32');
    return tf.div(product, tf.mul(kernelScale, scale)) as tf.Tensor2D;
  });
}

/**
 * Keras 3's int8 call of Dense and EinsumDense (`_int8_call`): {@link int8Dense}'s value, with
 * Keras' custom gradient: the inputs' gradient passes straight through the dequantized kernel,
 * `dy · (kernel / scale)ᵀ`, as if the product were float (the rounding of the inputs has no
 * gradient of its own); the kernel and its scale get none (they are frozen). keras-hub's
 * ReversibleEmbedding logits have no such gradient in Keras (only the input scale's max carries
 * one): they call {@link int8Dense} itself.
 */
export function int8Projection(
  x: tf.Tensor2D,
  kernel: tf.Tensor2D,
  kernelScale: tf.Tensor1D,
): tf.Tensor2D {
  const f = tf.customGrad(((input: tf.Tensor, save: tf.GradSaveFunc) => {
    save([kernel, kernelScale]); // kept for the backward pass (the caller's may be views)
    return {
      value: int8Dense(input as tf.Tensor2D, kernel, kernelScale),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const floatKernel = tf.div(int8ToFloat(saved[0]), saved[1]); // [K, N]
        return [tf.matMul(dy, floatKernel, false, true)];
      },
    };
  }) as unknown as Parameters<typeof tf.customGrad>[0]);
  return f(x) as tf.Tensor2D;
}
