/**
 * The decoding step's WebAssembly SIMD kernels (wasm/step_kernels.ts through
 * src/kernels/step_kernels.ts): every kernel of StepKernels against plain JavaScript loops written
 * here (float64 sums for the float32 products, tolerance 1e-5 relative; Keras' float32 order with
 * Math.fround for int8, compared exactly), on sizes off every vector width and block (k past the
 * 256-wide inner block, rows 1 / 3 / 17), on a memory of the test's own and on tfjs-wasm's heap.
 */
import {execFileSync} from 'node:child_process';
import * as path from 'node:path';
import * as v8 from 'node:v8';

import * as tf from '@tensorflow/tfjs';

import {RELAXED_SIMD, SIMD} from '../../src/kernels/flags';
import {relaxedSimdProbe, relaxedSimdSupported} from '../../src/kernels/relaxed_simd';
import {StepActivation, type StepKernels} from '../../src/kernels/step_kernels_api';
import {
  stepKernelsFailure,
  stepKernelsHeapBase,
  stepKernelsMemory,
  stepKernelsOn,
  stepKernelsReady,
} from '../../src/kernels/step_kernels';
import {STEP_INT8_RELAXED_WASM_BASE64} from '../../src/kernels/step_int8_relaxed_binary';
import {STEP_KERNELS_WASM_BASE64} from '../../src/kernels/step_kernels_binary';
import {jsStepKernels} from '../../src/kernels/step_kernels_js';
import {useBackend} from '../helpers/backends';
import {withFlags} from '../helpers/kernels';
import {values} from '../helpers/kernel_reference';

const f = Math.fround;

/** Arrays placed one after another (16-aligned) in a memory, from `base` on. */
class Arena {
  constructor(
    readonly memory: WebAssembly.Memory,
    private at: number,
    private readonly end = Infinity,
  ) {}
  private take(bytes: number): number {
    const at = (this.at + 15) & ~15;
    this.at = at + Math.max(bytes, 4);
    if (this.at > this.end) throw new Error(`the test's arena is full (${this.at} > ${this.end})`);
    const have = this.memory.buffer.byteLength;
    if (this.at > have) this.memory.grow(Math.ceil((this.at - have) / 65536));
    return at;
  }
  f32(v: ArrayLike<number>): number {
    const at = this.take(4 * v.length);
    new Float32Array(this.memory.buffer, at, v.length).set(v);
    return at;
  }
  i32(v: ArrayLike<number>): number {
    const at = this.take(4 * v.length);
    new Int32Array(this.memory.buffer, at, v.length).set(v);
    return at;
  }
  i8(v: ArrayLike<number>): number {
    const at = this.take(v.length);
    new Int8Array(this.memory.buffer, at, v.length).set(v);
    return at;
  }
  u8(v: ArrayLike<number>): number {
    const at = this.take(v.length);
    new Uint8Array(this.memory.buffer, at, v.length).set(v);
    return at;
  }
  /** `n` floats filled with NaN (an output nothing wrote stays NaN). */
  out(n: number): number {
    return this.f32(new Float32Array(n).fill(NaN));
  }
  readF32(at: number, n: number): Float32Array {
    return new Float32Array(this.memory.buffer, at, n).slice();
  }
  readI32(at: number, n: number): Int32Array {
    return new Int32Array(this.memory.buffer, at, n).slice();
  }
  readI8(at: number, n: number): Int8Array {
    return new Int8Array(this.memory.buffer, at, n).slice();
  }
}

/** Largest |got - want| / (|want| + 1) (1e-5 relative where values are large, absolute near 0). */
function relError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  expect(got.length).toBe(want.length);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const e = Math.abs(got[i] - want[i]) / (Math.abs(want[i]) + 1);
    worst = Number.isNaN(e) ? Infinity : Math.max(worst, e);
  }
  return worst;
}

/** erf in float64: its Maclaurin series below 3, the continued fraction of erfc above. */
function erfRef(x: number): number {
  const a = Math.abs(x);
  if (a < 3) {
    let term = x;
    let sum = x;
    for (let n = 1; n < 120; n++) {
      term *= (-x * x) / n;
      sum += term / (2 * n + 1);
    }
    return (sum * 2) / Math.sqrt(Math.PI);
  }
  let fr = a;
  for (let n = 80; n >= 1; n--) fr = a + n / 2 / fr;
  const erfc = Math.exp(-a * a) / (Math.sqrt(Math.PI) * fr);
  return x < 0 ? erfc - 1 : 1 - erfc;
}

function actRef(x: number, act: StepActivation): number {
  switch (act) {
    case StepActivation.Relu:
      return Math.max(x, 0);
    case StepActivation.GeluErf:
      return (x / 2) * (1 + erfRef(x / Math.SQRT2));
    case StepActivation.GeluTanh:
      return (x / 2) * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
    case StepActivation.Silu:
      return x / (1 + Math.exp(-x));
    case StepActivation.Tanh:
      return Math.tanh(x);
    case StepActivation.Sigmoid:
      return 1 / (1 + Math.exp(-x));
    default:
      return x;
  }
}

/** x [rows, k] · w [k, n] (or wᵀ with w [n, k]) + bias, activation: float64 loops. */
function productRef(
  x: Float32Array,
  w: Float32Array,
  rows: number,
  k: number,
  n: number,
  transposed: boolean,
  bias?: Float32Array,
  act = StepActivation.None,
): Float64Array {
  const out = new Float64Array(rows * n);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += x[r * k + p] * (transposed ? w[j * k + p] : w[p * n + j]);
      out[r * n + j] = actRef(s + (bias ? bias[j] : 0), act);
    }
  }
  return out;
}

/** Round half to even (numpy's / Keras' `round`). */
function roundHalfEven(v: number): number {
  const fl = Math.floor(v);
  const d = v - fl;
  if (d < 0.5) return fl;
  if (d > 0.5) return fl + 1;
  return fl % 2 === 0 ? fl : fl + 1;
}

/** Keras' abs_max_quantize on the last axis, in float32 (Math.fround after each operation). */
function quantizeRef(x: Float32Array, rows: number, k: number): {q: Int8Array; qs: Float32Array} {
  const q = new Int8Array(rows * k);
  const qs = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let m = 0;
    for (let j = 0; j < k; j++) m = Math.max(m, Math.abs(x[r * k + j]));
    const s = f(127 / f(m + f(1e-7)));
    qs[r] = s;
    for (let j = 0; j < k; j++) {
      q[r * k + j] = Math.min(127, Math.max(-127, roundHalfEven(f(x[r * k + j] * s))));
    }
  }
  return {q, qs};
}

/** Random int8 values in [-127, 127]. */
function int8s(n: number, seed: number): Int8Array {
  return Int8Array.from(values(n, seed), (v) => Math.round(v * 127));
}

/** Keras' int8 Dense / tied logits: exact integer sums, then float32 in Keras' order. */
function int8ProductRef(
  q: Int8Array,
  qs: Float32Array,
  w: Int8Array,
  ws: Float32Array,
  rows: number,
  k: number,
  n: number,
  transposed: boolean,
  bias?: Float32Array,
): Float32Array {
  const out = new Float32Array(rows * n);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) s += q[r * k + p] * (transposed ? w[j * k + p] : w[p * n + j]);
      let v = f(f(s) / f(qs[r] * ws[j]));
      if (bias) v = f(v + bias[j]);
      out[r * n + j] = v;
    }
  }
  return out;
}

interface AttendCase {
  B: number;
  t: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  maxLength: number;
  start: number;
  mask: boolean;
  /** multiplies q (large scores: softmax needs the max subtracted) */
  qScale?: number;
}

/**
 * Attention over the cache in float64: query i of batch row b attends to kept positions
 * 0 .. start + i of its key / value head (h / (heads / kvHeads)).
 */
function attendRef(
  c: AttendCase,
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  mask: Uint8Array | null,
  scale: number,
): Float64Array {
  const {B, t, heads, kvHeads, headDim, maxLength, start} = c;
  const out = new Float64Array(B * t * heads * headDim);
  const kvw = kvHeads * headDim;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < t; i++) {
      for (let h = 0; h < heads; h++) {
        const g = Math.floor(h / (heads / kvHeads));
        const qo = (b * t + i) * heads * headDim + h * headDim;
        const kept: number[] = [];
        const scores: number[] = [];
        for (let pos = 0; pos <= start + i; pos++) {
          if (mask && mask[b * maxLength + pos] === 0) continue;
          let s = 0;
          for (let d = 0; d < headDim; d++) {
            s += q[qo + d] * k[(b * maxLength + pos) * kvw + g * headDim + d];
          }
          kept.push(pos);
          scores.push(scale * s);
        }
        const m = Math.max(...scores);
        const e = scores.map((s) => Math.exp(s - m));
        const sum = e.reduce((a, x) => a + x, 0);
        for (let d = 0; d < headDim; d++) {
          let acc = 0;
          kept.forEach((pos, n) => {
            acc += (e[n] / sum) * v[(b * maxLength + pos) * kvw + g * headDim + d];
          });
          out[qo + d] = acc;
        }
      }
    }
  }
  return out;
}

/** The cases each product runs: [rows, k, n] off 4 / 8 / 16, k past the 256-wide block. */
const PRODUCT_SIZES: Array<[number, number, number]> = [
  [1, 1, 1],
  [1, 7, 5],
  [1, 13, 33],
  [1, 301, 67],
  [2, 5, 3],
  [3, 7, 13],
  [3, 301, 33],
  [5, 257, 17],
  [17, 13, 67],
  [17, 300, 9],
  [17, 515, 41],
  // rows 1-9 against the paths by row count (one row; two rows streaming the weight together,
  // with column blocks past 1024 and k off 4; a third row alone; 4-row tiles from 5 rows on),
  // n off 4 / 8 / 16, k off 4 / 8 / 16 (denseT's 16-float passes, then 4, then single values)
  [1, 45, 1031],
  [2, 130, 1031],
  [2, 13, 7],
  [3, 29, 1029],
  [4, 45, 19],
  [5, 31, 23],
  [6, 29, 11],
  [7, 9, 5],
  [8, 37, 19],
  [9, 31, 23],
];

/**
 * denseRows' cases: rows 5-40 (6 and 7 off its 4-row tiles, 131 past its 128-row groups), n off
 * its 8-wide panels (and under one), k off 4 and past its 256-deep blocks (2 and 3 blocks); rows
 * under 5 as dense.
 */
const ROWS_PRODUCT_SIZES: Array<[number, number, number]> = [
  [1, 13, 33],
  [3, 29, 11],
  [4, 45, 19],
  [5, 31, 23],
  [6, 29, 11],
  [7, 9, 5],
  [9, 300, 19],
  [13, 257, 37],
  [17, 515, 41],
  [24, 64, 48],
  [32, 256, 64],
  [37, 130, 3],
  [40, 45, 1031],
  [131, 17, 13],
];

/** `[k, n]` values as `[n, k]` (`t[j * k + p] = v[p * n + j]`), a plain loop. */
function transposeInt8(v: ArrayLike<number>, k: number, n: number): Int8Array {
  const t = new Int8Array(n * k);
  for (let p = 0; p < k; p++) for (let j = 0; j < n; j++) t[j * k + p] = v[p * n + j];
  return t;
}

/** The first index where got and want differ (Object.is: -0 is not 0), with both values; or null. */
function firstDifference(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
): [number, number, number] | null {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++)
    if (!Object.is(got[i], want[i])) return [i, got[i], want[i]];
  return null;
}

/** denseInt8KN's sizes: k off its 8-row passes (and their spread blocks), n off its 16 / 8 columns. */
const KN_ROWS = [1, 2, 3, 5];
const KN_K = [1, 3, 4, 5, 17, 33, 64];
const KN_N = [1, 7, 8, 9, 15, 16, 33, 100];

/**
 * `denseInt8KN` (the kernel in Keras' layout `[k, n]`) on rows `rows` and each k of `ks`, n of
 * `ns`: equal to the plain loop with and without a bias, nothing written past out; with an
 * activation, equal bit for bit to `denseInt8` on the same kernel transposed (the same float32
 * steps), and near the float64 activation of the loop.
 */
function denseInt8KNChecks(
  K: StepKernels,
  A: Arena,
  rows: number,
  ks: number[],
  ns: number[],
): void {
  for (const k of ks) {
    for (const n of ns) {
      const qv = int8s(rows * k, 7 + rows * k);
      // -127 and 127 (q's extremes), -128 in the kernel (a byte as Keras could hold it)
      qv[0] = -127;
      qv[rows * k - 1] = 127;
      const qsv = Float32Array.from(values(rows, 8 + rows), (v) => 10 + 100 * Math.abs(v));
      const wv = int8s(k * n, 9 + k * n);
      wv[0] = -128;
      wv[k * n - 1] = 127;
      const wsv = Float32Array.from(values(n, 10 + n), (v) => 50 + 70 * Math.abs(v));
      const bv = values(n, 11 + n);
      const [q, qs, w, ws, b] = [A.i8(qv), A.f32(qsv), A.i8(wv), A.f32(wsv), A.f32(bv)];
      const out = A.out(rows * n + 8);
      const run = (bias: number, act: StepActivation) => {
        new Float32Array(A.memory.buffer, out, rows * n).fill(NaN);
        K.denseInt8KN(rows, k, n, q, qs, w, ws, bias, act, out);
        const got = A.readF32(out, rows * n + 8);
        // nothing written past out
        expect(Array.from(got.subarray(rows * n), (v) => Number.isNaN(v))).toEqual(
          new Array(8).fill(true),
        );
        return got.subarray(0, rows * n);
      };
      for (const bias of [b, 0]) {
        const want = int8ProductRef(qv, qsv, wv, wsv, rows, k, n, false, bias ? bv : undefined);
        const got = run(bias, StepActivation.None);
        expect([rows, k, n, bias > 0, firstDifference(got, want)]).toEqual([
          rows,
          k,
          n,
          bias > 0,
          null,
        ]);
      }
      const viaT = A.out(rows * n);
      const wt = A.i8(transposeInt8(wv, k, n));
      K.denseInt8(rows, k, n, q, qs, wt, ws, b, StepActivation.Silu, viaT);
      const got = run(b, StepActivation.Silu);
      expect([rows, k, n, firstDifference(got, A.readF32(viaT, rows * n))]).toEqual([
        rows,
        k,
        n,
        null,
      ]);
      const lin = int8ProductRef(qv, qsv, wv, wsv, rows, k, n, false, bv);
      expect(
        relError(
          got,
          Array.from(lin, (v) => actRef(v, StepActivation.Silu)),
        ),
      ).toBeLessThan(1e-6);
    }
  }
}

/**
 * `transposeInt8` against the loop definition: `[k, n]` bytes (-128 .. 127, unchecked) as `[n, k]`
 * rows of ldd = k and ldd > k, whole 16 x 16 tiles, ragged edges and smaller than a tile: every
 * byte in place, none written outside (between the rows of ldd > k, or past the last); and a
 * kernel transposed in blocks of its rows, each into its place.
 */
function transposeInt8Checks(K: StepKernels, A: Arena): void {
  for (const [k, n] of [
    [1, 1],
    [3, 5],
    [16, 16],
    [32, 48],
    [17, 16],
    [16, 21],
    [40, 45],
    [15, 17],
    [33, 100],
  ]) {
    const v = Int8Array.from({length: k * n}, (_, i) => ((i * 37 + 11) % 256) - 128);
    v[0] = -128;
    v[k * n - 1] = 127;
    const src = A.i8(v);
    for (const ldd of [k, k + 5]) {
      const size = n * ldd + 16;
      const dst = A.i8(new Array(size).fill(99));
      K.transposeInt8(k, n, src, dst, ldd);
      const want = new Array(size).fill(99);
      for (let p = 0; p < k; p++) for (let j = 0; j < n; j++) want[j * ldd + p] = v[p * n + j];
      expect([k, n, ldd, Array.from(A.readI8(dst, size))]).toEqual([k, n, ldd, want]);
    }
  }
  const [k, n] = [40, 45];
  const v = Int8Array.from({length: k * n}, (_, i) => ((i * 53 + 7) % 256) - 128);
  const src = A.i8(v);
  const dst = A.i8(new Array(k * n).fill(99));
  for (const [p0, rows] of [
    [0, 16],
    [16, 16],
    [32, 8],
  ]) {
    K.transposeInt8(rows, n, src + p0 * n, dst + p0, k);
  }
  expect(Array.from(A.readI8(dst, k * n))).toEqual(Array.from(transposeInt8(v, k, n)));
}

/** The kernel suite, on `setup()`'s memory. */
function kernelSuite(setup: () => {kernels: StepKernels; arena: () => Arena}): void {
  let K: StepKernels;
  let A: Arena;
  beforeEach(() => {
    const s = setup();
    K = s.kernels;
    A = s.arena();
  });

  it('transposeInt8: int8 [k, n] as [n, k] with rows of ldd >= k, nothing written outside', () => {
    transposeInt8Checks(K, A);
  });

  for (const rows of KN_ROWS) {
    it(`denseInt8KN (Keras' [k, n]) = the loop exactly, with and without bias; with silu = denseInt8 on the transpose: rows ${rows}, k ${KN_K}, n ${KN_N}`, () => {
      denseInt8KNChecks(K, A, rows, KN_K, KN_N);
    });
  }

  // passes of rows 164 apart at n 100 (1312 rows, then 88 rows 11 apart, then single rows),
  // adjacent rows from n 16384 on
  for (const [rows, k, n] of [
    [1, 1403, 100],
    [3, 1317, 100],
    [2, 17, 16400],
  ]) {
    it(`denseInt8KN past its spread passes, exactly: rows ${rows}, k ${k}, n ${n}`, () => {
      denseInt8KNChecks(K, A, rows, [k], [n]);
    });
  }

  for (const [rows, k, n] of ROWS_PRODUCT_SIZES) {
    it(`denseRows = a float64 loop (1e-5 relative), scratch of NaN, nothing written past out: rows ${rows}, k ${k}, n ${n}`, () => {
      const xv = values(rows * k, rows + 9 * k);
      const wv = values(k * n, k + 5 * n);
      const bv = values(n, n + 13);
      const x = A.f32(xv);
      const w = A.f32(wv);
      const b = A.f32(bv);
      // the scratch holds NaN (what a previous call or a fresh allocation left must not matter)
      const work = A.out(K.denseRowsWorkBytes / 4);
      const out = A.out(rows * n + 8);
      K.denseRows(rows, k, n, x, w, 0, StepActivation.None, out, work);
      const got = A.readF32(out, rows * n + 8);
      expect(
        relError(got.subarray(0, rows * n), productRef(xv, wv, rows, k, n, false)),
      ).toBeLessThan(1e-5);
      expect(Array.from(got.subarray(rows * n), (v) => Number.isNaN(v))).toEqual(
        new Array(8).fill(true),
      );
      // the same scratch again (now holding this call's panels), with a bias and gelu
      K.denseRows(rows, k, n, x, w, b, StepActivation.GeluTanh, out, work);
      const want = productRef(xv, wv, rows, k, n, false).map((v, i) =>
        actRef(Math.fround(v + bv[i % n]), StepActivation.GeluTanh),
      );
      expect(relError(A.readF32(out, rows * n), want)).toBeLessThan(1e-5);
    });
  }

  for (const [rows, k, n] of PRODUCT_SIZES) {
    it(`dense = a float64 loop (1e-5 relative): rows ${rows}, k ${k}, n ${n}, with and without bias`, () => {
      const xv = values(rows * k, rows + 3 * k);
      const wv = values(k * n, k + 7 * n);
      const bv = values(n, n + 11);
      const x = A.f32(xv);
      const w = A.f32(wv);
      const b = A.f32(bv);
      const out = A.out(rows * n);
      K.dense(rows, k, n, x, w, 0, StepActivation.None, out);
      expect(
        relError(A.readF32(out, rows * n), productRef(xv, wv, rows, k, n, false)),
      ).toBeLessThan(1e-5);
      K.dense(rows, k, n, x, w, b, StepActivation.None, out);
      expect(
        relError(A.readF32(out, rows * n), productRef(xv, wv, rows, k, n, false, bv)),
      ).toBeLessThan(1e-5);
    });

    it(`denseT = a float64 loop (1e-5 relative): rows ${rows}, k ${k}, n ${n}`, () => {
      const xv = values(rows * k, rows + 5 * k);
      const wv = values(n * k, k + 3 * n);
      const x = A.f32(xv);
      const w = A.f32(wv);
      const out = A.out(rows * n);
      K.denseT(rows, k, n, x, w, out);
      expect(relError(A.readF32(out, rows * n), productRef(xv, wv, rows, k, n, true))).toBeLessThan(
        1e-5,
      );
    });

    it(`denseInt8 / denseTInt8 = exact int32 sums, then Keras' float32 order (equal): rows ${rows}, k ${k}, n ${n}`, () => {
      const qv = int8s(rows * k, 1 + rows * k);
      const qsv = Float32Array.from(values(rows, 2 + rows), (v) => 10 + 100 * Math.abs(v));
      const wv = int8s(k * n, 3 + k * n);
      const wsv = Float32Array.from(values(n, 4 + n), (v) => 50 + 70 * Math.abs(v));
      const bv = values(n, 5 + n);
      const q = A.i8(qv);
      const qs = A.f32(qsv);
      const ws = A.f32(wsv);
      const b = A.f32(bv);
      const out = A.out(rows * n);
      // denseInt8 reads the kernel packed transposed ([n, k], as transposeInt8 packs it)
      const wt = transposeInt8(wv, k, n);
      const wto = A.i8(wt);
      K.denseInt8(rows, k, n, q, qs, wto, ws, b, StepActivation.None, out);
      expect(A.readF32(out, rows * n)).toEqual(
        int8ProductRef(qv, qsv, wv, wsv, rows, k, n, false, bv),
      );
      K.denseInt8(rows, k, n, q, qs, wto, ws, 0, StepActivation.None, out);
      expect(A.readF32(out, rows * n)).toEqual(int8ProductRef(qv, qsv, wv, wsv, rows, k, n, false));
      // the same values as a [n, k] table, the tied logits
      K.denseTInt8(rows, k, n, q, qs, wto, ws, out);
      expect(A.readF32(out, rows * n)).toEqual(int8ProductRef(qv, qsv, wt, wsv, rows, k, n, true));
    });
  }

  it('int8 sums beyond float32 integers (|sum| > 2^24) stay exact until the conversion', () => {
    // q 127 (row r's first -127 + r), w 127 on even and 126 on odd inner indices (a column's sign
    // alternating): each pair of products is odd, |sum| ~ 1101 / 2 * 32131 > 2^24, where float32
    // holds only even integers; k odd for the tail
    const [rows, k, n] = [3, 1101, 21];
    const qv = new Int8Array(rows * k).fill(127);
    for (let r = 0; r < rows; r++) qv[r * k] = -127 + r;
    const wv = new Int8Array(k * n);
    for (let p = 0; p < k; p++) {
      for (let j = 0; j < n; j++)
        wv[p * n + j] = (p % 2 === 0 ? 127 : 126) * (j % 3 === 0 ? -1 : 1);
    }
    const qsv = new Float32Array(rows).fill(1);
    const wsv = new Float32Array(n).fill(1);
    const out = A.out(rows * n);
    const wt = transposeInt8(wv, k, n);
    K.denseInt8(rows, k, n, A.i8(qv), A.f32(qsv), A.i8(wt), A.f32(wsv), 0, 0, out);
    const want = int8ProductRef(qv, qsv, wv, wsv, rows, k, n, false);
    expect(A.readF32(out, rows * n)).toEqual(want);
    expect(Math.abs(want[0])).toBeGreaterThan(2 ** 24);
    // the case tells the two apart: the same sum accumulated in float32 pair by pair is off
    let inF32 = 0;
    for (let p = 0; p + 1 < k; p += 2) {
      inF32 = f(inF32 + (qv[p] * wv[p * n] + qv[p + 1] * wv[(p + 1) * n]));
    }
    inF32 = f(inF32 + qv[k - 1] * wv[(k - 1) * n]);
    expect(inF32).not.toBe(want[0]);
    // and the tied logits on the same values as a [n, k] table
    K.denseTInt8(rows, k, n, A.i8(qv), A.f32(qsv), A.i8(wt), A.f32(wsv), out);
    expect(A.readF32(out, rows * n)).toEqual(want);
    // and the kernel in Keras' layout
    K.denseInt8KN(rows, k, n, A.i8(qv), A.f32(qsv), A.i8(wv), A.f32(wsv), 0, 0, out);
    expect(A.readF32(out, rows * n)).toEqual(want);
  });

  it('denseInt8 applies the activation after the bias', () => {
    const [rows, k, n] = [2, 9, 7];
    const qv = int8s(rows * k, 8);
    const wv = int8s(k * n, 9);
    const qsv = new Float32Array([40, 60]);
    const wsv = Float32Array.from(values(n, 10), (v) => 30 + 10 * v);
    const bv = values(n, 11);
    const out = A.out(rows * n);
    K.denseInt8(
      rows,
      k,
      n,
      A.i8(qv),
      A.f32(qsv),
      A.i8(transposeInt8(wv, k, n)),
      A.f32(wsv),
      A.f32(bv),
      StepActivation.GeluTanh,
      out,
    );
    const lin = int8ProductRef(qv, qsv, wv, wsv, rows, k, n, false, bv);
    expect(
      relError(
        A.readF32(out, rows * n),
        Array.from(lin, (v) => actRef(v, 3)),
      ),
    ).toBeLessThan(1e-6);
  });

  const ACT_NAMES = ['none', 'relu', 'gelu erf', 'gelu tanh', 'silu', 'tanh', 'sigmoid'];
  for (const act of [1, 2, 3, 4, 5, 6] as StepActivation[]) {
    it(`activation ${ACT_NAMES[act]}: dense's and activate's = float64 math (1e-7 for gelu erf)`, () => {
      const n = 203;
      const xv = Float32Array.from(values(n, 30 + act), (v, i) =>
        i < 5 ? [0, -0, 1e-6, -30, 30][i] : v * 9,
      );
      const x = A.f32(xv);
      const out = A.out(n);
      K.activate(n, x, act, out);
      const got = A.readF32(out, n);
      for (let i = 0; i < n; i++) {
        const want = actRef(xv[i], act);
        // float32 rounding of the result, plus (gelu erf) erf's error 1e-7 times |x| / 2
        const ulp = want === 0 ? 0 : 2 ** (Math.floor(Math.log2(Math.abs(want))) - 23);
        const tol = act === 2 ? (Math.abs(xv[i]) / 2) * 1e-7 + ulp : 1e-6 * (1 + Math.abs(want));
        expect(Math.abs(got[i] - want)).toBeLessThanOrEqual(tol);
      }
      // in place, and through dense with an identity weight
      K.activate(n, x, act, x);
      expect(A.readF32(x, n)).toEqual(got);
      const eye = new Float32Array(9).fill(0);
      [0, 4, 8].forEach((i) => (eye[i] = 1));
      const o3 = A.out(3);
      K.dense(1, 3, 3, A.f32(xv.subarray(5, 8)), A.f32(eye), 0, act, o3);
      expect(A.readF32(o3, 3)).toEqual(got.subarray(5, 8));
    });
  }

  it('quantizeRows = Keras abs_max_quantize in float32: values, scales, odd widths', () => {
    for (const [rows, k] of [
      [1, 1],
      [3, 7],
      [17, 45],
      [2, 300],
    ]) {
      const xv = Float32Array.from(values(rows * k, rows * k), (v, i) => v * (1 + (i % 5)));
      const q = A.i8(new Int8Array(rows * k));
      const qs = A.out(rows);
      K.quantizeRows(rows, k, A.f32(xv), q, qs);
      const want = quantizeRef(xv, rows, k);
      expect(A.readI8(q, rows * k)).toEqual(want.q);
      expect(A.readF32(qs, rows)).toEqual(want.qs);
    }
  });

  it('quantizeRows rounds ties to even, clips the largest to +-127, zero rows to 0', () => {
    // row 0: max 127, so the scale is 127 / (127 + 1e-7) = 1 in float32 and x * scale = x: the
    // .5 values are ties; 21 values (a SIMD part and a tail)
    const ties = [
      0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 126.5, -126.5, 4.5, 5.5, 6.5, 7.5, -7.5, 8.5, 9.5, 127,
      10.5, -3.5, 11.5, 0.25,
    ];
    const k = ties.length;
    const xv = new Float32Array(3 * k);
    xv.set(ties, 0);
    // row 1 all zero; row 2: the largest magnitudes (both signs) must land on exactly -127 / 127
    for (let j = 0; j < k; j++) xv[2 * k + j] = ((j % 3) - 1) * 0.37 * (j + 1);
    xv[2 * k + 4] = -123.4;
    xv[2 * k + 19] = 123.4;
    const q = A.i8(new Int8Array(3 * k));
    const qs = A.out(3);
    K.quantizeRows(3, k, A.f32(xv), q, qs);
    const got = A.readI8(q, 3 * k);
    const scales = A.readF32(qs, 3);
    expect(scales[0]).toBe(1);
    expect(Array.from(got.subarray(0, k))).toEqual([
      0, 2, 2, 0, -2, -2, 4, 126, -126, 4, 6, 6, 8, -8, 8, 10, 127, 10, -4, 12, 0,
    ]);
    expect(Array.from(got.subarray(k, 2 * k))).toEqual(new Array(k).fill(0));
    expect(scales[1]).toBe(f(127 / f(1e-7)));
    expect(got[2 * k + 4]).toBe(-127);
    expect(got[2 * k + 19]).toBe(127);
    expect(got).toEqual(quantizeRef(xv, 3, k).q);
    expect(scales).toEqual(quantizeRef(xv, 3, k).qs);
  });

  it("layerNorm (tfjs' float32 mean and variance) / rmsNorm = float64 loops (1e-6 relative), with and without gamma / beta, in place", () => {
    // [rows, dim, mean]: a mean of 300 against a spread of +-7 (float32's E[x^2] - mean^2 loses
    // the variance there; so does a float32 sum of 768 values near 300 the mean, to ~1e-4)
    for (const [rows, dim, offset] of [
      [1, 1, 3],
      [3, 7, 3],
      [17, 45, 3],
      [2, 771, 3],
      [4, 768, 300],
    ]) {
      const xv = Float32Array.from(values(rows * dim, dim), (v, i) => offset + v * (1 + (i % 7)));
      const g = values(dim, dim + 1);
      const be = values(dim, dim + 2);
      const eps = 1e-5;
      const ln = (gamma: boolean, beta: boolean) => {
        const out = new Float64Array(rows * dim);
        for (let r = 0; r < rows; r++) {
          const row = xv.subarray(r * dim, (r + 1) * dim);
          // tfjs' moments: float32 tensors between its ops (mean, x - mean, its square, mean)
          const mean = f(row.reduce((a, x) => a + x, 0) / dim);
          const variance = f(row.reduce((a, x) => a + f(f(x - mean) ** 2), 0) / dim);
          for (let j = 0; j < dim; j++) {
            out[r * dim + j] =
              ((row[j] - mean) / Math.sqrt(variance + f(eps))) * (gamma ? g[j] : 1) +
              (beta ? be[j] : 0);
          }
        }
        return out;
      };
      const x = A.f32(xv);
      const go = A.f32(g);
      const bo = A.f32(be);
      const out = A.out(rows * dim);
      K.layerNorm(rows, dim, x, go, bo, eps, out);
      expect(relError(A.readF32(out, rows * dim), ln(true, true))).toBeLessThan(1e-6);
      K.layerNorm(rows, dim, x, 0, 0, eps, out);
      expect(relError(A.readF32(out, rows * dim), ln(false, false))).toBeLessThan(1e-6);
      K.layerNorm(rows, dim, x, go, 0, eps, out);
      expect(relError(A.readF32(out, rows * dim), ln(true, false))).toBeLessThan(1e-6);
      const rms = new Float64Array(rows * dim);
      for (let r = 0; r < rows; r++) {
        const row = xv.subarray(r * dim, (r + 1) * dim);
        const ms = row.reduce((a, x) => a + x * x, 0) / dim;
        for (let j = 0; j < dim; j++) rms[r * dim + j] = (row[j] / Math.sqrt(ms + f(eps))) * g[j];
      }
      K.rmsNorm(rows, dim, x, go, eps, out);
      expect(relError(A.readF32(out, rows * dim), rms)).toBeLessThan(1e-6);
      K.layerNorm(rows, dim, x, go, bo, eps, x); // in place
      expect(relError(A.readF32(x, rows * dim), ln(true, true))).toBeLessThan(1e-6);
    }
  });

  it("layerNorm = tfjs' LayerNormalization (1e-6 relative) on the current backend", () => {
    const [rows, dim] = [5, 771];
    const xv = Float32Array.from(values(rows * dim, 90), (v, i) => 0.5 + v * (1 + (i % 5)));
    const g = values(dim, 91);
    const be = values(dim, 92);
    const layer = tf.layers.layerNormalization({axis: -1, epsilon: 1e-3});
    layer.build([null, dim]);
    const [gt, bt] = [tf.tensor1d(g), tf.tensor1d(be)];
    layer.setWeights([gt, bt]);
    const xt = tf.tensor2d(xv, [rows, dim]);
    const yt = layer.apply(xt) as tf.Tensor;
    const want = yt.dataSync();
    tf.dispose([gt, bt, xt, yt]);
    layer.weights.forEach((w) => w.dispose());
    const out = A.out(rows * dim);
    K.layerNorm(rows, dim, A.f32(xv), A.f32(g), A.f32(be), 1e-3, out);
    expect(relError(A.readF32(out, rows * dim), want)).toBeLessThan(1e-6);
  });

  it('gather, gatherInt8 (Keras: float32(q) / scale), addPositions, writeCache, add, mul: equal', () => {
    const [vocab, dim] = [11, 21];
    const table = values(vocab * dim, 40);
    const ids = [3, 0, 10, 3];
    const out = A.out(ids.length * dim);
    const idso = A.i32(ids);
    K.gather(ids.length, dim, idso, A.f32(table), out);
    const want = new Float32Array(ids.length * dim);
    ids.forEach((id, r) => want.set(table.subarray(id * dim, (id + 1) * dim), r * dim));
    expect(A.readF32(out, ids.length * dim)).toEqual(want);

    const t8 = int8s(vocab * dim, 41);
    const sc = Float32Array.from(values(vocab, 42), (v) => 20 + 90 * Math.abs(v));
    K.gatherInt8(ids.length, dim, idso, A.i8(t8), A.f32(sc), out);
    ids.forEach((id, r) => {
      for (let j = 0; j < dim; j++) want[r * dim + j] = f(t8[id * dim + j] / sc[id]);
    });
    expect(A.readF32(out, ids.length * dim)).toEqual(want);

    // positions: B 2, t 2, start 5 of a [9, dim] table
    const pos = values(9 * dim, 43);
    const base = values(4 * dim, 44);
    const po = A.f32(base);
    K.addPositions(2, 2, dim, 5, A.f32(pos), po);
    const wantPos = Float32Array.from(base, (v, i) =>
      f(v + pos[(5 + (((i / dim) | 0) % 2)) * dim + (i % dim)]),
    );
    expect(A.readF32(po, 4 * dim)).toEqual(wantPos);

    // cache [2, 7, dim]: rows at positions 3, 4 of each batch row, the rest untouched
    const cacheV = values(2 * 7 * dim, 45);
    const cache = A.f32(cacheV);
    K.writeCache(2, 2, dim, 7, 3, A.f32(base), cache);
    const wantCache = cacheV.slice();
    for (let b = 0; b < 2; b++) {
      wantCache.set(base.subarray(b * 2 * dim, (b + 1) * 2 * dim), (b * 7 + 3) * dim);
    }
    expect(A.readF32(cache, 2 * 7 * dim)).toEqual(wantCache);

    const a = values(37, 46);
    const b = values(37, 47);
    const ao = A.f32(a);
    const bo = A.f32(b);
    const o = A.out(37);
    K.add(37, ao, bo, o);
    expect(A.readF32(o, 37)).toEqual(Float32Array.from(a, (v, i) => f(v + b[i])));
    K.mul(37, ao, bo, ao); // out aliases a
    expect(A.readF32(ao, 37)).toEqual(Float32Array.from(a, (v, i) => f(v * b[i])));
  });

  it('argmax: the first of equal largest values, odd widths, rows', () => {
    const cols = 23;
    const rows = [
      Array.from({length: cols}, (_, i) => -i),
      Array.from({length: cols}, (_, i) => (i === 6 || i === 13 ? 5 : 1)),
      Array.from({length: cols}, (_, i) => (i === 22 ? 2 : i === 21 ? 2 : -1)),
      Array.from({length: cols}, (_, i) => (i === 1 ? NaN : i === 17 ? 4 : 3)),
      Array.from({length: cols}, () => -Infinity),
    ];
    const out = A.i32(new Int32Array(rows.length).fill(-9));
    K.argmax(rows.length, cols, A.f32(rows.flat()), out);
    expect(Array.from(A.readI32(out, rows.length))).toEqual([0, 6, 21, 17, 0]);
    // a row whose largest value sits in the SIMD part after an earlier lane block
    const wide = values(5000, 48);
    wide[4321] = 2;
    wide[4999] = 2;
    const o2 = A.i32([0]);
    K.argmax(1, 5000, A.f32(wide), o2);
    expect(A.readI32(o2, 1)[0]).toBe(4321);
  });

  const ATTEND: AttendCase[] = [
    {B: 2, t: 1, heads: 4, kvHeads: 4, headDim: 7, maxLength: 11, start: 5, mask: true},
    {B: 1, t: 3, heads: 2, kvHeads: 2, headDim: 16, maxLength: 9, start: 0, mask: false},
    {B: 2, t: 2, heads: 6, kvHeads: 2, headDim: 5, maxLength: 13, start: 4, mask: true},
    {B: 1, t: 4, heads: 4, kvHeads: 1, headDim: 9, maxLength: 10, start: 3, mask: true},
    {B: 1, t: 1, heads: 2, kvHeads: 1, headDim: 8, maxLength: 12, start: 10, mask: false},
    // scores near 200: exp overflows unless the largest is subtracted
    {B: 1, t: 2, heads: 2, kvHeads: 2, headDim: 6, maxLength: 8, start: 3, mask: true, qScale: 60},
  ];
  for (const c of ATTEND) {
    it(`attend = a float64 loop (1e-5): ${JSON.stringify(c)}`, () => {
      const {B, t, heads, kvHeads, headDim, maxLength, start} = c;
      const kvw = kvHeads * headDim;
      const qv = Float32Array.from(
        values(B * t * heads * headDim, 50 + headDim),
        (v) => v * (c.qScale ?? 1),
      );
      const kv = values(B * maxLength * kvw, 51 + headDim);
      const vv = values(B * maxLength * kvw, 52 + headDim);
      if (c.qScale) {
        // keys along the queries' signs, a little shorter at each later position: scores near
        // 600, a few apart (softmax neither uniform nor one-hot)
        for (let i = 0; i < kv.length; i++) {
          const pos = Math.floor(i / kvw) % maxLength;
          kv[i] = (Math.sign(qv[i % (heads * headDim)]) || 1) * (1 - 0.005 * pos);
        }
      }
      const mask = c.mask ? new Uint8Array(B * maxLength).fill(1) : null;
      if (mask) {
        for (let b = 0; b < B; b++) {
          for (let p = 1; p < maxLength; p += 3) mask[b * maxLength + p] = 0;
        }
      }
      // positions past the last a query may see, and masked ones, hold NaN: reading them shows
      for (let b = 0; b < B; b++) {
        for (let p = 0; p < maxLength; p++) {
          if (p > start + t - 1 || (mask && mask[b * maxLength + p] === 0)) {
            for (let d = 0; d < kvw; d++) {
              kv[(b * maxLength + p) * kvw + d] = NaN;
              vv[(b * maxLength + p) * kvw + d] = NaN;
            }
          }
        }
      }
      const scale = (1 / Math.sqrt(headDim)) * (c.qScale ? 8 : 1);
      const want = attendRef(c, qv, kv, vv, mask, f(scale));
      const out = A.out(B * t * heads * headDim);
      K.attend(
        B,
        t,
        heads,
        kvHeads,
        headDim,
        maxLength,
        start,
        A.f32(qv),
        A.f32(kv),
        A.f32(vv),
        mask ? A.u8(mask) : 0,
        scale,
        A.out(maxLength),
        out,
      );
      expect(relError(A.readF32(out, want.length), want)).toBeLessThan(1e-5);
    });
  }

  it('attend: a query of t > 1 sees exactly its own prefix (the last query differs from the first)', () => {
    // the value at position start + i is 1 for query i's own position, 0 elsewhere: output = the
    // weight of its own position, > 0 (key range includes it) and < 1 (it sees others too)
    const c = {B: 1, t: 3, heads: 1, kvHeads: 1, headDim: 4, maxLength: 6, start: 2};
    const kv = new Float32Array(6 * 4).fill(0.1);
    const vv = new Float32Array(6 * 4);
    for (let p = 0; p < 6; p++) vv[p * 4 + (p % 4)] = 1;
    const qv = new Float32Array(3 * 4).fill(1);
    const out = A.out(12);
    K.attend(1, 3, 1, 1, 4, 6, 2, A.f32(qv), A.f32(kv), A.f32(vv), 0, 1, A.out(6), out);
    const got = A.readF32(out, 12);
    // equal scores: query i averages positions 0 .. 2 + i
    const want = new Float64Array(12);
    for (let i = 0; i < 3; i++) {
      for (let p = 0; p <= c.start + i; p++) want[i * 4 + (p % 4)] += 1 / (c.start + i + 1);
    }
    expect(relError(got, want)).toBeLessThan(1e-6);
  });
}

describe('the decoding step SIMD kernels', () => {
  let memory: WebAssembly.Memory;
  let kernels: StepKernels;

  beforeAll(async () => {
    await useBackend('cpu');
    expect(await stepKernelsReady()).toBe(true);
    memory = stepKernelsMemory(1 << 20);
    const k = stepKernelsOn(memory);
    if (k == null) throw new Error(`no kernels: ${stepKernelsFailure()}`);
    kernels = k;
  });

  it('the committed module is a fresh build of wasm/step_kernels.ts, compiled asynchronously', () => {
    const root = path.join(__dirname, '..', '..');
    const out = execFileSync(process.execPath, ['scripts/build_wasm.mjs', '--check'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(out).toMatch(/src\/kernels\/step_kernels_binary\.ts matches/);
    expect(out).toMatch(/src\/kernels\/wasm_binary\.ts matches/);
    // and the relaxed SIMD int8 module (wasm/step_int8_relaxed.ts), checked in the same build
    expect(out).toMatch(/src\/kernels\/step_int8_relaxed_binary\.ts matches/);
    // above Chromium's 4 KB limit for synchronous compiles: the loader compiles it asynchronously
    expect(Buffer.from(STEP_KERNELS_WASM_BASE64, 'base64').length).toBeGreaterThan(4096);
  });

  it('loads once, kind simd, heap base 16-aligned; TFJS_ATTENTION_SIMD off: not ready, no kernels', async () => {
    // its int8 products on relaxed SIMD only when TFJS_ATTENTION_RELAXED_SIMD asks (off by default)
    expect(kernels.kind).toBe('simd');
    expect(kernels.memory).toBe(memory);
    expect(stepKernelsHeapBase() % 16).toBe(0);
    expect(stepKernelsFailure()).toBeNull();
    await withFlags({[SIMD]: false}, async () => {
      await expect(stepKernelsReady()).resolves.toBe(false);
      expect(stepKernelsOn(memory)).toBeNull();
      expect(stepKernelsFailure()).toMatch(/TFJS_ATTENTION_SIMD/);
    });
    await expect(stepKernelsReady()).resolves.toBe(true);
    // a shared memory cannot be imported (the module's memory is not shared): null, no throw
    const shared = new WebAssembly.Memory({initial: 1, maximum: 2, shared: true});
    expect(stepKernelsOn(shared)).toBeNull();
  });

  it('transposeInt8 and denseInt8KN of the JavaScript kernels: the same checks', () => {
    const own = stepKernelsMemory(1 << 20);
    const K = jsStepKernels(own);
    transposeInt8Checks(K, new Arena(own, stepKernelsHeapBase()));
    for (const rows of KN_ROWS) {
      denseInt8KNChecks(K, new Arena(own, stepKernelsHeapBase()), rows, KN_K, KN_N);
    }
    denseInt8KNChecks(K, new Arena(own, stepKernelsHeapBase()), 3, [1317], [100]);
  });

  describe('on a memory of its own', () => {
    kernelSuite(() => ({
      kernels,
      arena: () => new Arena(memory, stepKernelsHeapBase()),
    }));

    it('the kernels see their memory grown after they were instantiated on it', () => {
      const own = stepKernelsMemory(64);
      const k = stepKernelsOn(own)!;
      const arena = new Arena(own, stepKernelsHeapBase());
      const [k1, n] = [600, 300]; // 720 KB of weights: grows the one-page memory
      const xv = values(k1, 60);
      const wv = values(k1 * n, 61);
      const x = arena.f32(xv);
      const w = arena.f32(wv);
      const out = arena.out(n);
      expect(own.buffer.byteLength).toBeGreaterThan(65536);
      k.dense(1, k1, n, x, w, 0, 0, out);
      expect(relError(arena.readF32(out, n), productRef(xv, wv, 1, k1, n, false))).toBeLessThan(
        1e-5,
      );
    });
  });

  describe('on a memory of its own, weights of 2 MB and more', () => {
    // the one-row product takes eight rows of the weight per pass from 2^19 weights on
    // (wasm/products/dense.ts, gemvRow); n and k off 4 / 8, with a bias and an activation
    it('dense, one row, k 1029 x n 515 (2.1 MB), bias and gelu tanh = a float64 loop (1e-5 relative)', () => {
      const own = stepKernelsMemory(1 << 22);
      const k = stepKernelsOn(own)!;
      const arena = new Arena(own, stepKernelsHeapBase());
      const [k1, n] = [1029, 515];
      const xv = values(k1, 80);
      const wv = values(k1 * n, 81);
      const bv = values(n, 82);
      const out = arena.out(n);
      const want = productRef(xv, wv, 1, k1, n, false).map((v, j) =>
        actRef(Math.fround(v + bv[j]), StepActivation.GeluTanh),
      );
      k.dense(1, k1, n, arena.f32(xv), arena.f32(wv), arena.f32(bv), StepActivation.GeluTanh, out);
      expect(relError(arena.readF32(out, n), want)).toBeLessThan(1e-5);
    });
  });

  describe("on tfjs-wasm's heap", () => {
    interface WasmParts {
      dataIdMap: {get(id: tf.DataId): {memoryOffset: number}};
      wasm: {
        _malloc(n: number): number;
        _free(p: number): void;
        asm?: {memory?: WebAssembly.Memory};
        wasmExports?: {memory?: WebAssembly.Memory};
      };
    }
    let backend: WasmParts;
    let heap: WebAssembly.Memory;
    let onHeap: StepKernels;
    let allocated: number[] = [];

    beforeAll(async () => {
      await useBackend('wasm');
      backend = tf.backend() as unknown as WasmParts;
      const m = (backend.wasm.asm ?? backend.wasm.wasmExports)?.memory;
      if (!(m instanceof WebAssembly.Memory)) throw new Error('no wasm heap');
      heap = m;
      onHeap = stepKernelsOn(heap)!;
      expect(onHeap).not.toBeNull();
    });
    afterEach(() => {
      for (const p of allocated) backend.wasm._free(p);
      allocated = [];
    });
    afterAll(() => useBackend('cpu'));

    /** An arena in one malloc'd block of the heap (freed after the test). */
    const heapArena = (): Arena => {
      const bytes = 1 << 20;
      const block = backend.wasm._malloc(bytes) >>> 0;
      expect(block).toBeGreaterThan(0);
      allocated.push(block);
      return new Arena(heap, block, block + bytes);
    };

    kernelSuite(() => ({kernels: onHeap, arena: heapArena}));

    it('dense / denseT read weights where tfjs keeps their tensors; tf.matMul agrees; no tensor left', () => {
      const before = tf.memory().numTensors;
      const [rows, k, n] = [3, 77, 45];
      const w = tf.tensor2d(values(k * n, 70), [k, n]);
      const e = tf.tensor2d(values(n * k, 71), [n, k]);
      const x = tf.tensor2d(values(rows * k, 72), [rows, k]);
      const at = (t: tf.Tensor) => backend.dataIdMap.get(t.dataId).memoryOffset;
      const arena = heapArena();
      const out = arena.out(rows * n);
      onHeap.dense(rows, k, n, at(x), at(w), 0, 0, out);
      const viaTf = tf.matMul(x, w);
      expect(relError(arena.readF32(out, rows * n), viaTf.dataSync())).toBeLessThan(1e-5);
      onHeap.denseT(rows, k, n, at(x), at(e), out);
      const viaTfT = tf.matMul(x, e, false, true);
      expect(relError(arena.readF32(out, rows * n), viaTfT.dataSync())).toBeLessThan(1e-5);
      tf.dispose([w, e, x, viaTf, viaTfT]);
      expect(tf.memory().numTensors).toBe(before);
    });
  });
});

describe('the int8 products on relaxed SIMD (wasm/step_int8_relaxed.ts, TFJS_ATTENTION_RELAXED_SIMD)', () => {
  // Node 20 validates relaxed SIMD only behind a V8 flag, which takes effect for modules validated
  // after it is set: on for this block, off again after it where it was off
  let hadRelaxed = false;
  let memory: WebAssembly.Memory;
  let relaxed: StepKernels;
  let plain: StepKernels;
  let js: StepKernels;

  beforeAll(async () => {
    await useBackend('cpu');
    hadRelaxed = relaxedSimdSupported();
    v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
    expect(relaxedSimdSupported()).toBe(true);
    expect(await stepKernelsReady()).toBe(true);
    memory = stepKernelsMemory(1 << 22);
    expect(stepKernelsOn(memory)!.kind).toBe('simd'); // off by default
    relaxed = withFlags({[RELAXED_SIMD]: true}, () => stepKernelsOn(memory)!);
    plain = withFlags({[RELAXED_SIMD]: false}, () => stepKernelsOn(memory)!);
    js = jsStepKernels(memory);
    expect([relaxed.kind, plain.kind]).toEqual(['simd-relaxed', 'simd']);
  });
  afterAll(() => {
    if (!hadRelaxed) v8.setFlagsFromString('--no-experimental-wasm-relaxed-simd');
  });

  type Kernels = typeof import('../../src/kernels/step_kernels');

  /**
   * The kernels' kind on a memory from a fresh copy of src/kernels/step_kernels.ts (its own
   * loading state, on this file's tfjs-core) with `validate` in place of WebAssembly.validate for
   * the relaxed SIMD probe, and TFJS_ATTENTION_RELAXED_SIMD as given.
   */
  async function freshKind(probeValid: boolean, flag: boolean): Promise<string | undefined> {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the instance in use
    const core: unknown = require('@tensorflow/tfjs-core');
    let mod: Kernels | undefined;
    jest.isolateModules(() => {
      jest.doMock('@tensorflow/tfjs-core', () => core);
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a fresh copy
      mod = require('../../src/kernels/step_kernels');
    });
    jest.dontMock('@tensorflow/tfjs-core');
    const probe = relaxedSimdProbe();
    const isProbe = (b: BufferSource) =>
      ArrayBuffer.isView(b) &&
      b.byteLength === probe.length &&
      Buffer.from(b.buffer, b.byteOffset, b.byteLength).equals(probe);
    const validate = WebAssembly.validate.bind(WebAssembly);
    const spy = jest
      .spyOn(WebAssembly, 'validate')
      .mockImplementation((b) => (isProbe(b) ? probeValid : validate(b)));
    try {
      expect(await mod!.stepKernelsReady()).toBe(true);
    } finally {
      spy.mockRestore();
    }
    return withFlags({[RELAXED_SIMD]: flag}, () => mod!.stepKernelsOn(memory)?.kind);
  }

  it('the committed module (a fresh build: checked above) holds the relaxed dot; the probe validates with the flag', () => {
    // i16x8.relaxed_dot_i8x16_i7x16_s is 0xfd 0x92 0x02: in the relaxed module, not the plain
    const opcode = Buffer.from([0xfd, 0x92, 0x02]);
    expect(Buffer.from(STEP_INT8_RELAXED_WASM_BASE64, 'base64').includes(opcode)).toBe(true);
    expect(Buffer.from(STEP_KERNELS_WASM_BASE64, 'base64').includes(opcode)).toBe(false);
    expect(WebAssembly.validate(relaxedSimdProbe())).toBe(true);
  });

  it('chosen where the probe validates and the flag allows it; else the plain products, silently', async () => {
    expect(await freshKind(true, true)).toBe('simd-relaxed');
    expect(await freshKind(true, false)).toBe('simd');
    expect(await freshKind(false, true)).toBe('simd');
    // the probe refused by an engine throwing instead of answering: plain as well
    const spy = jest.spyOn(WebAssembly, 'validate').mockImplementation(() => {
      throw new TypeError('no validate');
    });
    try {
      expect(relaxedSimdSupported()).toBe(false);
    } finally {
      spy.mockRestore();
    }
  });

  /** int8 values with the extremes and zeros placed among random ones (every `a`-th, `b`-th, `c`-th). */
  function int8sWithExtremes(n: number, seed: number, [a, b, c]: number[]): Int8Array {
    const v = int8s(n, seed);
    for (let i = 0; i < n; i++) {
      if (i % a === 0) v[i] = -127;
      else if (i % b === 0) v[i] = 127;
      else if (i % c === 0) v[i] = 0;
    }
    return v;
  }

  /** The bits of float32 outputs (equal bit for bit, -0 and NaN included). */
  const bits = (v: Float32Array) => new Uint32Array(v.buffer, v.byteOffset, v.length);

  // one row (a decoding step's one stream) and several (four weight rows a pass, a tail of n % 4);
  // k below, at and off 16 and 32
  const SIZES: Array<[number, number, number]> = [
    [1, 1, 5],
    [1, 15, 9],
    [1, 16, 4],
    [1, 47, 33],
    [1, 768, 37],
    [2, 33, 7],
    [3, 17, 13],
    [4, 100, 8],
    [5, 771, 21],
    [17, 64, 11],
  ];

  for (const [rows, k, n] of SIZES) {
    it(`denseInt8 / denseTInt8: int32 sums and descaled outputs equal the plain and JavaScript kernels' bit for bit: rows ${rows}, k ${k}, n ${n}`, () => {
      const A = new Arena(memory, stepKernelsHeapBase());
      const qv = int8sWithExtremes(rows * k, 90 + k, [5, 7, 11]);
      // a row of -127 (every lane split with s = 1) and one of zeros, where there are rows for them
      if (rows >= 3) qv.fill(-127, k, 2 * k);
      if (rows >= 4) qv.fill(0, 2 * k, 3 * k);
      const wv = int8sWithExtremes(n * k, 91 + n, [3, 4, 9]); // [n, k], denseInt8's layout
      const q = A.i8(qv);
      const w = A.i8(wv);
      const ones = A.f32(new Float32Array(Math.max(rows, n)).fill(1));
      const qs = A.f32(Float32Array.from(values(rows, 92), (v) => 10 + 100 * Math.abs(v)));
      const ws = A.f32(Float32Array.from(values(n, 93), (v) => 50 + 70 * Math.abs(v)));
      const bias = A.f32(values(n, 94));
      const out = A.out(rows * n);
      const sums = new Float64Array(rows * n);
      for (let r = 0; r < rows; r++) {
        for (let j = 0; j < n; j++) {
          let s = 0;
          for (let p = 0; p < k; p++) s += qv[r * k + p] * wv[j * k + p];
          sums[r * n + j] = s;
        }
      }
      expect(Math.max(...sums.map(Math.abs))).toBeLessThan(2 ** 24); // exact in float32
      expect(sums.some((v) => v < 0)).toBe(true);
      const run = (K: StepKernels, f: (K: StepKernels) => void) => {
        f(K);
        return A.readF32(out, rows * n);
      };
      const cases: Array<[string, (K: StepKernels) => void]> = [
        ['denseInt8 sums', (K) => K.denseInt8(rows, k, n, q, ones, w, ones, 0, 0, out)],
        ['denseTInt8 sums', (K) => K.denseTInt8(rows, k, n, q, ones, w, ones, out)],
        [
          'denseInt8 descaled, bias',
          (K) => K.denseInt8(rows, k, n, q, qs, w, ws, bias, StepActivation.None, out),
        ],
        ['denseTInt8 descaled', (K) => K.denseTInt8(rows, k, n, q, qs, w, ws, out)],
      ];
      for (const [what, f] of cases) {
        const got = run(relaxed, f);
        if (what.endsWith('sums'))
          expect([what, Array.from(got)]).toEqual([what, Array.from(sums)]);
        expect([what, bits(got)]).toEqual([what, bits(run(plain, f))]);
        expect([what, bits(got)]).toEqual([what, bits(run(js, f))]);
      }
      // the same epilogue after the sums: with an activation, equal to the plain module's
      const gelu = (K: StepKernels) =>
        K.denseInt8(rows, k, n, q, qs, w, ws, bias, StepActivation.GeluTanh, out);
      expect(bits(run(relaxed, gelu))).toEqual(bits(run(plain, gelu)));
    });
  }

  it('sums beyond float32 integers (|sum| > 2^24) convert as the plain module converts them', () => {
    const A = new Arena(memory, stepKernelsHeapBase());
    const [rows, k, n] = [3, 1101, 21];
    const qv = new Int8Array(rows * k).fill(-127);
    for (let r = 0; r < rows; r++) qv[r * k] = 127 - r;
    const wv = new Int8Array(n * k); // [n, k]: 127 and 126 along k, a row's sign by j
    for (let j = 0; j < n; j++) {
      for (let p = 0; p < k; p++)
        wv[j * k + p] = (p % 2 === 0 ? 127 : 126) * (j % 3 === 0 ? -1 : 1);
    }
    const [q, w] = [A.i8(qv), A.i8(wv)];
    const ones = A.f32(new Float32Array(n).fill(1));
    const out = A.out(rows * n);
    for (const f of [
      (K: StepKernels) => K.denseInt8(rows, k, n, q, ones, w, ones, 0, 0, out),
      (K: StepKernels) => K.denseTInt8(rows, k, n, q, ones, w, ones, out),
    ]) {
      f(relaxed);
      const got = A.readF32(out, rows * n);
      f(plain);
      expect(bits(got)).toEqual(bits(A.readF32(out, rows * n)));
      expect(Math.max(...got.map(Math.abs))).toBeGreaterThan(2 ** 24);
    }
  });
});
