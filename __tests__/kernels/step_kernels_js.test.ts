/**
 * The plain-JavaScript kernels of the compiled step (src/kernels/step_kernels_js.ts) that
 * generate's compiled models do not reach yet (RMS norm, Keras 3's int8 products, argmax,
 * activations) against references written here, and their views of a memory that grows.
 */
import * as tf from '@tensorflow/tfjs';

import {StepActivation} from '../../src/kernels/step_kernels_api';
import {jsStepKernels} from '../../src/kernels/step_kernels_js';

/** A memory with arrays placed at 16-aligned offsets from 16 on. */
function arena() {
  const memory = new WebAssembly.Memory({initial: 1});
  let top = 16;
  const put = (values: ArrayLike<number>, kind: 'f32' | 'i32' | 'i8' = 'f32'): number => {
    const bytes = kind === 'i8' ? values.length : values.length * 4;
    const at = top;
    top = (top + bytes + 15) & ~15;
    while (top > memory.buffer.byteLength) memory.grow(1);
    const View = kind === 'f32' ? Float32Array : kind === 'i32' ? Int32Array : Int8Array;
    new View(memory.buffer, at, values.length).set(values);
    return at;
  };
  const f32 = (at: number, n: number) => Array.from(new Float32Array(memory.buffer, at, n));
  return {memory, put, f32};
}

const rand = (n: number, seed: number) => {
  let s = seed;
  return Array.from({length: n}, () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return (s / 2 ** 31) * 4 - 2;
  });
};

describe('plain-JavaScript step kernels', () => {
  it('denseRows = dense = a float64 loop (1e-5 relative), through an object that overrides dense', () => {
    const {memory, put, f32} = arena();
    const k = jsStepKernels(memory);
    const [rows, kk, n] = [7, 19, 11];
    const xv = rand(rows * kk, 3);
    const wv = rand(kk * n, 4);
    const bv = rand(n, 5);
    const [x, w, b] = [put(xv), put(wv), put(bv)];
    const out = put(new Array(rows * n).fill(NaN));
    const work = put(new Array(k.denseRowsWorkBytes / 4).fill(NaN));
    k.denseRows(rows, kk, n, x, w, b, StepActivation.Relu, out, work);
    const want: number[] = [];
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < n; j++) {
        let s = bv[j];
        for (let p = 0; p < kk; p++) s += xv[r * kk + p] * wv[p * n + j];
        want.push(Math.max(s, 0));
      }
    }
    f32(out, rows * n).forEach((v, i) =>
      expect(Math.abs(v - want[i])).toBeLessThan(1e-5 * (1 + Math.abs(want[i]))),
    );
    // step_kernels_choice.ts spreads these kernels under its own dense: denseRows runs that one
    let called = 0;
    const spread = {
      ...k,
      dense(...args: Parameters<typeof k.dense>) {
        called++;
        k.dense(...args);
      },
    };
    spread.denseRows(rows, kk, n, x, w, b, StepActivation.Relu, out, work);
    expect(called).toBe(1);
  });

  it('rmsNorm: x / sqrt(mean(x^2) + eps) * gamma, within 1e-6', () => {
    const {memory, put, f32} = arena();
    const k = jsStepKernels(memory);
    const x = rand(2 * 5, 1);
    const g = rand(5, 2);
    const out = put(new Array(10).fill(0));
    k.rmsNorm(2, 5, put(x), put(g), 1e-6, out);
    const got = f32(out, 10);
    for (let r = 0; r < 2; r++) {
      const row = x.slice(r * 5, r * 5 + 5);
      const ms = row.reduce((a, v) => a + v * v, 0) / 5;
      row.forEach((v, i) => {
        expect(Math.abs(got[r * 5 + i] - (v / Math.sqrt(ms + 1e-6)) * g[i])).toBeLessThan(1e-6);
      });
    }
  });

  it("quantizeRows and denseInt8 / denseTInt8 / denseInt8KN: Keras 3's int8 Dense, exactly", () => {
    const {memory, put, f32} = arena();
    const k = jsStepKernels(memory);
    const [rows, K, N] = [2, 6, 3];
    const x = rand(rows * K, 3);
    x[4] = 0.5 / (127 / (Math.max(...x.slice(0, K).map(Math.abs)) + 1e-7)); // near a half after scaling
    const w = rand(K * N, 4).map((v) => Math.round(v * 60));
    const ws = [3, 5, 7];
    const bias = [0.25, -1, 2];
    const q = put(new Array(rows * K).fill(0), 'i8');
    const qs = put(new Array(rows).fill(0));
    k.quantizeRows(rows, K, put(x), q, qs);
    // reference: Keras' abs_max_quantize in float32, round half to even
    const fr = Math.fround;
    const refQ: number[] = [];
    const refS: number[] = [];
    for (let r = 0; r < rows; r++) {
      const row = x.slice(r * K, r * K + K).map(fr);
      const s = fr(127 / fr(Math.max(...row.map(Math.abs)) + fr(1e-7)));
      refS.push(s);
      for (const v of row) {
        const y = fr(v * s);
        const floor = Math.floor(y);
        const even = y - floor === 0.5 ? (floor % 2 === 0 ? floor : floor + 1) : Math.round(y);
        refQ.push(Math.max(-127, Math.min(127, even)));
      }
    }
    expect(Array.from(new Int8Array(memory.buffer, q, rows * K))).toEqual(refQ);
    expect(f32(qs, rows)).toEqual(refS.map(fr));
    const out = put(new Array(rows * N).fill(0));
    // the kernel [K, N] as denseInt8 reads it (packed transposed) and as a tied table: [N, K]
    const wT = Array.from({length: N * K}, (_, i) => w[(i % K) * N + Math.floor(i / K)]);
    k.denseInt8(rows, K, N, q, qs, put(wT, 'i8'), put(ws), put(bias), StepActivation.Relu, out);
    const outT = put(new Array(rows * N).fill(0));
    k.denseTInt8(rows, K, N, q, qs, put(wT, 'i8'), put(ws), outT);
    // the kernel in Keras' layout [K, N], read as it is
    const outKN = put(new Array(rows * N).fill(0));
    k.denseInt8KN(rows, K, N, q, qs, put(w, 'i8'), put(ws), put(bias), StepActivation.Relu, outKN);
    for (let r = 0; r < rows; r++) {
      for (let n = 0; n < N; n++) {
        let sum = 0;
        for (let i = 0; i < K; i++) sum += refQ[r * K + i] * w[i * N + n];
        const y = fr(sum / fr(refS[r] * ws[n]));
        expect(f32(outT, rows * N)[r * N + n]).toBe(y);
        expect(f32(out, rows * N)[r * N + n]).toBe(Math.max(0, fr(y + bias[n])));
        expect(f32(outKN, rows * N)[r * N + n]).toBe(Math.max(0, fr(y + bias[n])));
      }
    }
  });

  it("activations match tfjs' (gelu, tanh gelu, silu, tanh, sigmoid, relu) within 1e-6", () => {
    const {memory, put, f32} = arena();
    const k = jsStepKernels(memory);
    const x = rand(16, 9);
    const t = tf.tensor1d(x);
    const refs: Array<[StepActivation, tf.Tensor]> = [
      [StepActivation.Relu, tf.relu(t)],
      [StepActivation.GeluErf, tf.mul(tf.mul(t, 0.5), tf.add(1, tf.erf(tf.div(t, Math.SQRT2))))],
      [
        StepActivation.GeluTanh,
        tf.mul(
          tf.mul(t, 0.5),
          tf.add(
            1,
            tf.tanh(tf.mul(Math.sqrt(2 / Math.PI), tf.add(t, tf.mul(0.044715, tf.pow(t, 3))))),
          ),
        ),
      ],
      [StepActivation.Silu, tf.mul(t, tf.sigmoid(t))],
      [StepActivation.Tanh, tf.tanh(t)],
      [StepActivation.Sigmoid, tf.sigmoid(t)],
    ];
    for (const [act, ref] of refs) {
      const out = put(new Array(16).fill(0));
      k.activate(16, put(x), act, out);
      const want = ref.dataSync();
      f32(out, 16).forEach((v, i) => expect(Math.abs(v - want[i])).toBeLessThan(1e-6));
    }
    tf.dispose([t, ...refs.map(([, r]) => r)]);
  });

  it('argmax takes the lowest index of ties, and the views follow a memory that grows', () => {
    const {memory, put} = arena();
    const k = jsStepKernels(memory);
    const x = put([1, 3, 3, -1, -5, -2, -2, -7]);
    const out = put([9, 9]);
    k.argmax(2, 4, x, out);
    expect(Array.from(new Int32Array(memory.buffer, out, 2))).toEqual([1, 1]);
    memory.grow(2); // detaches the buffer the kernels viewed
    const y = put([0, 4, 4, 2]);
    k.argmax(1, 4, y, out);
    expect(new Int32Array(memory.buffer, out, 1)[0]).toBe(1);
  });
});
