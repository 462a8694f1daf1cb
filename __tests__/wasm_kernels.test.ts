/**
 * The package's WebAssembly SIMD kernels (wasm/kernels.ts): the committed module is a fresh build
 * of its source, each kernel equals a plain loop (sizes off the 4 x 8 tile and the cache blocks,
 * transposes, batches), and on the cpu backend `mm` runs it, with gradients, unless
 * TFJS_ATTENTION_OWN_KERNELS is off.
 */
import {execFileSync} from 'node:child_process';
import * as path from 'node:path';

import * as tf from '@tensorflow/tfjs';

import {sgemm, wasmKernelsLoaded, wasmKernelsReady} from '../src/kernels/wasm_kernels';
import {OWN_KERNELS} from '../src/ops/flags';
import {mm} from '../src/ops/matmul';
import {useBackend} from './helpers/backends';
import {expectClose} from './helpers/close';
import {randTensor} from './helpers/data';

/** Deterministic values in [-1, 1). */
function values(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

/** op(a) · op(b) per batch slice, in float64. */
function reference(
  a: Float32Array,
  b: Float32Array,
  [batch, m, n, k]: number[],
  ta: boolean,
  tb: boolean,
): Float64Array {
  const c = new Float64Array(batch * m * n);
  for (let s = 0; s < batch; s++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let sum = 0;
        for (let p = 0; p < k; p++) {
          const x = ta ? a[s * m * k + p * m + i] : a[s * m * k + i * k + p];
          const y = tb ? b[s * k * n + j * k + p] : b[s * k * n + p * n + j];
          sum += x * y;
        }
        c[s * m * n + i * n + j] = sum;
      }
  return c;
}

function maxError(x: Float32Array, ref: Float64Array): number {
  expect(x.length).toBe(ref.length);
  let worst = 0;
  for (let i = 0; i < x.length; i++) {
    const e = Math.abs(x[i] - ref[i]) / (1 + Math.abs(ref[i]));
    if (!(e <= worst)) worst = e; // NaN stays
  }
  return worst;
}

async function kernelsOf(f: () => tf.TensorContainer): Promise<string[]> {
  const info = await tf.profile(() => f());
  tf.dispose(info.result as tf.TensorContainer);
  return info.kernels.map((k) => k.name);
}

function withOwnKernels<T>(on: boolean, f: () => T): T {
  const before = tf.env().getBool(OWN_KERNELS);
  tf.env().set(OWN_KERNELS, on);
  try {
    return f();
  } finally {
    tf.env().set(OWN_KERNELS, before);
  }
}

describe('WebAssembly SIMD kernels', () => {
  beforeAll(() => useBackend('cpu'));

  it('the committed module is a fresh build of wasm/kernels.ts', () => {
    const root = path.join(__dirname, '..');
    const out = execFileSync(process.execPath, ['scripts/build_wasm.mjs', '--check'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(out).toMatch(/matches/);
  });

  it('loads synchronously in Node', async () => {
    expect(wasmKernelsLoaded()).toBe(true);
    await expect(wasmKernelsReady()).resolves.toBe(true);
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

  for (const [lead, m, n, k] of [
    [[], 5, 17, 3],
    [[3], 17, 5, 33],
    [[2, 3], 1, 9, 5],
  ] as Array<[number[], number, number, number]>) {
    it(`mm on cpu runs sgemm, = tf.matMul with gradients: [${lead}] x ${m} x ${n} x ${k}`, async () => {
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
    });
  }
});
