/**
 * The package's SIMD kernels on tfjs' wasm backend run in the backend's own heap: operands read
 * where tfjs keeps them, results written into the outputs it allocates, nothing copied through
 * JavaScript. Values and gradients against plain loops (odd sizes, transposes, batches, a heap
 * that grows during the call, NaN / Inf where masked), no leak of tensors or heap, and the
 * fallbacks where the heap cannot be shared.
 */
import * as tf from '@tensorflow/tfjs';

import {wasmHeap} from '../../src/kernels/backend_io';
import {softmaxWithFill} from '../../src/kernels/fused_softmax';
import {mm} from '../../src/kernels/matmul';
import {useBackend} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {kernelsOf, withSimdKernels} from '../helpers/kernels';
import {maxError, reference, softmaxReference, values} from '../helpers/kernel_reference';

/** The parts of tfjs' wasm backend these tests watch. */
interface WasmBackendParts {
  typedArrayFromHeap(t: tf.TensorInfo): Float32Array;
  wasm: {_malloc(n: number): number; _free(p: number): void; HEAPU8: Uint8Array};
}

const backendOf = () => tf.backend() as unknown as WasmBackendParts;

/** `f` with the backend's reads through typedArrayFromHeap counted. */
function countingCopies<T>(f: () => T): {result: T; copies: number} {
  const b = backendOf();
  const original = b.typedArrayFromHeap;
  let copies = 0;
  b.typedArrayFromHeap = function (this: unknown, t: tf.TensorInfo) {
    copies++;
    return original.call(this, t);
  };
  try {
    return {result: f(), copies};
  } finally {
    b.typedArrayFromHeap = original;
  }
}

describe('SIMD kernels in the wasm backend heap', () => {
  beforeAll(() => useBackend('wasm'));
  afterAll(() => useBackend('cpu'));

  it('the backend heap takes the kernels (tfjs-wasm in Node: its heap is not shared)', () => {
    expect(wasmHeap(tf.backend())).not.toBeNull();
  });

  // [batch, m, n, k]: below, at and off the 4 x 8 tile, across the cache blocks (MC 64, NC 512,
  // KC 256)
  for (const size of [
    [1, 1, 1, 1],
    [2, 5, 17, 3],
    [3, 17, 33, 5],
    [1, 67, 9, 300],
    [1, 70, 520, 260],
  ]) {
    it(`mm = a plain loop, every transpose, nothing copied: [batch, m, n, k] = [${size}]`, () => {
      const [batch, m, n, k] = size;
      const av = values(batch * m * k, 1);
      const bv = values(batch * k * n, 2);
      for (const ta of [false, true]) {
        for (const tb of [false, true]) {
          const a = tf.tensor(av, [batch, ...(ta ? [k, m] : [m, k])]);
          const b = tf.tensor(bv, [batch, ...(tb ? [n, k] : [k, n])]);
          const {result: c, copies} = countingCopies(() => mm(a, b, ta, tb));
          expect(copies).toBe(0);
          expect(c.shape).toEqual([batch, m, n]);
          const got = c.dataSync() as Float32Array;
          expect(maxError(got, reference(av, bv, size, ta, tb))).toBeLessThan(1e-5);
          tf.dispose([a, b, c]);
        }
      }
    });
  }

  it('mm whose output grows the heap mid-call (the kernels see the grown memory)', () => {
    const heap = backendOf().wasm;
    const before = heap.HEAPU8.buffer.byteLength;
    // an output 10% larger than the whole heap now
    const m = Math.ceil(Math.sqrt((before / 4) * 1.1));
    const [n, k] = [m, 2];
    const av = values(m * k, 3);
    const bv = values(k * n, 4);
    const a = tf.tensor(av, [m, k]);
    const b = tf.tensor(bv, [k, n]);
    const c = mm(a, b);
    expect(heap.HEAPU8.buffer.byteLength).toBeGreaterThan(before);
    const got = c.dataSync() as Float32Array;
    // every 97th row against the loop
    let worst = 0;
    for (let i = 0; i < m; i += 97) {
      for (let j = 0; j < n; j++) {
        const want = av[i * k] * bv[j] + av[i * k + 1] * bv[n + j];
        worst = Math.max(worst, Math.abs(got[i * n + j] - want));
      }
    }
    expect(worst).toBeLessThan(1e-6);
    tf.dispose([a, b, c]);
  });

  it('mm gradients run in the heap too, = tf.matMul gradients', async () => {
    const a = tf.tensor(values(2 * 9 * 13, 5), [2, 9, 13]);
    const b = tf.tensor(values(2 * 7 * 13, 6), [2, 7, 13]);
    const dy = tf.tensor(values(2 * 9 * 7, 7), [2, 9, 7]);
    const loss = (f: typeof mm) => (x: tf.Tensor, y: tf.Tensor) =>
      tf.sum(tf.mul(f(x, y, false, true), dy));
    const plain = (x: tf.Tensor, y: tf.Tensor, p?: boolean, q?: boolean) => tf.matMul(x, y, p, q);
    const names = await kernelsOf(() => tf.grads(loss(mm))([a, b]));
    expect(names.filter((x) => x === 'TfjsAttentionMatMul').length).toBe(3);
    // (each of them a product as above, which copies nothing)
    const g1 = tf.grads(loss(mm))([a, b]);
    const g2 = tf.grads(loss(plain))([a, b]);
    g1.forEach((g, i) => expectClose(g, g2[i], 1e-5, 1e-5));
    tf.dispose([a, b, dy, g1, g2]);
  });

  for (const cols of [1, 5, 33, 128]) {
    it(`softmaxWithFill = a plain loop with its gradient, nothing copied: ${cols} columns, NaN / Inf where masked`, async () => {
      const rows = 6;
      const xv = values(rows * cols, cols);
      for (let i = 0; i < xv.length; i++) xv[i] *= 20;
      const fv = new Float32Array(rows * cols);
      for (let i = 0; i < fv.length; i++) {
        if (i % 3 === 1 || Math.floor(i / cols) === 2) {
          fv[i] = -1e9;
          xv[i] = [NaN, Infinity, -Infinity, 5][i % 4];
        }
      }
      const dyv = values(rows * cols, cols + 1);
      const ref = softmaxReference(xv, fv, cols, dyv);
      const x = tf.tensor(xv, [2, 3, cols]);
      const fill = tf.tensor(fv, [2, 3, cols]);
      const dy = tf.tensor(dyv, [2, 3, cols]);
      const names = await kernelsOf(() => softmaxWithFill(x, fill));
      expect(names).toEqual(['TfjsAttentionMaskedSoftmax']);
      // the forward and backward kernels copy nothing (tf.grad's own ops, such as the ones it
      // starts from, are tfjs kernels that do)
      const {result, copies} = countingCopies(() => {
        const y = softmaxWithFill(x, fill);
        const back = tf.engine().runKernel('TfjsAttentionMaskedSoftmaxGrad', {dy, y, fill});
        return [y, back as tf.Tensor];
      });
      expect(copies).toBe(0);
      const dx = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(softmaxWithFill(t, fill), dy)))(x);
      expect(maxError(result[0].dataSync() as Float32Array, ref.y)).toBeLessThan(1e-6);
      expect(maxError(result[1].dataSync() as Float32Array, ref.dx)).toBeLessThan(1e-6);
      expect(maxError(dx.dataSync() as Float32Array, ref.dx)).toBeLessThan(1e-6);
      tf.dispose([x, fill, dy, dx, ...result]);
    });
  }

  it('softmaxWithFill with a broadcast mask [batch, 1, queries, keys] = composed ops', () => {
    const logits = tf.mul(tf.tensor(values(2 * 3 * 5 * 33, 8), [2, 3, 5, 33]), 10);
    const mask = tf.greater(tf.tensor(values(2 * 5 * 33, 9), [2, 1, 5, 33]), -0.3);
    const fill = tf.mul(tf.sub(1, tf.cast(mask, 'float32')), -1e9);
    tf.tidy(() => {
      const composed = tf.softmax(tf.where(tf.broadcastTo(mask, logits.shape), logits, -1e9));
      expectClose(softmaxWithFill(logits, fill), composed, 1e-6, 1e-5);
    });
    tf.dispose([logits, mask, fill]);
  });

  it('leaves no tensor and frees its heap scratch (each malloc of a call freed with its outputs)', () => {
    const heap = backendOf().wasm;
    const x = tf.tensor(values(4 * 40, 10), [4, 40]);
    const fill = tf.tensor(
      values(4, 11).map((v) => (v > 0 ? -1e9 : 0)),
      [4, 1],
    );
    const a = tf.tensor(values(30 * 20, 12), [30, 20]);
    const tensors = tf.memory().numTensors;
    const mallocs: number[] = [];
    const frees: number[] = [];
    const [malloc, free] = [heap._malloc, heap._free];
    heap._malloc = (n: number) => {
      const p = malloc(n);
      mallocs.push(p);
      return p;
    };
    heap._free = (p: number) => {
      frees.push(p);
      free(p);
    };
    try {
      for (let i = 0; i < 3; i++) {
        tf.tidy(() => {
          softmaxWithFill(x, fill).dataSync();
          mm(a, a, false, true).dataSync();
          tf.grad((t: tf.Tensor) => tf.sum(softmaxWithFill(t, fill)))(x).dataSync();
        });
      }
    } finally {
      heap._malloc = malloc;
      heap._free = free;
    }
    expect(tf.memory().numTensors).toBe(tensors);
    expect(mallocs.length).toBeGreaterThan(0);
    expect([...frees].sort()).toEqual([...mallocs].sort());
    tf.dispose([x, fill, a]);
  });

  it('without the SIMD module, the wasm backend composes tfjs ops (same values)', async () => {
    const logits = tf.mul(tf.tensor(values(2 * 4 * 17, 13), [2, 4, 17]), 10);
    const fill = tf.tensor(
      values(2 * 17, 14).map((v) => (v > 0.3 ? -1e9 : 0)),
      [2, 1, 17],
    );
    const fast = softmaxWithFill(logits, fill);
    await withSimdKernels(false, async () => {
      expect(wasmHeap(tf.backend())).toBeNull();
      const names = await kernelsOf(() => softmaxWithFill(logits, fill));
      expect(names).not.toContain('TfjsAttentionMaskedSoftmax');
      expect(names).toContain('Softmax');
      const plain = softmaxWithFill(logits, fill);
      expectClose(plain, fast, 1e-6, 1e-5);
      plain.dispose();
    });
    expect(wasmHeap(tf.backend())).not.toBeNull();
    tf.dispose([logits, fill, fast]);
  });

  it('a heap that cannot be shared (a shared memory, or none found) is refused, so callers copy', () => {
    const fake = (memory: unknown) => ({
      wasm: {asm: {memory}, _malloc: () => 16, _free: () => undefined},
      dataIdMap: new Map(),
      makeOutput: () => {
        throw new Error('not reached');
      },
    });
    const shared = new WebAssembly.Memory({initial: 1, maximum: 2, shared: true});
    expect(wasmHeap(fake(shared))).toBeNull();
    expect(wasmHeap(fake(undefined))).toBeNull();
    expect(wasmHeap(null)).toBeNull();
    // an unshared memory of the right kind is taken
    expect(wasmHeap(fake(new WebAssembly.Memory({initial: 1})))).not.toBeNull();
  });

  it('a malloc that fails (0: the heap cannot grow) is an error, never a write at address 0', () => {
    const full = {
      wasm: {asm: {memory: new WebAssembly.Memory({initial: 1})}, _malloc: () => 0, _free: () => 0},
      dataIdMap: new Map(),
      makeOutput: () => {
        throw new Error('not reached');
      },
    };
    expect(() => wasmHeap(full)).toThrow(/the wasm heap has no \d+ bytes left/);
  });
});
