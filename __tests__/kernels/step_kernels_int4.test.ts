/**
 * Keras 3's int4 kernels of the decoding step (denseInt4KN, denseTInt4, gatherInt4), the
 * WebAssembly SIMD module's (wasm/int4/) and the plain-JavaScript twin's, against loops written
 * here from Keras' formulas (keras/src/layers/core/dense.py, embedding.py, keras-hub's
 * ReversibleEmbedding), the nibbles packed and unpacked by hand: float64 sums of Keras'
 * dequantized weights for the products (1e-5 of |want| + 1), Keras' float32 values exactly for the
 * lookup and the per-channel tied logits. Sizes off every step of the kernels: odd n and k, k past
 * the SIMD module's 32-row passes and not a multiple of the block size (a short last group), block
 * sizes 8 and 128 and an odd 7 (groups starting inside a byte), per channel (blockSize 0 and -1),
 * rows 1 and 3, with bias and an activation; and a worked example whose numbers fail if the nibble
 * order, the zero point or the per-channel division were wrong.
 */
import {StepActivation, type StepKernels} from '../../src/kernels/step_kernels_api';
import {
  stepKernelsFailure,
  stepKernelsHeapBase,
  stepKernelsMemory,
  stepKernelsOn,
  stepKernelsReady,
} from '../../src/kernels/step_kernels';
import {jsStepKernels} from '../../src/kernels/step_kernels_js';
import {useBackend} from '../helpers/backends';
import {values} from '../helpers/kernel_reference';

const f = Math.fround;

/** Arrays placed one after another (16-aligned) past the module's heap base. */
class Arena {
  private at = Math.max(16, stepKernelsHeapBase());
  constructor(readonly memory: WebAssembly.Memory) {}
  private take(bytes: number): number {
    const at = (this.at + 15) & ~15;
    this.at = at + Math.max(bytes, 4);
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
  /** `n` floats of NaN, and 4 more after them (checked by `read` to be untouched). */
  out(n: number): number {
    return this.f32(new Float32Array(n + 4).fill(NaN));
  }
  /** The n floats at `at`; the 4 after them must still be NaN (nothing written past the output). */
  read(at: number, n: number): Float32Array {
    const all = new Float32Array(this.memory.buffer, at, n + 4).slice();
    expect(Array.from(all.subarray(n)).every(Number.isNaN)).toBe(true);
    return all.subarray(0, n);
  }
  readI8(at: number, n: number): Int8Array {
    return new Int8Array(this.memory.buffer, at, n).slice();
  }
  readF32(at: number, n: number): Float32Array {
    return new Float32Array(this.memory.buffer, at, n).slice();
  }
}

/**
 * Int4 values `[outer, len]` packed along len as Keras' pack_int4: two a byte, value i in the low
 * nibble of byte i >> 1 when i is even and in its high nibble when odd, an odd len padded with 0.
 */
function pack(v: ArrayLike<number>, outer: number, len: number): Int8Array {
  const lb = Math.ceil(len / 2);
  const bytes = new Uint8Array(outer * lb);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < len; i++) {
      const nibble = v[o * len + i] & 0xf;
      bytes[o * lb + (i >> 1)] |= i % 2 === 0 ? nibble : nibble << 4;
    }
  }
  return new Int8Array(bytes.buffer);
}

/** Value i of row o of bytes packed as `pack` does, read back by hand (two's complement). */
function unpacked(bytes: Int8Array, len: number, o: number, i: number): number {
  const byte = bytes[o * Math.ceil(len / 2) + Math.floor(i / 2)] & 0xff;
  const nibble = i % 2 === 0 ? byte % 16 : Math.floor(byte / 16);
  return nibble >= 8 ? nibble - 16 : nibble;
}

/**
 * Random int4 values `[outer, len]` in [-8, 7], packed along len by `pack`, and the values the
 * references use: those bytes unpacked by hand (equal to the values drawn).
 */
function int4Bytes(outer: number, len: number, seed: number): {bytes: Int8Array; v: Int8Array} {
  const bytes = pack(int4s(outer * len, seed), outer, len);
  const v = Int8Array.from({length: outer * len}, (_, i) =>
    unpacked(bytes, len, Math.floor(i / len), i % len),
  );
  const drawn = int4s(outer * len, seed);
  expect(v.filter((x, i) => x !== drawn[i]).length).toBe(0);
  return {bytes, v};
}

/** Random int4 values in [-8, 7]. */
function int4s(n: number, seed: number): Int8Array {
  return Int8Array.from(values(n, seed), (v) => Math.min(7, Math.floor((v + 1) * 8) - 8));
}

function actRef(x: number, act: StepActivation): number {
  switch (act) {
    case StepActivation.Relu:
      return Math.max(x, 0);
    case StepActivation.Silu:
      return x / (1 + Math.exp(-x));
    default:
      return x;
  }
}

/** Largest |got - want| / (|want| + 1). */
function relError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  expect(got.length).toBe(want.length);
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const e = Math.abs(got[i] - want[i]) / (Math.abs(want[i]) + 1);
    worst = Number.isNaN(e) ? Infinity : Math.max(worst, e);
  }
  return worst;
}

/** Keras' abs_max_quantize per row in float32 (the tied logits' inputs). */
function quantizeRef(x: Float32Array, rows: number, k: number): {q: Int8Array; qs: Float32Array} {
  const q = new Int8Array(rows * k);
  const qs = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let m = 0;
    for (let j = 0; j < k; j++) m = Math.max(m, Math.abs(x[r * k + j]));
    const s = f(127 / f(m + f(1e-7)));
    qs[r] = s;
    for (let j = 0; j < k; j++) {
      const v = f(x[r * k + j] * s);
      const t = Math.floor(v);
      const round = v - t > 0.5 || (v - t === 0.5 && t % 2 !== 0) ? t + 1 : t;
      q[r * k + j] = Math.min(127, Math.max(-127, round));
    }
  }
  return {q, qs};
}

/** An int4 layer's quantized weights: values `[outer, len]`, scale and zero `[outer or groups, ...]`. */
interface Int4Case {
  rows: number;
  k: number;
  n: number;
  /** Keras' block_size: > 0 grouped, 0 or -1 per channel. */
  block: number;
}

const CASES: Int4Case[] = [
  {rows: 1, k: 300, n: 97, block: 128},
  {rows: 3, k: 300, n: 97, block: 128},
  {rows: 1, k: 37, n: 67, block: 8},
  {rows: 3, k: 37, n: 67, block: 8},
  {rows: 1, k: 75, n: 70, block: 7},
  {rows: 1, k: 200, n: 64, block: 0},
  {rows: 3, k: 41, n: 65, block: -1},
];
const name = (c: Int4Case) =>
  `rows ${c.rows}, k ${c.k}, n ${c.n}, ${c.block > 0 ? `block ${c.block}` : `per channel (${c.block})`}`;

/**
 * Keras' int4 Dense on x `[rows, k]`: `w = (q - zero[g]) * scale[g]` (float32) summed in float64,
 * or `f32(Σ x q) / scale` per channel; then bias, activation. q `[k, n]` as values.
 */
function denseRef(
  c: Int4Case,
  x: Float32Array,
  q: Int8Array,
  scale: Float32Array,
  zero: Int8Array,
  bias: Float32Array | null,
  act: StepActivation,
): Float64Array {
  const {rows, k, n, block} = c;
  const out = new Float64Array(rows * n);
  for (let r = 0; r < rows; r++) {
    for (let j = 0; j < n; j++) {
      let s = 0;
      for (let p = 0; p < k; p++) {
        const g = Math.floor(p / block);
        const w = block > 0 ? f((q[p * n + j] - zero[g * n + j]) * scale[g * n + j]) : q[p * n + j];
        s += x[r * k + p] * w;
      }
      if (block <= 0) s = f(s) / scale[j];
      out[r * n + j] = actRef(s + (bias ? bias[j] : 0), act);
    }
  }
  return out;
}

/** The weights of a case: kernel values `[k, n]`, scale / zero `[G, n]` (per channel: scale `[n]`). */
function denseWeights(c: Int4Case, seed: number) {
  const groups = c.block > 0 ? Math.ceil(c.k / c.block) : 1;
  const {bytes, v: q} = int4Bytes(c.k, c.n, seed); // along the output axis: [k, ceil(n / 2)]
  const zero = int4s(groups * c.n, seed + 1);
  // grouped scales as Keras' (range / 15, here 0.005 .. 0.025); per channel 7 / max|w| (5 .. 55)
  const scale = Float32Array.from(values(groups * c.n, seed + 2), (v) =>
    c.block > 0 ? f(0.015 + 0.01 * v) : f(30 + 25 * v),
  );
  return {bytes, q, zero, scale, groups};
}

function denseChecks(K: StepKernels, c: Int4Case): void {
  const arena = new Arena(K.memory);
  const {rows, k, n, block} = c;
  const {bytes, q, zero, scale} = denseWeights(c, 11);
  const xv = Float32Array.from(values(rows * k, 12), (v) => 2 * v);
  const bv = values(n, 13);
  const x = arena.f32(xv);
  const w = arena.i8(bytes);
  const s = arena.f32(scale);
  const z = block > 0 ? arena.i8(zero) : 0;
  const b = arena.f32(bv);
  for (const [bias, act] of [
    [0, StepActivation.None],
    [b, StepActivation.Silu],
  ] as const) {
    const out = arena.out(rows * n);
    K.denseInt4KN(rows, k, n, x, w, s, z, block, bias, act, out);
    const want = denseRef(c, xv, q, scale, zero, bias ? bv : null, act);
    expect(relError(arena.read(out, rows * n), want)).toBeLessThan(1e-5);
  }
}

/** Keras' int4 tied logits: grouped in float64 over Keras' dequantized table; per channel exactly. */
function tiedRef(
  c: Int4Case,
  q: Int8Array,
  qs: Float32Array,
  t: Int8Array,
  scale: Float32Array,
  zero: Int8Array,
): Float64Array {
  const {rows, k, n, block} = c;
  const groups = block > 0 ? Math.ceil(k / block) : 1;
  const out = new Float64Array(rows * n);
  for (let r = 0; r < rows; r++) {
    for (let v = 0; v < n; v++) {
      let s = 0;
      for (let d = 0; d < k; d++) {
        const g = v * groups + Math.floor(d / block);
        const w = block > 0 ? f((t[v * k + d] - zero[g]) * scale[g]) : t[v * k + d];
        s += q[r * k + d] * w;
      }
      out[r * n + v] = block > 0 ? s / qs[r] : f(f(s) / f(qs[r] * scale[v]));
    }
  }
  return out;
}

function tiedChecks(K: StepKernels, c: Int4Case): void {
  const arena = new Arena(K.memory);
  const {rows, k, n, block} = c;
  // the table [n, k]: its scale and zero [n, G] (per channel: scale [n])
  const groups = block > 0 ? Math.ceil(k / block) : 1;
  const {bytes, v: t} = int4Bytes(n, k, 21); // along k: [n, ceil(k / 2)]
  const zero = int4s(n * groups, 22);
  const scale = Float32Array.from(values(n * groups, 23), (v) =>
    block > 0 ? f(0.015 + 0.01 * v) : f(30 + 25 * v),
  );
  const xv = Float32Array.from(values(rows * k, 24), (v) => 3 * v);
  const x = arena.f32(xv);
  const q = arena.i8(new Int8Array(rows * k));
  const qs = arena.f32(new Float32Array(rows));
  K.quantizeRows(rows, k, x, q, qs);
  const ref = quantizeRef(xv, rows, k);
  expect(Array.from(arena.readI8(q, rows * k))).toEqual(Array.from(ref.q));
  expect(Array.from(arena.readF32(qs, rows))).toEqual(Array.from(ref.qs));
  const w = arena.i8(bytes);
  const s = arena.f32(scale);
  const z = block > 0 ? arena.i8(zero) : 0;
  const out = arena.out(rows * n);
  K.denseTInt4(rows, k, n, q, qs, w, s, z, block, out);
  const want = tiedRef(c, ref.q, ref.qs, t, scale, zero);
  const got = arena.read(out, rows * n);
  if (block > 0) expect(relError(got, want)).toBeLessThan(1e-5);
  else expect(Array.from(got)).toEqual(Array.from(want)); // Keras' float32 steps, exactly
}

function gatherChecks(K: StepKernels, c: Int4Case): void {
  const arena = new Arena(K.memory);
  // a table [vocab, dim] (dim = k: odd, past 32, short last group), ids repeating and at the ends
  const [vocab, dim, block] = [c.n, c.k, c.block];
  const groups = block > 0 ? Math.ceil(dim / block) : 1;
  const {bytes, v: t} = int4Bytes(vocab, dim, 31); // along dim: [vocab, ceil(dim / 2)]
  const zero = int4s(vocab * groups, 32);
  const scale = Float32Array.from(values(vocab * groups, 33), (v) =>
    block > 0 ? f(0.015 + 0.01 * v) : f(30 + 25 * v),
  );
  const idv = [vocab - 1, 0, 5, 5, 1].slice(0, c.rows + 2);
  const ids = arena.i32(idv);
  const w = arena.i8(bytes);
  const s = arena.f32(scale);
  const z = block > 0 ? arena.i8(zero) : 0;
  const out = arena.out(idv.length * dim);
  K.gatherInt4(idv.length, dim, ids, w, s, z, block, out);
  const want: number[] = [];
  for (const id of idv) {
    for (let d = 0; d < dim; d++) {
      const g = id * groups + (block > 0 ? Math.floor(d / block) : 0);
      const q = t[id * dim + d];
      want.push(block > 0 ? f((q - zero[g]) * scale[g]) : f(q / scale[g]));
    }
  }
  expect(Array.from(arena.read(out, idv.length * dim))).toEqual(want);
}

/**
 * A worked example, by hand: a kernel `[2, 3]` (k 2, n 3) of values [[3, -5, 7], [-8, 1, -1]],
 * packed along n into bytes [[0xb3, 0x07], [0x18, 0x0f]] (column 0 low, column 1 high, column 2
 * low with a 0 pad), x = [1, 2].
 */
function workedExample(K: StepKernels): void {
  const arena = new Arena(K.memory);
  const bytes = Int8Array.from([0xb3, 0x07, 0x18, 0x0f], (b) => (b << 24) >> 24);
  expect(Array.from(pack([3, -5, 7, -8, 1, -1], 2, 3))).toEqual(Array.from(bytes));
  const w = arena.i8(bytes);
  const x = arena.f32([1, 2]);
  // per channel, scale [2, 4, 8]: (3 - 16, -5 + 2, 7 - 2) / scale = (-13 / 2, -3 / 4, 5 / 8)
  let out = arena.out(3);
  K.denseInt4KN(1, 2, 3, x, w, arena.f32([2, 4, 8]), 0, 0, 0, StepActivation.None, out);
  expect(Array.from(arena.read(out, 3))).toEqual([-6.5, -0.75, 0.625]);
  // grouped, one group of 2 rows (block 2), zero [1, -2, 3], scale [0.5, 0.25, 2]:
  // column 0: 1 * (3 - 1) + 2 * (-8 - 1) = -16, times 0.5 = -8
  // column 1: 1 * (-5 + 2) + 2 * (1 + 2) = 3, times 0.25 = 0.75
  // column 2: 1 * (7 - 3) + 2 * (-1 - 3) = -4, times 2 = -8
  out = arena.out(3);
  const s = arena.f32([0.5, 0.25, 2]);
  K.denseInt4KN(1, 2, 3, x, w, s, arena.i8([1, -2, 3]), 2, 0, StepActivation.None, out);
  expect(Array.from(arena.read(out, 3))).toEqual([-8, 0.75, -8]);
  // the same bytes as an Embedding table [2, 3] (packed along dim, as the Dense along n)
  out = arena.out(6);
  K.gatherInt4(2, 3, arena.i32([1, 0]), w, arena.f32([4, 2]), 0, 0, out);
  expect(Array.from(arena.read(out, 6))).toEqual([-4, 0.5, -0.5, 0.75, -1.25, 1.75]);
  out = arena.out(3);
  K.gatherInt4(
    1,
    3,
    arena.i32([0]),
    w,
    arena.f32([0.5, 0.25, 2, 1]),
    arena.i8([1, -2, 3, 0]),
    2,
    out,
  );
  // row 0, groups of 2 values: zero / scale (1, 0.5) for values 0 and 1, (-2, 0.25) for value 2
  expect(Array.from(arena.read(out, 3))).toEqual([1, -3, 2.25]);
  // tied logits, per channel: q = [2, -1, 3] against the table's rows; qs = 1, scale [2, 4]
  const q = arena.i8([2, -1, 3]);
  const qs = arena.f32([1]);
  out = arena.out(2);
  K.denseTInt4(1, 3, 2, q, qs, w, arena.f32([2, 4]), 0, 0, out);
  // row 0: 2 * 3 + -1 * -5 + 3 * 7 = 32, / 2 = 16; row 1: -16 - 1 - 3 = -20, / 4 = -5
  expect(Array.from(arena.read(out, 2))).toEqual([16, -5]);
  // grouped (block 2: values 0 and 1, then 2), qs = 2, zero [[1, 0], [-1, 2]], scale
  // [[1, 0.5], [1, 0.25]]: row 0: (2 * (3 - 1) + -1 * (-5 - 1)) * 1 + 3 * 7 * 0.5 = 20.5, / 2;
  // row 1: (2 * (-8 + 1) + -1 * (1 + 1)) * 1 + 3 * (-1 - 2) * 0.25 = -18.25, / 2
  out = arena.out(2);
  const zt = arena.i8([1, 0, -1, 2]);
  K.denseTInt4(1, 3, 2, q, arena.f32([2]), w, arena.f32([1, 0.5, 1, 0.25]), zt, 2, out);
  expect(Array.from(arena.read(out, 2))).toEqual([10.25, -9.125]);
}

function suite(get: () => StepKernels): void {
  it('a worked example: the nibble order, the zero point, the per-channel division', () => {
    workedExample(get());
  });
  for (const c of CASES) {
    it(`denseInt4KN = Keras' dequantized product (1e-5), bias and silu: ${name(c)}`, () => {
      denseChecks(get(), c);
    });
    it(`denseTInt4 = Keras' tied logits (grouped 1e-5, per channel exactly): ${name(c)}`, () => {
      tiedChecks(get(), c);
    });
    it(`gatherInt4 = Keras' int4 Embedding, exactly: ${name(c)}`, () => {
      gatherChecks(get(), c);
    });
  }
}

describe('the int4 kernels of the decoding step', () => {
  describe('the SIMD module', () => {
    let kernels: StepKernels;
    beforeAll(async () => {
      await useBackend('cpu');
      expect(await stepKernelsReady()).toBe(true);
      const k = stepKernelsOn(stepKernelsMemory(1 << 20));
      if (k == null) throw new Error(`no kernels: ${stepKernelsFailure()}`);
      kernels = k;
    });
    suite(() => kernels);
  });

  describe('the JavaScript kernels', () => {
    const kernels = jsStepKernels(new WebAssembly.Memory({initial: 16}));
    suite(() => kernels);
  });
});
