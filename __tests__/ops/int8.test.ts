/**
 * Keras 3's int8 arithmetic (src/ops/int8.ts) against plain loops: abs-max quantization in
 * float32 emulated with Math.fround (round half to even, clip ±127, epsilon 1e-7 as float32),
 * and the int8 product against a BigInt loop, exactly (tolerance 0), including K = 3072 with
 * every value +127, where one float32 product would round (its partial sums pass 2^24).
 */
import * as tf from '@tensorflow/tfjs';

import {
  absMaxQuantize,
  absMaxQuantizeValues,
  INT8_BLOCK_VALUES,
  int8Dense,
  INT8_EXACT_CHUNK,
  int8FromWholeNumbers,
  int8MatMul,
  int8Rows,
  int8Tensor,
  int8ValuesOf,
} from '../../src/ops/int8';
import {describeBackends, expectNoLeak} from '../helpers/backends';
import {lcg} from '../helpers/data';

const f = Math.fround;

function roundHalfEven(v: number): number {
  const b = Math.floor(v);
  const d = v - b;
  if (d < 0.5) return b;
  if (d > 0.5) return b + 1;
  return b % 2 === 0 ? b : b + 1;
}

/** abs-max per row of x [M, K] in emulated float32: values and scales. */
function quantizeRows(x: Float32Array, M: number, K: number): {q: number[]; s: number[]} {
  const q: number[] = [];
  const s: number[] = [];
  for (let i = 0; i < M; i++) {
    let amax = 0;
    for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(x[i * K + k]));
    const scale = f(127 / f(amax + f(1e-7)));
    s.push(scale);
    for (let k = 0; k < K; k++) {
      q.push(Math.min(127, Math.max(-127, roundHalfEven(f(x[i * K + k] * scale)))));
    }
  }
  return {q, s};
}

/** The integer product a [M, K] · b [K, N] in BigInt. */
function bigProduct(a: ArrayLike<number>, b: ArrayLike<number>, M: number, K: number, N: number) {
  const out: number[] = [];
  for (let i = 0; i < M; i++) {
    for (let j = 0; j < N; j++) {
      let s = BigInt(0);
      for (let k = 0; k < K; k++) s += BigInt(a[i * K + k]) * BigInt(b[k * N + j]);
      out.push(Number(s));
    }
  }
  return out;
}

/** The same product in doubles (exact while |sums| < 2^53: int8 products over K < 2^38). */
function exactProduct(a: ArrayLike<number>, b: ArrayLike<number>, M: number, K: number, N: number) {
  const out = new Array<number>(M * N).fill(0);
  for (let i = 0; i < M; i++) {
    for (let k = 0; k < K; k++) {
      const v = a[i * K + k];
      for (let j = 0; j < N; j++) out[i * N + j] += v * b[k * N + j];
    }
  }
  return out;
}

function ints(n: number, seed: number): Float32Array {
  return lcg(n, seed, 127).map((v) => Math.round(v));
}

describeBackends('int8 ops', () => {
  it('absMaxQuantize: Keras abs_max_quantize per row (round half to even, clip, epsilon)', () => {
    const M = 5;
    const K = 33;
    const x = lcg(M * K, 3, 3);
    // ties: 0.5 · 127 / amax lands on k + 0.5 for chosen values of a row with abs-max 127
    const tieRow = [127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5];
    tieRow.forEach((v, k) => (x[K + k] = v));
    x.fill(0, 2 * K, 3 * K); // a zero row: scale 127 / 1e-7
    const {q, s} = quantizeRows(x, M, K);
    const t = tf.tensor2d(x, [M, K]);
    const {values, scale} = absMaxQuantize(t, -1);
    expect(scale.shape).toEqual([M, 1]);
    const z = (v: number) => v + 0; // -0 and 0 are the same int8
    expect(Array.from(values.dataSync(), z)).toEqual(q.map(z));
    expect(Array.from(scale.dataSync())).toEqual(s);
    // the tie row really has ties (127 / (127 + 1e-7) rounds to 1 in float32)
    expect(Array.from(values.dataSync(), z).slice(K, K + 8)).toEqual([
      127, 0, 2, 2, 0, -2, -2, 126,
    ]);
    tf.dispose([t, values, scale]);
  });

  it('absMaxQuantizeValues: the same per row in JavaScript (ties, a zero row), and over other axes as absMaxQuantize', () => {
    const M = 5;
    const K = 33;
    const x = lcg(M * K, 3, 3);
    [127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 126.5].forEach((v, k) => (x[K + k] = v));
    x.fill(0, 2 * K, 3 * K);
    const {q, s} = quantizeRows(x, M, K);
    const z = (v: number) => v + 0;
    const rows = absMaxQuantizeValues(x, [M, K], [1]);
    expect(rows.scaleShape).toEqual([M, 1]);
    expect(Array.from(rows.values, z)).toEqual(q.map(z));
    expect(Array.from(rows.scale)).toEqual(s);
    // a kernel [4, 3, 5] reduced over its first axis (Dense / EinsumDense per output channel)
    // and over its first two, against the tf ops version
    const w = lcg(4 * 3 * 5, 9, 2);
    const t = tf.tensor3d(w, [4, 3, 5]);
    for (const axes of [[0], [0, 1], [2]]) {
      const js = absMaxQuantizeValues(w, [4, 3, 5], axes);
      const ops = absMaxQuantize(t, axes);
      expect([axes, js.scaleShape]).toEqual([axes, ops.scale.shape]);
      expect([axes, Array.from(js.values, z)]).toEqual([
        axes,
        Array.from(ops.values.dataSync(), z),
      ]);
      expect([axes, Array.from(js.scale)]).toEqual([axes, Array.from(ops.scale.dataSync())]);
      tf.dispose([ops.values, ops.scale]);
    }
    t.dispose();
    expect(() => absMaxQuantizeValues(new Float32Array(3), [2, 2], [0])).toThrow(
      /expected 4 values for shape \[2,2\], received 3/,
    );
  });

  it('int8MatMul: exact against a BigInt loop, both layouts, K across chunk boundaries', () => {
    for (const K of [7, INT8_EXACT_CHUNK, INT8_EXACT_CHUNK + 1, 2500]) {
      const M = 3;
      const N = 4;
      const a = ints(M * K, K);
      const b = ints(K * N, K + 1);
      const want = bigProduct(a, b, M, K, N);
      const bt = new Float32Array(N * K);
      for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) bt[j * K + k] = b[k * N + j];
      const at = tf.tensor2d(a, [M, K]);
      const y = int8MatMul(at, tf.tensor2d(b, [K, N]));
      const yt = int8MatMul(at, tf.tensor2d(bt, [N, K]), true);
      expect(y.dtype).toBe('int32');
      expect(Array.from(y.dataSync())).toEqual(want);
      expect(Array.from(yt.dataSync())).toEqual(want);
      tf.dispose([at, y, yt]);
    }
  });

  it('int8MatMul: K = 3072, every value +127 (one float32 product would round)', () => {
    const M = 2;
    const K = 3072;
    const N = 3;
    const a = new Float32Array(M * K).fill(127);
    const b = new Float32Array(K * N).fill(127);
    b[5] = -127;
    b[K * N - 1] = 126;
    const want = bigProduct(a, b, M, K, N);
    expect(Math.max(...want)).toBeGreaterThan(2 ** 24); // beyond float32's whole numbers
    const at = tf.tensor2d(a, [M, K]);
    const bt = tf.tensor2d(b, [K, N]);
    const y = int8MatMul(at, bt);
    expect(Array.from(y.dataSync())).toEqual(want);
    tf.dispose([at, bt, y]);
  });

  it('int8Dense: quantized rows, int8 product, divided by (input scale · kernel scale)', async () => {
    const M = 4;
    const K = 1500;
    const N = 6;
    const x = lcg(M * K, 11);
    const kernel = ints(K * N, 5);
    const kScale = lcg(N, 12, 40).map((v) => 60 + v);
    const {q, s} = quantizeRows(x, M, K);
    const p = bigProduct(q, kernel, M, K, N);
    const want = p.map((v, i) => f(f(v) / f(kScale[i % N] * s[Math.floor(i / N)])));
    const xt = tf.tensor2d(x, [M, K]);
    const kt = tf.tensor2d(kernel, [K, N]);
    const st = tf.tensor1d(kScale);
    await expectNoLeak(() => int8Dense(xt, kt, st).dispose());
    const y = int8Dense(xt, kt, st);
    expect(Array.from(y.dataSync())).toEqual(want);
    tf.dispose([xt, kt, st, y]);
  });

  it("int8Tensor / int8ValuesOf: one byte per value, every int8 value kept (two's complement)", () => {
    const values = new Int8Array(256);
    for (let i = 0; i < 256; i++) values[i] = i - 128;
    const t = int8Tensor(values, [16, 16]);
    expect(t.dtype).toBe('bool');
    expect(t.shape).toEqual([16, 16]);
    expect(Array.from(int8ValuesOf(t))).toEqual(Array.from(values));
    // through a variable (how the int8 layers hold them)
    const v = tf.variable(tf.zeros([16, 16], 'bool'), false);
    v.assign(t);
    expect(Array.from(int8ValuesOf(v))).toEqual(Array.from(values));
    const whole = tf.tensor2d([
      [-127, 0],
      [5, 127],
    ]);
    const made = int8FromWholeNumbers(whole);
    expect(Array.from(int8ValuesOf(made))).toEqual([-127, 0, 5, 127]);
    tf.dispose([t, v, whole, made]);
  });

  it('int8MatMul on bytes: exact against a loop, both layouts, across blocks of rows', async () => {
    // N (or K, transposed) of 1024: blocks of 1024 rows; 2500 rows: three blocks
    const M = 2;
    for (const [K, N] of [
      [2500, 1024],
      [1024, 2500],
      [33, 5],
    ]) {
      const a = ints(M * K, K);
      const b = ints(K * N, K + 1);
      const want = exactProduct(a, b, M, K, N);
      const bt = new Int8Array(N * K);
      for (let k = 0; k < K; k++) for (let j = 0; j < N; j++) bt[j * K + k] = b[k * N + j];
      const at = tf.tensor2d(a, [M, K]);
      const kn = int8Tensor(Int8Array.from(b), [K, N]) as tf.Tensor2D;
      const nk = int8Tensor(bt, [N, K]) as tf.Tensor2D;
      const y = int8MatMul(at, kn);
      const yt = int8MatMul(at, nk, true);
      expect(Array.from(y.dataSync())).toEqual(want);
      expect(Array.from(yt.dataSync())).toEqual(want);
      await expectNoLeak(() => {
        int8MatMul(at, kn).dispose();
        int8MatMul(at, nk, true).dispose();
      });
      tf.dispose([at, kn, nk, y, yt]);
    }
  });

  it('int8MatMul on bytes never holds the weight whole as float32 (a block of rows at a time)', async () => {
    const M = 1;
    const K = 4096;
    const N = 1024; // 4M values: four blocks of INT8_BLOCK_VALUES
    expect(K * N).toBe(4 * INT8_BLOCK_VALUES);
    const at = tf.tensor2d(ints(M * K, 2), [M, K]);
    const kn = int8Tensor(new Int8Array(K * N).fill(3), [K, N]) as tf.Tensor2D;
    const before = tf.memory().numBytes;
    const info = await tf.profile(() => int8MatMul(at, kn).dispose());
    // the float32 blocks: a quarter of the weight's float32 bytes (plus the small rest)
    expect(info.peakBytes - before).toBeGreaterThan(K * N);
    expect(info.peakBytes - before).toBeLessThan(K * N * 4 * 0.3);
    tf.dispose([at, kn]);
  });

  it('int8Rows: the rows at the ids as float32; ids outside the table refused', async () => {
    const table = int8Tensor(Int8Array.from([1, -2, 3, -128, 127, 0]), [3, 2]);
    const ids = tf.tensor2d(
      [
        [2, 0],
        [1, 1],
      ],
      [2, 2],
      'int32',
    );
    const rows = int8Rows(table, ids);
    expect(rows.shape).toEqual([2, 2, 2]);
    expect(Array.from(rows.dataSync())).toEqual([127, 0, 1, -2, 3, -128, 3, -128]);
    await expectNoLeak(() => int8Rows(table, ids).dispose());
    const bad = tf.tensor1d([3], 'int32');
    expect(() => int8Rows(table, bad)).toThrow(/expected ids in \[0, 3\), received 3/);
    tf.dispose([table, ids, rows, bad]);
  });

  it('errors name what was expected and received', () => {
    expect(() => int8Tensor(new Int8Array(3), [2, 2])).toThrow(
      /expected 4 values for shape \[2,2\], received 3/,
    );
    expect(() => int8ValuesOf(tf.zeros([2]))).toThrow(/dtype 'bool'\), received float32/);
    expect(() => int8FromWholeNumbers(tf.tensor1d([1, 2.5]))).toThrow(
      /whole numbers in \[-128, 127\], received 2.5 at flat index 1/,
    );
    expect(() => int8FromWholeNumbers(tf.tensor1d([300]))).toThrow(/received 300 at flat index 0/);
    const a = tf.zeros([2, 3]) as tf.Tensor2D;
    expect(() => int8MatMul(a, tf.zeros([4, 2]) as tf.Tensor2D)).toThrow(
      /expected equal inner sizes, received 3 and 4/,
    );
    expect(() => absMaxQuantize(tf.zeros([2], 'int32'), -1)).toThrow(/float32.*received int32/);
    tf.dispose(a);
  });
});
