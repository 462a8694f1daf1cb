/**
 * The package's WebAssembly SIMD kernels (wasm/kernels.ts): the committed module is a fresh build
 * of its source, each kernel equals a plain loop (sizes off the 4 x 8 tile and the cache blocks,
 * transposes, batches), and on the cpu backend `mm` runs it, with gradients, unless
 * TFJS_ATTENTION_OWN_KERNELS is off.
 */
import {execFileSync} from 'node:child_process';
import * as path from 'node:path';

import * as tf from '@tensorflow/tfjs';

import {
  maskedSoftmax,
  maskedSoftmaxGrad,
  sgemm,
  wasmKernelsFailure,
  wasmKernelsLoaded,
  wasmKernelsReady,
} from '../../src/kernels/wasm_kernels';
import {SIMD} from '../../src/kernels/flags';
import {simdKernelsReady} from '../../src';
import {KERNELS_WASM_BASE64} from '../../src/kernels/wasm_binary';
import {softmaxWithFill} from '../../src/kernels/fused_softmax';
import {maskFill} from '../../src/ops/masking';
import {mm} from '../../src/kernels/matmul';
import {useBackend} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {kernelsOf, withOwnKernels, withSimdKernels} from '../helpers/kernels';
import {randTensor} from '../helpers/data';
import {maxError, reference, softmaxReference, values} from '../helpers/kernel_reference';

describe('WebAssembly SIMD kernels', () => {
  beforeAll(() => useBackend('cpu'));

  it('the committed module is a fresh build of wasm/kernels.ts', () => {
    const root = path.join(__dirname, '..', '..');
    const out = execFileSync(process.execPath, ['scripts/build_wasm.mjs', '--check'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(out).toMatch(/matches/);
    // under 4 KB: Chromium compiles no larger module synchronously on the main thread
    expect(Buffer.from(KERNELS_WASM_BASE64, 'base64').length).toBeLessThan(4096);
  });

  it('loads synchronously in Node; the package exports simdKernelsReady', async () => {
    expect(wasmKernelsLoaded()).toBe(true);
    await expect(wasmKernelsReady()).resolves.toBe(true);
    await expect(simdKernelsReady()).resolves.toBe(true);
  });

  // [batch, m, n, k]: below, at and off the 4 x 8 tile; m > 64 (MC), n > 512 (NC), k > 256 (KC)
  const sizes = [
    [1, 1, 1, 1],
    [1, 3, 5, 17],
    [2, 5, 17, 3],
    [3, 17, 33, 5],
    [1, 33, 1, 33],
    [2, 4, 8, 16],
    [1, 67, 9, 300],
    [1, 5, 515, 7],
    [1, 70, 520, 260],
  ];
  for (const size of sizes) {
    it(`sgemm = a plain loop, every transpose: [batch, m, n, k] = [${size}]`, () => {
      const [batch, m, n, k] = size;
      const a = values(batch * m * k, 1);
      const b = values(batch * k * n, 2);
      for (const ta of [false, true]) {
        for (const tb of [false, true]) {
          const c = sgemm(a, b, batch, m, n, k, ta, tb);
          expect(maxError(c, reference(a, b, size, ta, tb))).toBeLessThan(1e-5);
        }
      }
    });
  }

  it('sgemm over more than 2^22 floats runs in groups of slices (here 2 and 1)', () => {
    const size = [3, 1200, 1200, 2];
    const a = values(3 * 1200 * 2, 1);
    const b = values(3 * 2 * 1200, 2);
    const c = sgemm(a, b, 3, 1200, 1200, 2, true, false);
    expect(maxError(c, reference(a, b, size, true, false))).toBeLessThan(1e-5);
  });

  it('mm with mismatched inner sizes is refused (by tfjs) instead of read out of bounds', () => {
    const a = tf.zeros([2, 3, 4]);
    const b = tf.zeros([2, 5, 6]);
    expect(() => mm(a, b)).toThrow(/inner/i);
    expect(() => mm(a, b, true, true)).toThrow(/inner/i);
    tf.dispose([a, b]);
  });

  it('sgemm with k = 0 is zeros, and NaN / Inf inputs propagate like the loop', () => {
    expect(
      Array.from(sgemm(new Float32Array(0), new Float32Array(0), 2, 3, 5, 0, false, false)),
    ).toEqual(new Array(30).fill(0));
    const a = values(5 * 7, 3);
    const b = values(7 * 9, 4);
    a[8] = NaN;
    b[20] = Infinity;
    const c = sgemm(a, b, 1, 5, 9, 7, false, false);
    const ref = reference(a, b, [1, 5, 9, 7], false, false);
    for (let i = 0; i < c.length; i++) {
      if (Number.isFinite(ref[i])) expect(Math.abs(c[i] - ref[i])).toBeLessThan(1e-5);
      else
        expect(Object.is(c[i], ref[i]) || (Number.isNaN(c[i]) && Number.isNaN(ref[i]))).toBe(true);
    }
  });

  for (const [backend, lead, m, n, k] of [
    ['cpu', [], 5, 17, 3],
    ['cpu', [3], 17, 5, 33],
    ['cpu', [2, 3], 1, 9, 5],
    ['wasm', [], 5, 17, 3],
    ['wasm', [3], 17, 5, 33],
  ] as Array<[string, number[], number, number, number]>) {
    it(`mm on ${backend} runs sgemm, = tf.matMul with gradients: [${lead}] x ${m} x ${n} x ${k}`, async () => {
      await useBackend(backend);
      await mmCase(lead, m, n, k);
      await useBackend('cpu');
    });
  }

  async function mmCase(lead: number[], m: number, n: number, k: number) {
    for (const ta of [false, true]) {
      for (const tb of [false, true]) {
        const a = randTensor([...lead, ...(ta ? [k, m] : [m, k])], 10);
        const b = randTensor([...lead, ...(tb ? [n, k] : [k, n])], 11);
        const dy = randTensor([...lead, m, n], 12);
        const names = await kernelsOf(() => mm(a, b, ta, tb));
        expect(names).toEqual(['TfjsAttentionMatMul']);
        const loss = (f: typeof mm) => (x: tf.Tensor, y: tf.Tensor) =>
          tf.sum(tf.mul(f(x, y, ta, tb), dy));
        // the gradients are products through the same kernel
        const gradNames = await kernelsOf(() => tf.grads(loss(mm))([a, b]));
        expect(gradNames.filter((x) => x === 'TfjsAttentionMatMul').length).toBe(3);
        expect(gradNames).not.toContain('BatchMatMul');
        const off = await kernelsOf(() => withOwnKernels(false, () => mm(a, b, ta, tb)));
        expect(off).not.toContain('TfjsAttentionMatMul');
        tf.tidy(() => {
          const plain = (x: tf.Tensor, y: tf.Tensor, p?: boolean, q?: boolean) =>
            tf.matMul(x, y, p, q);
          expectClose(mm(a, b, ta, tb), plain(a, b, ta, tb), 1e-5, 1e-5);
          const g1 = tf.grads(loss(mm))([a, b]);
          const g2 = tf.grads(loss(plain))([a, b]);
          g1.forEach((g, i) => expectClose(g, g2[i], 1e-5, 1e-5));
        });
        tf.dispose([a, b, dy]);
      }
    }
  }

  for (const cols of [1, 3, 4, 5, 17, 33, 128]) {
    it(`maskedSoftmax and its gradient = a plain loop: ${cols} columns, masks, NaN / Inf where masked`, () => {
      const rows = 7;
      const x = values(rows * cols, cols);
      for (let i = 0; i < x.length; i++) x[i] *= 20;
      const dy = values(rows * cols, cols + 1);
      // per-element fill: every third position masked, row 2 fully masked; masked logits may be
      // NaN or +-Inf and must not reach the output
      const fill = new Float32Array(rows * cols);
      for (let i = 0; i < fill.length; i++) {
        if (i % 3 === 1 || Math.floor(i / cols) === 2) {
          fill[i] = -1e9;
          x[i] = [NaN, Infinity, -Infinity, 5][i % 4];
        }
      }
      const offsets = Int32Array.from({length: rows}, (_, r) => r * cols);
      const ref = softmaxReference(x, fill, cols, dy);
      const y = maskedSoftmax(x, fill, offsets, true, cols);
      expect(maxError(y, ref.y)).toBeLessThan(1e-6);
      expect(maxError(maskedSoftmaxGrad(dy, y, fill, offsets, true, cols), ref.dx)).toBeLessThan(
        1e-6,
      );
      // one fill value per row (a broadcast [rows, 1] fill): rows 0 and 3 masked
      const rowFill = Float32Array.from({length: rows}, (_, r) => (r === 0 || r === 3 ? -1e9 : 0));
      const clean = values(rows * cols, cols + 2);
      const rowIds = Int32Array.from({length: rows}, (_, r) => r);
      const full = Float32Array.from(
        {length: rows * cols},
        (_, i) => rowFill[Math.floor(i / cols)],
      );
      const ref2 = softmaxReference(clean, full, cols, dy);
      const y2 = maskedSoftmax(clean, rowFill, rowIds, false, cols);
      expect(maxError(y2, ref2.y)).toBeLessThan(1e-6);
      expect(
        maxError(maskedSoftmaxGrad(dy, y2, rowFill, rowIds, false, cols), ref2.dx),
      ).toBeLessThan(1e-6);
    });
  }

  it('softmaxWithFill on cpu runs the SIMD kernel with a broadcast mask, = composed ops with gradients', async () => {
    const logits = tf.mul(randTensor([2, 3, 5, 33], 5), 10);
    const mask = tf.greater(randTensor([2, 1, 5, 33], 6), -0.3); // [batch, 1, queries, keys]
    const fill = maskFill(mask, 4);
    const names = await kernelsOf(() => softmaxWithFill(logits, fill));
    expect(names).toContain('TfjsAttentionMaskedSoftmax');
    tf.tidy(() => {
      const composed = (x: tf.Tensor) =>
        tf.softmax(tf.where(tf.broadcastTo(mask, x.shape), x, tf.scalar(-1e9)));
      expectClose(softmaxWithFill(logits, fill), composed(logits), 1e-6, 1e-5);
      const dy = randTensor(logits.shape, 7);
      const g1 = tf.grad((x: tf.Tensor) => tf.sum(tf.mul(softmaxWithFill(x, fill), dy)))(logits);
      const g2 = tf.grad((x: tf.Tensor) => tf.sum(tf.mul(composed(x), dy)))(logits);
      expectClose(g1, g2, 1e-6, 1e-5);
    });
    tf.dispose([logits, mask, fill]);
  });

  it('without the module (not yet compiled, or no SIMD) cpu falls back to JavaScript loops and tfjs', async () => {
    const logits = tf.mul(randTensor([2, 2, 3, 17], 5), 10);
    const fill = maskFill(tf.greater(randTensor([2, 1, 1, 17], 6), -0.3), 4);
    const a = randTensor([2, 5, 7], 1);
    const b = randTensor([2, 9, 7], 2);
    const dy = randTensor(logits.shape, 7);
    const grad = (x: tf.Tensor) => tf.sum(tf.mul(softmaxWithFill(x, fill), dy));
    const simd = tf.tidy(() => [
      softmaxWithFill(logits, fill),
      tf.grad(grad)(logits),
      mm(a, b, false, true),
    ]);
    await withSimdKernels(false, async () => {
      expect(wasmKernelsLoaded()).toBe(false);
      const names = await kernelsOf(() => [softmaxWithFill(logits, fill), mm(a, b, false, true)]);
      expect(names).toContain('TfjsAttentionMaskedSoftmax'); // its JavaScript loop
      expect(names).toContain('BatchMatMul');
      expect(names).not.toContain('TfjsAttentionMatMul');
      const plain = tf.tidy(() => [
        softmaxWithFill(logits, fill),
        tf.grad(grad)(logits),
        mm(a, b, false, true),
      ]);
      plain.forEach((t, i) => expectClose(t, simd[i], 1e-6, 1e-5));
      tf.dispose(plain);
    });
    tf.dispose([simd, logits, fill, a, b, dy]);
  });

  type Kernels = typeof import('../../src/kernels/wasm_kernels');

  /** Replaces members of WebAssembly; returns the function that puts them back. */
  function patchWasm(patch: Partial<Record<'Module' | 'validate' | 'Memory', unknown>>) {
    const wasm = WebAssembly as unknown as Record<string, unknown>;
    const originals = Object.keys(patch).map((k) => [k, wasm[k]] as const);
    Object.assign(wasm, patch);
    return () => originals.forEach(([k, v]) => (wasm[k] = v));
  }

  /** A fresh copy of the kernels' module (loaded again), on this file's tfjs-core. */
  function freshKernels(): Kernels {
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- the instance in use
    const core: unknown = require('@tensorflow/tfjs-core');
    let mod: Kernels | undefined;
    jest.isolateModules(() => {
      jest.doMock('@tensorflow/tfjs-core', () => core);
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- a fresh copy
      mod = require('../../src/kernels/wasm_kernels');
    });
    jest.dontMock('@tensorflow/tfjs-core');
    return mod as Kernels;
  }

  /** The kernels' module loaded afresh while `patch` replaces a member of WebAssembly. */
  function loadWith(name: 'Module' | 'validate', patch: unknown): Kernels {
    const restore = patchWasm({[name]: patch});
    try {
      return freshKernels();
    } finally {
      restore();
    }
  }

  function noMemory(): never {
    throw new RangeError('WebAssembly.Memory(): could not allocate memory');
  }

  it('where its memory cannot be reserved, the module stays off: ready() resolves false and says why', async () => {
    const restore = patchWasm({Memory: noMemory});
    try {
      const mod = freshKernels();
      expect(mod.wasmKernelsLoaded()).toBe(false);
      await expect(mod.simdKernelsReady()).resolves.toBe(false);
      expect(mod.wasmKernelsLoaded()).toBe(false);
      expect(mod.wasmKernelsFailure()).toBe(
        'the module could not be instantiated (RangeError: WebAssembly.Memory(): could not allocate memory)',
      );
      expect(() => mod.sgemm([1], [1], 1, 1, 1, 1, false, false)).toThrow(
        /not loaded \(the module could not be instantiated/,
      );
    } finally {
      restore();
    }
  });

  it('a failed instantiation after an asynchronous compile resolves ready() to false, never rejects', async () => {
    const restore = patchWasm({
      Module: function refused() {
        throw new RangeError('WebAssembly.Compile is disallowed on the main thread');
      },
      Memory: noMemory,
    });
    try {
      const mod = freshKernels();
      expect(mod.wasmKernelsFailure()).toBeNull(); // still compiling
      await expect(mod.simdKernelsReady()).resolves.toBe(false);
      expect(mod.wasmKernelsLoaded()).toBe(false);
      expect(mod.wasmKernelsFailure()).toMatch(
        /^the module could not be instantiated \(RangeError/,
      );
    } finally {
      restore();
    }
  });

  it('TFJS_ATTENTION_SIMD (a tfjs flag, default on) switches the loaded module off and on', () => {
    expect(tf.env().getBool(SIMD)).toBe(true);
    expect(wasmKernelsLoaded()).toBe(true);
    withSimdKernels(false, () => expect(wasmKernelsLoaded()).toBe(false));
    expect(wasmKernelsLoaded()).toBe(true);
    expect(wasmKernelsFailure()).toBeNull();
  });

  it('where a synchronous compile is refused, it compiles asynchronously; not loaded until then', async () => {
    const mod = loadWith('Module', function refused() {
      throw new RangeError('WebAssembly.Compile is disallowed on the main thread');
    });
    expect(mod.wasmKernelsLoaded()).toBe(false);
    await expect(mod.simdKernelsReady()).resolves.toBe(true);
    expect(mod.wasmKernelsLoaded()).toBe(true);
    expect(
      mod.sgemm(new Float32Array([2]), new Float32Array([3]), 1, 1, 1, 1, false, false),
    ).toEqual(new Float32Array([6]));
  });

  it('where WebAssembly SIMD is missing, it never loads and ready() resolves to false', async () => {
    const mod = loadWith('validate', () => false);
    expect(mod.wasmKernelsLoaded()).toBe(false);
    await expect(mod.simdKernelsReady()).resolves.toBe(false);
    expect(() => mod.sgemm([1], [1], 1, 1, 1, 1, false, false)).toThrow(/not loaded/);
  });
});
