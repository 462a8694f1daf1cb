/**
 * The step memory (src/generate/step_memory.ts): a memory of its own grows by half its size or
 * more at a time; its int8 weights (`int8Weight`: bytes, ops/int8.ts) on each backend's memory:
 * as they are held, in place on tfjs-wasm's heap (the tensor's own bytes) and copied in once on a
 * memory of its own (cpu / tensorflow); packed transposed where asked (`transposeRows`: a
 * head-major kernel `[heads, k, headDim]` head by head into `[heads * headDim, k]`, denseInt8's
 * layout), by the kernels' `transposeInt8`, from the bytes in place (wasm) or copied in blocks of
 * rows through a scratch of 1 MB (a memory of its own). The weights here exceed one block, and
 * the references are plain loops over the tensors' values.
 */
import * as tf from '@tensorflow/tfjs';

import {chooseStepKernels} from '../../src/generate/step_kernels_choice';
import {stepMemory, type StepMemory} from '../../src/generate/step_memory';
import {stepKernelsReady} from '../../src/kernels/step_kernels';
import {int8Tensor} from '../../src/ops/int8';
import {describeBackends} from '../helpers/backends';

/** int8 values, -128 and 127 included, not periodic in any small stride. */
const ints = (size: number, seed: number) =>
  Int8Array.from({length: size}, (_, i) => ((i * 7919 + seed * 104729) % 256) - 128);

/** Positions where the packed bytes differ from `[n, k]`, the transpose of `values` `[k, n]`. */
function transposeErrors(got: Int8Array, values: Int8Array, k: number, n: number): number {
  let wrong = 0;
  for (let p = 0; p < k; p++) {
    for (let j = 0; j < n; j++) if (got[j * k + p] !== values[p * n + j]) wrong++;
  }
  return wrong;
}

/** tfjs-wasm's heap offset of a tensor's bytes. */
function heapOffset(t: tf.Tensor): number {
  const heap = tf.backend() as unknown as {
    dataIdMap: {get(id: tf.DataId): {memoryOffset: number}};
  };
  return heap.dataIdMap.get(t.dataId).memoryOffset;
}

describeBackends('step memory int8 weights', (backend) => {
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

  const kernels = () => chooseStepKernels(memory.memory);
  const bytes = (at: number, size: number) => new Int8Array(memory.memory.buffer, at, size);

  it('as held: in place on wasm (no copy), copied in once elsewhere; again after assign', () => {
    const values = ints(700 * 1000, 2);
    const table = int8Tensor(values, [700, 1000]);
    try {
      const K = kernels();
      const at = memory.int8Weight(table, K);
      expect(Array.from(bytes(at, table.size)).every((v, i) => v === values[i])).toBe(true);
      if (backend === 'wasm') {
        expect(at).toBe(heapOffset(table));
        expect(memory.counts.uploads).toBe(0);
      } else expect(memory.counts.uploads).toBe(1);
      expect(memory.counts.packed).toBe(0);
      // the same place again; new data (assign) read again
      expect(memory.int8Weight(table, K)).toBe(at);
      const v = tf.variable(table, false);
      const other = ints(700 * 1000, 3);
      const next = int8Tensor(other, [700, 1000]);
      const first = memory.int8Weight(v, K);
      v.assign(next);
      const second = memory.int8Weight(v, K);
      expect(bytes(second, 8)).toEqual(other.subarray(0, 8));
      if (backend === 'wasm') expect(second).toBe(heapOffset(next));
      else expect(second).toBe(first); // copied again into its buffer
      tf.dispose([v, next]);
    } finally {
      table.dispose();
    }
  });

  for (const simd of [true, false]) {
    it(`a kernel [k, n] packs transposed: several blocks of rows, k < 16, n = 1, k = 1, small after large (simd ${simd})`, () => {
      tf.env().set('TFJS_ATTENTION_SIMD', simd);
      const K = kernels();
      const shapes: Array<[number, number]> = [
        [3, 5], // a small weight first: the scratch is sized for it
        [100, 20001], // blocks of 48 rows of 20001 on a memory of its own: 48 + 48 + 4
        [40, 40000], // blocks of 16 rows: 16 + 16 + 8
        [7, 40000], // k < 16, n large: one ragged block
        [24, 1], // n = 1
        [1, 24], // k = 1
        [17, 33], // both ragged past a tile
        [5, 3], // small again: the large scratch reused
      ];
      shapes.forEach(([k, n], s) => {
        const values = ints(k * n, s + 1);
        const t = int8Tensor(values, [k, n]);
        try {
          const at = memory.int8Weight(t, K, k);
          expect([k, n, transposeErrors(bytes(at, k * n), values, k, n)]).toEqual([k, n, 0]);
          expect(memory.int8Weight(t, K, k)).toBe(at); // once per layout
        } finally {
          t.dispose();
        }
      });
      expect(memory.counts.packed).toBe(shapes.length);
    });
  }

  it('a head-major kernel [heads, k, headDim] packs head by head into [heads * headDim, k]', () => {
    // [2, 40, 40000]: each head 40 rows of 40000 (3 blocks of 16 rows on a memory of its own)
    const [heads, k, h] = [2, 40, 40000];
    const values = ints(heads * k * h, 5);
    const t = int8Tensor(values, [heads, k, h]);
    try {
      const K = kernels();
      const at = memory.int8Weight(t, K, k, heads);
      const got = bytes(at, t.size);
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
      expect(() => memory.int8Weight(t, K, k, 7)).toThrow(
        /an int8 kernel of 3200000 values \(tensor \d+\) cannot be 7 heads of rows of 40/,
      );
    } finally {
      t.dispose();
    }
  });

  it('refuses a weight not held as bytes, and rows that do not divide the kernel', () => {
    const float = tf.tensor2d(Float32Array.from(ints(60, 4)), [6, 10]);
    const t = int8Tensor(ints(60, 4), [6, 10]);
    try {
      expect(() => memory.int8Weight(float, kernels())).toThrow(
        /an int8 weight \(tensor \d+\) of dtype float32; expected int8 values held as bytes/,
      );
      expect(() => memory.int8Weight(t, kernels(), 7)).toThrow(
        /an int8 kernel of 60 values \(tensor \d+\) cannot be rows of 7/,
      );
    } finally {
      tf.dispose([float, t]);
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
});
