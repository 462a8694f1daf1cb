/**
 * Keras 3.15's int4 products and lookups on weights held as Keras stores them
 * (src/ops/int4_products.ts), against plain float64 loops written here from Keras' formulas
 * (`dequantize_with_sz_map`, Dense / Embedding / ReversibleEmbedding `_int4_call`): int4 values,
 * zero points and scales drawn at random, packed by hand (the even index in the low nibble),
 * every layout Keras writes (Dense: packed along the output axis, grouped along the input;
 * Embedding: packed and grouped along the row; an untied reverse table packed and grouped along
 * its first axis), grouped (short last group) and per channel, one weight larger than a block.
 * Tolerance 1e-5 relative to the largest |output| (float32 sums against float64).
 */
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-backend-cpu';

import type {Int4Layout} from '../../src/ops/int4';
import {
  int4Lookup,
  int4MatMul,
  int4MatMulT,
  int4ToFloat,
  Int4Tensors,
} from '../../src/ops/int4_products';
import {int8Tensor} from '../../src/ops/int8';

beforeAll(async () => {
  await tf.setBackend('cpu');
});

/** A seeded generator (mulberry32). */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A drawn int4 weight `[rows, cols]` in `layout`: values, params, and its tensors. */
function drawn(layout: Int4Layout, seed: number) {
  const r = rng(seed);
  const {rows, cols, packAxis, groupAxis, blockSize} = layout;
  const q = new Int8Array(rows * cols).map(() => Math.floor(r() * 16) - 8);
  const grouped = blockSize > 0;
  const along = groupAxis === 0 ? rows : cols;
  const groups = grouped ? Math.ceil(along / blockSize) : 1;
  const scaleShape = grouped
    ? groupAxis === 0
      ? [groups, cols]
      : [rows, groups]
    : [groupAxis === 0 ? cols : rows];
  const scaleSize = scaleShape.reduce((p, d) => p * d, 1);
  const scale = new Float32Array(scaleSize).map(() => 0.01 + r());
  const zero = new Int8Array(scaleSize).map(() => Math.floor(r() * 16) - 8);
  // pack by hand: two values per byte along packAxis, even index low
  const packedShape = packAxis === 0 ? [Math.ceil(rows / 2), cols] : [rows, Math.ceil(cols / 2)];
  const bytes = new Uint8Array(packedShape[0] * packedShape[1]);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) {
      const v = q[i * cols + j] & 0xf;
      if (packAxis === 1) bytes[i * packedShape[1] + (j >> 1)] |= v << ((j & 1) * 4);
      else bytes[(i >> 1) * cols + j] |= v << ((i & 1) * 4);
    }
  }
  const gIdx = new Float32Array(along).map((_, i) => (grouped ? Math.floor(i / blockSize) : 0));
  const tensors: Int4Tensors = {
    packed: int8Tensor(bytes, packedShape),
    scale: tf.tensor(scale, scaleShape),
    zero: grouped ? int8Tensor(zero, scaleShape) : null,
    gIdx: grouped ? tf.tensor(gIdx) : null,
  };
  // Keras' dequantized value (grouped) or the int4 value (per channel)
  const value = (i: number, j: number): number => {
    const v = q[i * cols + j];
    if (!grouped) return v;
    const at = groupAxis === 0 ? gIdx[i] * cols + j : i * groups + gIdx[j];
    return Math.fround((v - zero[at]) * scale[at]);
  };
  const channelScale = (i: number, j: number) => scale[groupAxis === 0 ? j : i];
  return {q, scale, zero, tensors, value, channelScale};
}

function randomInputs(m: number, k: number, seed: number): tf.Tensor2D {
  const r = rng(seed);
  return tf.tensor2d(
    new Float32Array(m * k).map(() => r() * 2 - 1),
    [m, k],
  );
}

function expectClose(got: tf.Tensor, want: Float64Array, tol = 1e-5): void {
  const g = got.dataSync();
  expect(g.length).toBe(want.length);
  const big = want.reduce((p, v) => Math.max(p, Math.abs(v)), 1e-30);
  let worst = 0;
  for (let i = 0; i < g.length; i++) worst = Math.max(worst, Math.abs(g[i] - want[i]));
  expect(worst / big).toBeLessThan(tol);
}

const dispose = (t: Int4Tensors) =>
  tf.dispose([t.packed, t.scale, t.zero, t.gIdx].filter((x) => x != null) as tf.Tensor[]);

describe('int4MatMul: x [M, rows] · W [rows, cols]', () => {
  const cases: Array<[string, Int4Layout]> = [
    [
      'Dense, grouped, short last group, odd cols',
      {rows: 21, cols: 7, packAxis: 1, groupAxis: 0, blockSize: 8},
    ],
    [
      'Dense, one short group (block 128)',
      {rows: 32, cols: 10, packAxis: 1, groupAxis: 0, blockSize: 128},
    ],
    ['Dense, per channel', {rows: 19, cols: 9, packAxis: 1, groupAxis: 0, blockSize: -1}],
    [
      'reverse table, packed along rows, grouped',
      {rows: 13, cols: 6, packAxis: 0, groupAxis: 0, blockSize: 4},
    ],
    ['reverse table, per channel', {rows: 13, cols: 6, packAxis: 0, groupAxis: 0, blockSize: -1}],
    [
      'larger than a block (1M values)',
      {rows: 300, cols: 4001, packAxis: 1, groupAxis: 0, blockSize: 128},
    ],
  ];
  for (const [name, layout] of cases) {
    test(name, () => {
      const w = drawn(layout, layout.rows * 7 + layout.cols);
      const M = 3;
      const x = randomInputs(M, layout.rows, 5);
      const xs = x.dataSync();
      const want = new Float64Array(M * layout.cols);
      for (let m = 0; m < M; m++) {
        for (let j = 0; j < layout.cols; j++) {
          let s = 0;
          for (let i = 0; i < layout.rows; i++) s += xs[m * layout.rows + i] * w.value(i, j);
          // per channel: the product of the int4 values, divided by the scale after it
          want[m * layout.cols + j] = layout.blockSize > 0 ? s : s / w.channelScale(0, j);
        }
      }
      const before = tf.memory().numTensors;
      const y = int4MatMul(x, w.tensors, layout);
      expect(tf.memory().numTensors).toBe(before + 1);
      expect(y.shape).toEqual([M, layout.cols]);
      expectClose(y, want);
      tf.dispose([x, y]);
      dispose(w.tensors);
    });
  }

  test("per channel dequantizeFirst: x · (q / scale) (EinsumDense's order)", () => {
    const layout: Int4Layout = {rows: 11, cols: 5, packAxis: 1, groupAxis: 0, blockSize: -1};
    const w = drawn(layout, 3);
    const x = randomInputs(2, 11, 9);
    const xs = x.dataSync();
    const want = new Float64Array(2 * 5);
    for (let m = 0; m < 2; m++) {
      for (let j = 0; j < 5; j++) {
        let s = 0;
        for (let i = 0; i < 11; i++) s += xs[m * 11 + i] * Math.fround(w.q[i * 5 + j] / w.scale[j]);
        want[m * 5 + j] = s;
      }
    }
    const y = int4MatMul(x, w.tensors, layout, true);
    expectClose(y, want);
    const whole = int4ToFloat(w.tensors, layout);
    expect(Array.from(whole.dataSync().slice(0, 5))).toEqual(
      Array.from({length: 5}, (_, j) => Math.fround(w.q[j] / w.scale[j])),
    );
    tf.dispose([x, y, whole]);
    dispose(w.tensors);
  });

  test('a g_idx naming a group that is not there is an error', () => {
    const layout: Int4Layout = {rows: 8, cols: 4, packAxis: 1, groupAxis: 0, blockSize: 4};
    const w = drawn(layout, 1);
    const bad = {...w.tensors, gIdx: tf.tensor([0, 0, 0, 0, 1, 1, 1, 2])};
    const x = randomInputs(1, 8, 2);
    expect(() => int4MatMul(x, bad, layout)).toThrow(
      'int4MatMul: expected g_idx values in [0, 2) (the groups), received 2 at index 7',
    );
    expect(() => int4MatMul(randomInputs(1, 7, 2), w.tensors, layout)).toThrow(
      'expected inputs [M, 8] for a weight [8, 4], received [1,7]',
    );
    tf.dispose([x, bad.gIdx]);
    dispose(w.tensors);
  });
});

describe('int4MatMulT: the logits of a tied table, x [M, D] · tableᵀ', () => {
  for (const blockSize of [4, -1]) {
    test(blockSize > 0 ? 'grouped along the row' : 'per channel (per row)', () => {
      const layout: Int4Layout = {rows: 9, cols: 11, packAxis: 1, groupAxis: 1, blockSize};
      const w = drawn(layout, 17);
      const x = randomInputs(2, 11, 4);
      const xs = x.dataSync();
      const want = new Float64Array(2 * 9);
      for (let m = 0; m < 2; m++) {
        for (let v = 0; v < 9; v++) {
          let s = 0;
          for (let d = 0; d < 11; d++) s += xs[m * 11 + d] * w.value(v, d);
          want[m * 9 + v] = blockSize > 0 ? s : s / w.scale[v];
        }
      }
      const y = int4MatMulT(x, w.tensors, layout);
      expectClose(y, want);
      tf.dispose([x, y]);
      dispose(w.tensors);
    });
  }
});

describe('int4Lookup: rows of a table at ids', () => {
  for (const blockSize of [4, -1]) {
    test(blockSize > 0 ? 'grouped: (q - zero) * scale' : 'per channel: q / scale', () => {
      const layout: Int4Layout = {rows: 6, cols: 9, packAxis: 1, groupAxis: 1, blockSize};
      const w = drawn(layout, 23);
      const ids = tf.tensor2d(
        [
          [5, 0],
          [2, 2],
        ],
        [2, 2],
        'int32',
      );
      const want: number[] = [];
      for (const id of [5, 0, 2, 2]) {
        for (let d = 0; d < 9; d++) {
          want.push(blockSize > 0 ? w.value(id, d) : Math.fround(w.q[id * 9 + d] / w.scale[id]));
        }
      }
      const y = int4Lookup(w.tensors, layout, ids);
      expect(y.shape).toEqual([2, 2, 9]);
      expect(Array.from(y.dataSync())).toEqual(want);
      expect(() => int4Lookup(w.tensors, layout, tf.tensor1d([6], 'int32'))).toThrow(
        'int4 lookup: expected ids in [0, 6), received 6',
      );
      tf.dispose([ids, y]);
      dispose(w.tensors);
    });
  }
});
