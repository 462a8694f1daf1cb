/**
 * The step memory (src/generate/step_memory.ts): a memory of its own grows by half its size or
 * more at a time; its int8 packing (`int8Weight`), on each backend's
 * memory (tfjs-wasm's heap: one SIMD pass over the values in place; a memory of its own on cpu /
 * tensorflow: the values copied in blocks of 2^18 into a scratch, each block packed by the
 * kernels). A Dense kernel `[k, n]` packs transposed (`[n, k]`, denseInt8's layout), a
 * head-major kernel `[heads, k, headDim]` head by head into the same layout, a table as it is.
 * The weights here exceed one block (several blocks of rows, and of a table), and the
 * references are plain loops over the tensors' values.
 */
import * as tf from '@tensorflow/tfjs';

import {chooseStepKernels} from '../../src/generate/step_kernels_choice';
import {stepMemory, type StepMemory} from '../../src/generate/step_memory';
import {stepKernelsReady} from '../../src/kernels/step_kernels';
import {describeBackends} from '../helpers/backends';

/** Whole numbers in [-127, 127], -127 and 127 included, not periodic in any small stride. */
const ints = (size: number, seed: number) =>
  Float32Array.from({length: size}, (_, i) => ((i * 7919 + seed * 104729) % 255) - 127);

describeBackends('step memory int8 packing', (backend) => {
  let memory: StepMemory;
  beforeAll(async () => {
    await stepKernelsReady();
  });
  beforeEach(() => {
    const m = stepMemory();
    if (m.memory == null) throw new Error(`no step memory on ${backend}: ${m.reason}`);
    memory = m.memory;
  });
  afterEach(() => memory.dispose());

  const kernels = () => chooseStepKernels(memory.memory);
  const bytes = (at: number, size: number) => new Int8Array(memory.memory.buffer, at, size);

  it('a Dense kernel [k, n] of several blocks packs transposed; a table as it is; each once per layout', () => {
    // [40, 9000]: 16 rows a block (16 x 9000 values) on a memory of its own, the last block 8 rows
    const [k, n] = [40, 9000];
    const values = ints(k * n, 1);
    const t = tf.tensor2d(values, [k, n]);
    const table = tf.tensor2d(ints(700 * 1000, 2), [700, 1000]); // 2.7 blocks of 2^18
    try {
      const K = kernels();
      const at = memory.int8Weight(t, K, k);
      const got = bytes(at, k * n);
      let wrong = 0;
      for (let p = 0; p < k; p++) {
        for (let j = 0; j < n; j++) if (got[j * k + p] !== values[p * n + j]) wrong++;
      }
      expect(wrong).toBe(0);
      const asIs = memory.int8Weight(table, K);
      const tv = table.dataSync();
      const tg = bytes(asIs, table.size);
      let tableWrong = 0;
      for (let i = 0; i < table.size; i++) if (tg[i] !== tv[i]) tableWrong++;
      expect(tableWrong).toBe(0);
      // once per run and layout: the same offset again; the other layout is another buffer
      expect(memory.int8Weight(t, K, k)).toBe(at);
      const plain = memory.int8Weight(t, K);
      expect(plain).not.toBe(at);
      expect(Array.from(bytes(plain, 20))).toEqual(Array.from(values.subarray(0, 20)));
      expect(memory.counts.packed).toBe(3);
    } finally {
      t.dispose();
      table.dispose();
    }
  });

  it('a refused value in a later block is named by its index in the tensor, either layout', () => {
    const [k, n] = [40, 9000];
    for (const [index, value] of [
      [35 * n + 17, 0.5], // the third block of rows, inside a 16 x 16 tile
      [20 * n + n - 3, -128], // the second block, in the ragged columns (9000 = 562 * 16 + 8)
      [300_000, NaN], // the second block of 2^18 values (the table layout), row 33 of the kernel
    ] as Array<[number, number]>) {
      const values = ints(k * n, 3);
      values[index] = value;
      const t = tf.tensor2d(values, [k, n]);
      try {
        for (const rows of [k, 0]) {
          expect(() => memory.int8Weight(t, kernels(), rows)).toThrow(
            new RegExp(
              `an int8 weight \\(tensor \\d+, shape \\[40,9000\\]\\) holds ${String(value).replace('.', '\\.')} ` +
                `at index ${index}; expected whole numbers in \\[-127, 127\\]`,
            ),
          );
        }
      } finally {
        t.dispose();
      }
    }
  });

  it('200 buffers of 1 MB: zeroed, apart; a memory of its own grows a few times, not 200', () => {
    const MB = 1 << 20;
    const at: number[] = [];
    for (let i = 0; i < 200; i++) {
      const b = memory.alloc(MB);
      const bytes = new Uint8Array(memory.memory.buffer, b, MB);
      const ends = [...bytes.subarray(0, 16), ...bytes.subarray(MB - 16)];
      expect([i, ...ends]).toEqual([i, ...new Array(32).fill(0)]);
      new Uint8Array(memory.memory.buffer, b, 16).fill(i + 1);
      new Uint8Array(memory.memory.buffer, b + MB - 16, 16).fill(i + 1);
      at.push(b);
    }
    // each buffer still holds what was written at its ends (none overlaps the next)
    const kept = at.map((b, i) => {
      const bytes = new Uint8Array(memory.memory.buffer);
      return bytes[b] === i + 1 && bytes[b + MB - 1] === i + 1;
    });
    expect(kept.every(Boolean)).toBe(true);
    if (memory.kind === 'own') {
      // from one page, by half or more: 1.5^20 pages > 200 MB (exact steps would grow 200 times)
      expect(memory.counts.grows).toBeGreaterThan(0);
      expect(memory.counts.grows).toBeLessThanOrEqual(25);
    } else expect(memory.counts.grows).toBe(0);
  });

  it('a head-major kernel [heads, k, headDim] packs head by head into [heads * headDim, k]; refused values named by their index', () => {
    // [3, 40, 3000]: each head 40 rows of 3000 (3 blocks of 16 rows on a memory of its own)
    const [heads, k, h] = [3, 40, 3000];
    const values = ints(heads * k * h, 5);
    const t = tf.tensor3d(values, [heads, k, h]);
    try {
      const K = kernels();
      const at = memory.int8Weight(t, K, k, heads);
      const got = bytes(at, t.size);
      // denseInt8's layout of [k, heads * headDim]: output n = head * h + j, row p
      let wrong = 0;
      for (let head = 0; head < heads; head++) {
        for (let p = 0; p < k; p++) {
          for (let j = 0; j < h; j++) {
            if (got[(head * h + j) * k + p] !== values[(head * k + p) * h + j]) wrong++;
          }
        }
      }
      expect(wrong).toBe(0);
      // once per layout: the same offset again; the plain transposed layout is another buffer
      expect(memory.int8Weight(t, K, k, heads)).toBe(at);
      expect(memory.int8Weight(t, K, k)).not.toBe(at);
    } finally {
      t.dispose();
    }
    const index = 2 * k * h + 33 * h + 7; // the last head, its third block of rows
    values[index] = 0.5;
    const bad = tf.tensor3d(values, [heads, k, h]);
    try {
      expect(() => memory.int8Weight(bad, kernels(), k, heads)).toThrow(
        new RegExp(`holds 0\\.5 at index ${index}; expected whole numbers in \\[-127, 127\\]`),
      );
      expect(() => memory.int8Weight(bad, kernels(), k, 7)).toThrow(
        /an int8 kernel of 360000 values \(tensor \d+\) cannot be 7 heads of rows of 40/,
      );
    } finally {
      bad.dispose();
    }
  });

  it('refuses rows that do not divide the kernel', () => {
    const t = tf.tensor2d(ints(6 * 10, 4), [6, 10]);
    try {
      expect(() => memory.int8Weight(t, kernels(), 7)).toThrow(
        /an int8 kernel of 60 values \(tensor \d+\) cannot be rows of 7/,
      );
    } finally {
      t.dispose();
    }
  });
});

/** Positions where the packed bytes differ from `[n, k]`, the transpose of `values` `[k, n]`. */
function transposeErrors(got: Int8Array, values: Float32Array, k: number, n: number): number {
  let wrong = 0;
  for (let p = 0; p < k; p++) {
    for (let j = 0; j < n; j++) if (got[j * k + p] !== values[p * n + j]) wrong++;
  }
  return wrong;
}

describeBackends('int8 packing', (backend) => {
  let memory: StepMemory;
  beforeAll(async () => {
    await stepKernelsReady();
  });
  beforeEach(() => {
    const m = stepMemory();
    if (m.memory == null) throw new Error(`no step memory on ${backend}: ${m.reason}`);
    memory = m.memory;
  });
  afterEach(() => {
    memory.dispose();
    tf.env().set('TFJS_ATTENTION_SIMD', true);
  });

  const bytes = (at: number, size: number) => new Int8Array(memory.memory.buffer, at, size);

  for (const simd of [true, false]) {
    it(`packs odd kernels transposed: n past one block of 2^18, k < 16, n = 1, k = 1, a small weight then a large then a small (simd ${simd})`, () => {
      tf.env().set('TFJS_ATTENTION_SIMD', simd);
      const K = chooseStepKernels(memory.memory);
      const shapes: Array<[number, number]> = [
        [3, 5], // a small weight first: the scratch is sized for it
        [37, 20001], // n > 2^18 / 16: 16 rows a block (320,016 values), more than the scratch
        [7, 40000], // k < 16, n large: one ragged block
        [24, 1], // n = 1
        [1, 24], // k = 1
        [17, 33], // both ragged past a tile
        [5, 3], // small again: the large scratch reused
      ];
      shapes.forEach(([k, n], s) => {
        const values = ints(k * n, s + 1);
        const t = tf.tensor2d(values, [k, n]);
        try {
          const at = memory.int8Weight(t, K, k);
          expect([k, n, transposeErrors(bytes(at, k * n), values, k, n)]).toEqual([k, n, 0]);
        } finally {
          t.dispose();
        }
      });
    });
  }

  it('names a refused value in the last block: a kernel with n past the scratch, a table past 2^18', () => {
    const K = chooseStepKernels(memory.memory);
    const cases: Array<[number, number, number, number]> = [
      // [k, n, rows (0: a table), index]: the last of three blocks of 16 rows of 20001
      [40, 20001, 40, 39 * 20001 + 20000],
      [40, 20001, 40, 33 * 20001 + 5], // its first row, inside a tile
      [3, 300_001, 0, 3 * 300_001 - 1], // a table of 900,003 values: its last value
    ];
    for (const [k, n, rows, index] of cases) {
      const values = ints(k * n, 9);
      values[index] = 127.5;
      const t = tf.tensor2d(values, [k, n]);
      try {
        expect(() => memory.int8Weight(t, K, rows)).toThrow(
          new RegExp(`holds 127\\.5 at index ${index}; expected whole numbers in \\[-127, 127\\]`),
        );
      } finally {
        t.dispose();
      }
    }
  });
});
