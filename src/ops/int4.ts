/**
 * Keras 3's int4 arithmetic on a Dense kernel `[k, n]` (input axis first), in float32 as Keras
 * computes it (keras/src/quantizers/quantizers.py, layers/core/dense.py; Keras 3.15.1):
 *
 * - grouped (`model.quantize("int4")`, `block_size` 128 by default): per group of `blockSize`
 *   input rows and per output column, asymmetric with a zero point. The last group is padded
 *   with zero rows before its minimum and maximum are taken. `scale = (max - min + 1e-7) / 15`,
 *   `zero = clip(round(-min / scale) - 8, -8, 7)`, `q = clip(round(w / scale) + zero, -8, 7)`;
 *   dequantized `(q - zero[g]) * scale[g]` with `g = gIdx[i] = floor(i / blockSize)`;
 * - per channel (`block_size=-1` or None): symmetric, `scale = 7 / (max|w| + 1e-7)` per output
 *   column, `q = clip(round(w * scale), -8, 7)` (a layer divides its product by the scale);
 * - packing (`pack_int4` / `unpack_int4`): two values per byte along one axis, the even index in
 *   the low nibble, an odd length padded with a 0. Keras 3.14+ packs a Dense kernel along its
 *   output axis (`[k, ceil(n / 2)]`), Keras 3.11-3.13 along its input axis.
 *
 * Rounding is numpy's (half to even); every step rounds to float32 as numpy's float32 arrays do.
 */

const f32 = Math.fround;
/** Keras' epsilon (`keras.config.epsilon()`), as float32. */
const EPSILON = Math.fround(1e-7); // a float32, as numpy adds a Python float to float32 arrays
const [QMIN, QMAX] = [-8, 7];

/** numpy's `round`: to the nearest integer, halves to even. */
export function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

const clip = (x: number) => Math.min(QMAX, Math.max(QMIN, x));

/** A grouped int4 kernel: values `[k, n]`, scale and zero `[groups, n]`, group of each row `[k]`. */
export interface GroupedInt4 {
  q: Int8Array;
  scale: Float32Array;
  zero: Int8Array;
  gIdx: Float32Array;
}

function checkKernel(what: string, w: ArrayLike<number>, k: number, n: number): void {
  if (!(Number.isInteger(k) && k > 0 && Number.isInteger(n) && n > 0) || w.length !== k * n) {
    throw new Error(
      `${what}: expected a kernel of k * n values with k, n positive integers, received ` +
        `${w.length} values for k=${k}, n=${n}`,
    );
  }
}

/** Keras' grouped asymmetric int4 quantization of `w [k, n]` in groups of `blockSize` rows. */
export function quantizeInt4Grouped(
  w: ArrayLike<number>,
  k: number,
  n: number,
  blockSize: number,
): GroupedInt4 {
  checkKernel('quantizeInt4Grouped', w, k, n);
  if (!(Number.isInteger(blockSize) && blockSize > 0)) {
    throw new Error(
      `quantizeInt4Grouped: expected blockSize to be a positive integer, received ${blockSize}`,
    );
  }
  const groups = Math.ceil(k / blockSize);
  const q = new Int8Array(k * n);
  const scale = new Float32Array(groups * n);
  const zero = new Int8Array(groups * n);
  const gIdx = new Float32Array(k);
  for (let i = 0; i < k; i++) gIdx[i] = Math.floor(i / blockSize);
  for (let g = 0; g < groups; g++) {
    const [from, to] = [g * blockSize, Math.min(k, (g + 1) * blockSize)];
    const padded = to - from < blockSize; // zero rows complete the last group
    for (let j = 0; j < n; j++) {
      let [lo, hi] = padded ? [0, 0] : [Infinity, -Infinity];
      for (let i = from; i < to; i++) {
        const v = w[i * n + j];
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
      const s = f32(f32(f32(hi - lo) + EPSILON) / (QMAX - QMIN));
      const z = clip(roundHalfEven(f32(-lo / s)) + QMIN);
      scale[g * n + j] = s;
      zero[g * n + j] = z;
      for (let i = from; i < to; i++) {
        q[i * n + j] = clip(roundHalfEven(f32(w[i * n + j] / s)) + z);
      }
    }
  }
  return {q, scale, zero, gIdx};
}

/** Keras' dequantization of a grouped int4 kernel (`dequantize_with_sz_map`): `[k, n]` float32. */
export function dequantizeInt4Grouped(g: GroupedInt4, k: number, n: number): Float32Array {
  checkKernel('dequantizeInt4Grouped', g.q, k, n);
  const out = new Float32Array(k * n);
  for (let i = 0; i < k; i++) {
    const row = g.gIdx[i] * n;
    for (let j = 0; j < n; j++) {
      out[i * n + j] = f32((g.q[i * n + j] - g.zero[row + j]) * g.scale[row + j]);
    }
  }
  return out;
}

/** Keras' per-channel symmetric int4 quantization of `w [k, n]`: values and scale `[n]`. */
export function quantizeInt4PerChannel(
  w: ArrayLike<number>,
  k: number,
  n: number,
): {q: Int8Array; scale: Float32Array} {
  checkKernel('quantizeInt4PerChannel', w, k, n);
  const q = new Int8Array(k * n);
  const scale = new Float32Array(n);
  for (let j = 0; j < n; j++) {
    let max = 0;
    for (let i = 0; i < k; i++) max = Math.max(max, Math.abs(w[i * n + j]));
    const s = f32(QMAX / f32(max + EPSILON));
    scale[j] = s;
    for (let i = 0; i < k; i++) q[i * n + j] = clip(roundHalfEven(f32(w[i * n + j] * s)));
  }
  return {q, scale};
}

/** Strides of a row-major shape. */
function strides(shape: readonly number[]): number[] {
  const out = new Array<number>(shape.length).fill(1);
  for (let a = shape.length - 2; a >= 0; a--) out[a] = out[a + 1] * shape[a + 1];
  return out;
}

/**
 * The byte holding value `i` (row-major, `strides` of the values) among the packed bytes
 * (`packedStrides`): the same index with its coordinate along `axis` halved; and that coordinate
 * (even: the low nibble).
 */
function packedIndex(
  i: number,
  strides: readonly number[],
  packedStrides: readonly number[],
  axis: number,
): [number, number] {
  let at = 0;
  let rest = i;
  let along = 0;
  for (let d = 0; d < strides.length; d++) {
    const x = Math.floor(rest / strides[d]);
    rest -= x * strides[d];
    if (d === axis) along = x;
    at += (d === axis ? x >> 1 : x) * packedStrides[d];
  }
  return [at, along];
}

function axisOf(what: string, shape: readonly number[], axis: number): number {
  const a = axis < 0 ? axis + shape.length : axis;
  if (!(Number.isInteger(a) && a >= 0 && a < shape.length)) {
    throw new Error(`${what}: expected an axis of a rank-${shape.length} array, received ${axis}`);
  }
  return a;
}

/**
 * Keras' `pack_int4(values, axis)`: int4 values in [-8, 7] of `shape` (row-major), two per byte
 * along `axis` (the even index in the low nibble; an odd length padded with 0); the bytes as
 * signed int8 and their shape.
 */
export function packInt4(
  values: ArrayLike<number>,
  shape: readonly number[],
  axis: number,
): {packed: Int8Array; shape: number[]} {
  const a = axisOf('packInt4', shape, axis);
  const size = shape.reduce((p, d) => p * d, 1);
  if (values.length !== size) {
    throw new Error(
      `packInt4: expected ${size} values for shape [${shape.join(', ')}], received ${values.length}`,
    );
  }
  const out = [...shape];
  out[a] = Math.ceil(shape[a] / 2);
  const [from, to] = [strides(shape), strides(out)];
  const packed = new Int8Array(out.reduce((p, d) => p * d, 1));
  for (let i = 0; i < size; i++) {
    const v = values[i];
    if (!(Number.isInteger(v) && v >= QMIN && v <= QMAX)) {
      throw new Error(
        `packInt4: expected int4 values in [-8, 7], received ${v} at flat index ${i}`,
      );
    }
    const [at, along] = packedIndex(i, from, to, a);
    packed[at] |= (v & 0xf) << ((along & 1) * 4);
  }
  return {packed, shape: out};
}

/**
 * Keras' `unpack_int4(packed, origLen, axis)`: the int4 values of bytes `packed` of
 * `packedShape` (row-major), `origLen` of them along `axis`; a row-major Int8Array.
 */
export function unpackInt4(
  packed: ArrayLike<number>,
  packedShape: readonly number[],
  origLen: number,
  axis: number,
): Int8Array {
  const a = axisOf('unpackInt4', packedShape, axis);
  if (!(Number.isInteger(origLen) && Math.ceil(origLen / 2) === packedShape[a])) {
    throw new Error(
      `unpackInt4: expected ${2 * packedShape[a] - 1} or ${2 * packedShape[a]} values along axis ` +
        `${axis} of a packed axis of ${packedShape[a]}, received ${origLen}`,
    );
  }
  const shape = [...packedShape];
  shape[a] = origLen;
  const [from, to] = [strides(packedShape), strides(shape)];
  const size = shape.reduce((p, d) => p * d, 1);
  const out = new Int8Array(size);
  for (let i = 0; i < size; i++) {
    const [at, along] = packedIndex(i, to, from, a);
    const nibble = (packed[at] >> ((along & 1) * 4)) & 0xf;
    out[i] = (nibble ^ 8) - 8;
  }
  return out;
}

/** Where an int4 weight `[rows, cols]` is packed and grouped (see the module's comment). */
export interface Int4Layout {
  /** The float weight's first axis. */
  rows: number;
  /** The float weight's second axis. */
  cols: number;
  /** The axis its values are packed two to a byte along. */
  packAxis: 0 | 1;
  /** The axis grouped (grouped) or reduced (per channel) by its quantizer. */
  groupAxis: 0 | 1;
  /** Values per group along `groupAxis`; -1: per channel. */
  blockSize: number;
}

/** Whether a layout is grouped (asymmetric, with a zero point). */
export const isGrouped = (layout: Int4Layout): boolean => layout.blockSize > 0;

/** The groups along the grouped axis. */
export function groupCount(layout: Int4Layout): number {
  const along = layout.groupAxis === 0 ? layout.rows : layout.cols;
  return isGrouped(layout) ? Math.ceil(along / layout.blockSize) : 1;
}

/** The stored shapes of a layout's tensors (Keras' variables' shapes). */
export function int4Shapes(layout: Int4Layout): {
  packed: number[];
  scale: number[];
  zero: number[] | null;
  gIdx: number[] | null;
} {
  const {rows, cols, packAxis, groupAxis} = layout;
  const packed = packAxis === 0 ? [Math.ceil(rows / 2), cols] : [rows, Math.ceil(cols / 2)];
  if (!isGrouped(layout)) {
    return {packed, scale: [groupAxis === 0 ? cols : rows], zero: null, gIdx: null};
  }
  const g = groupCount(layout);
  const scale = groupAxis === 0 ? [g, cols] : [rows, g];
  return {packed, scale, zero: scale, gIdx: [groupAxis === 0 ? rows : cols]};
}

/** `[rows, cols]` row-major values transposed to `[cols, rows]`. */
function transposed<T extends Float32Array | Int8Array>(
  values: ArrayLike<number>,
  rows: number,
  cols: number,
  make: (n: number) => T,
): T {
  const out = make(rows * cols);
  for (let r = 0; r < rows; r++)
    for (let c = 0; c < cols; c++) out[c * rows + r] = values[r * cols + c];
  return out;
}

/** An int4 weight quantized in JavaScript, as Keras stores it (see {@link int4Shapes}). */
export interface Int4Quantized {
  /** The int4 values two to a byte along the layout's pack axis. */
  packed: Int8Array;
  scale: Float32Array;
  /** Grouped only. */
  zero: Int8Array | null;
  /** Grouped only: the group of each index along the grouped axis. */
  gIdx: Float32Array | null;
}

/**
 * Keras' `quantize("int4")` of a float weight `[rows, cols]` (row-major) to `layout`: grouped
 * along `groupAxis` ({@link quantizeInt4Grouped}; an embedding, grouped along its second axis, is
 * quantized transposed and transposed back, as Keras does), or per channel
 * ({@link quantizeInt4PerChannel}, reduced over `groupAxis`); then packed along `packAxis`.
 */
export function quantizeInt4(values: ArrayLike<number>, layout: Int4Layout): Int4Quantized {
  const {rows, cols, groupAxis, packAxis} = layout;
  checkKernel('quantizeInt4', values, rows, cols);
  // the quantizers group / reduce the first axis: a weight grouped along its second is transposed
  const along0 = groupAxis === 0;
  const w = along0 ? values : transposed(values, rows, cols, (n) => new Float32Array(n));
  const [k, n] = along0 ? [rows, cols] : [cols, rows];
  let q: Int8Array;
  let scale: Float32Array;
  let zero: Int8Array | null = null;
  let gIdx: Float32Array | null = null;
  if (isGrouped(layout)) {
    const g = quantizeInt4Grouped(w, k, n, layout.blockSize);
    const groups = Math.ceil(k / layout.blockSize);
    q = g.q;
    scale = along0 ? g.scale : transposed(g.scale, groups, n, (m) => new Float32Array(m));
    zero = along0 ? g.zero : transposed(g.zero, groups, n, (m) => new Int8Array(m));
    gIdx = g.gIdx;
  } else {
    ({q, scale} = quantizeInt4PerChannel(w, k, n));
  }
  const values2d = along0 ? q : transposed(q, k, n, (m) => new Int8Array(m));
  return {packed: packInt4(values2d, [rows, cols], packAxis).packed, scale, zero, gIdx};
}
