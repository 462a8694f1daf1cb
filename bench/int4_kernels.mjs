// Keras 3's int4 kernels of the decoding step (denseInt4KN, denseTInt4) against the int8 ones
// (denseInt8KN, denseTInt8) at one row (a decoding step), on the committed module
// (src/kernels/step_kernels_binary.ts: build it with `npm run build:wasm`), in a memory of its own;
// one thread, each weight warm, the contenders interleaved run by run; median and fastest of
// TRIALS runs, ms per call and GB/s of weight bytes (int4: k * ceil(n / 2), int8: k * n; the int8
// products' time leaves out quantizeRows, as the int4 Dense has no input quantization). The int4
// weights are Keras' quantization of N(0, 0.02) values (block size 128, and per channel for the
// Dense), x N(0, 1) with one value in a hundred 20 times larger; "error" is the largest
// |out - ref| over the largest |ref|, ref a float64 sum of Keras' dequantized products.
//
//   node bench/int4_kernels.mjs [--trials=15]
/* global WebAssembly */
import {readFileSync} from 'node:fs';
import {performance} from 'node:perf_hooks';

const TRIALS = Number(process.argv.find((a) => a.startsWith('--trials='))?.slice(9) ?? 15);
const DENSE = [
  [576, 1536],
  [1536, 576],
  [2048, 2048],
  [2048, 512],
  [2048, 8192],
  [8192, 2048],
];
const TIED = [
  [2048, 128256],
  [576, 49152],
];
const BLOCK = 128;

const source = readFileSync(
  new URL('../src/kernels/step_kernels_binary.ts', import.meta.url),
  'utf8',
);
const binary = Buffer.from(source.match(/'([A-Za-z0-9+/=]+)'/)[1], 'base64');
const memory = new WebAssembly.Memory({initial: 1});
const K = (await WebAssembly.instantiate(binary, {env: {memory}})).instance.exports;

let top = K.heapBase();
/** A 16-aligned array of `bytes` in the memory (grown as needed), holding `values` if given. */
function place(bytes, Type, values) {
  const at = (top + 15) & ~15;
  top = at + Math.max(bytes, 4);
  if (top > memory.buffer.byteLength) {
    memory.grow(Math.ceil((top - memory.buffer.byteLength) / 65536));
  }
  if (values != null) new Type(memory.buffer, at, values.length).set(values);
  return at;
}

let seed = 1;
const uniform = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
const gauss = () => Math.sqrt(-2 * Math.log(uniform() + 1e-12)) * Math.cos(2 * Math.PI * uniform());
const f32 = Math.fround;
const roundHalfEven = (v) => {
  const r = Math.round(v);
  return Math.abs(v % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
};
const clip = (v) => Math.max(-8, Math.min(7, v));

/**
 * Keras' int4 quantization of N(0, 0.02) values `[outer, len]` along len (Dense: the transpose of
 * its kernel): grouped by `block` (0: per channel); q `[outer, len]`, scale / zero `[outer, G]`.
 */
function quantize(outer, len, block) {
  const groups = block > 0 ? Math.ceil(len / block) : 1;
  const q = new Int8Array(outer * len);
  const scale = new Float32Array(outer * groups);
  const zero = new Int8Array(outer * groups);
  const w = Float32Array.from({length: len}, () => 0);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < len; i++) w[i] = 0.02 * gauss();
    for (let g = 0; g < groups; g++) {
      const [a, b] = block > 0 ? [g * block, Math.min(len, (g + 1) * block)] : [0, len];
      if (block > 0) {
        let [lo, hi] = b - a < block ? [0, 0] : [Infinity, -Infinity];
        for (let i = a; i < b; i++) [lo, hi] = [Math.min(lo, w[i]), Math.max(hi, w[i])];
        const s = f32(f32(f32(hi - lo) + 1e-7) / 15);
        const z = clip(roundHalfEven(f32(-lo / s)) - 8);
        [scale[o * groups + g], zero[o * groups + g]] = [s, z];
        for (let i = a; i < b; i++) q[o * len + i] = clip(roundHalfEven(f32(w[i] / s)) + z);
      } else {
        let m = 0;
        for (let i = a; i < b; i++) m = Math.max(m, Math.abs(w[i]));
        const s = f32(7 / f32(m + 1e-7));
        scale[o] = s;
        for (let i = a; i < b; i++) q[o * len + i] = clip(roundHalfEven(f32(w[i] * s)));
      }
    }
  }
  return {q, scale, zero, groups};
}

/** Keras' pack_int4 of values `[outer, len]` along len, as a [rows, cols] view reads them. */
function packRows(values, outer, len) {
  const lb = Math.ceil(len / 2);
  const bytes = new Uint8Array(outer * lb);
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < len; i++)
      bytes[o * lb + (i >> 1)] |= (values[o * len + i] & 15) << ((i & 1) * 4);
  }
  return bytes;
}

/** int8 weights for the int8 products (their values do not change their time). */
function int8Weights(size) {
  const w = new Int8Array(size);
  for (let i = 0; i < size; i++) w[i] = ((i * 7919) % 255) - 127;
  return w;
}

const activations = (k) =>
  Float32Array.from({length: k}, () => gauss() * (uniform() < 0.01 ? 20 : 1));

/** Largest |got - ref| over the largest |ref|. */
function error(got, ref) {
  let [e, m] = [0, 0];
  for (let i = 0; i < ref.length; i++) {
    e = Math.max(e, Math.abs(got[i] - ref[i]));
    m = Math.max(m, Math.abs(ref[i]));
  }
  return e / m;
}

/** Times the contenders interleaved: median and fastest ms per call of each. */
function time(contenders, work) {
  const reps = Math.max(1, Math.round(2e8 / work));
  for (const c of contenders) {
    c.times = [];
    const t0 = performance.now();
    while (performance.now() - t0 < 300) c.run(); // past V8's tier-up
  }
  for (let t = 0; t < TRIALS; t++) {
    for (const c of contenders) {
      const t0 = performance.now();
      for (let r = 0; r < reps; r++) c.run();
      c.times.push((performance.now() - t0) / reps);
    }
  }
  for (const c of contenders) c.times.sort((a, b) => a - b);
}

const rows = [];
const row = (what, c) => {
  const [median, min] = [c.times[c.times.length >> 1], c.times[0]];
  rows.push(
    `| ${what} | ${c.name} | ${median.toFixed(3)} | ${min.toFixed(3)} | ` +
      `${(c.bytes / median / 1e6).toFixed(2)} | ${c.error ?? ''} |`,
  );
};

for (const [k, n] of DENSE) {
  const x = place(4 * k, Float32Array, activations(k));
  const xv = new Float32Array(memory.buffer, x, k).slice();
  const out = place(4 * n);
  const contenders = [];
  for (const block of [BLOCK, 0]) {
    // the kernel [k, n] from its transpose's quantization (Keras quantizes along the input axis)
    const {q: qt, scale, zero, groups} = quantize(n, k, block);
    const q = new Int8Array(k * n);
    for (let p = 0; p < k; p++) for (let j = 0; j < n; j++) q[p * n + j] = qt[j * k + p];
    const sT = new Float32Array(groups * n);
    const zT = new Int8Array(groups * n);
    for (let g = 0; g < groups; g++) {
      for (let j = 0; j < n; j++)
        [sT[g * n + j], zT[g * n + j]] = [scale[j * groups + g], zero[j * groups + g]];
    }
    const w = place(k * Math.ceil(n / 2), Uint8Array, packRows(q, k, n));
    const s = place(4 * sT.length, Float32Array, sT);
    const z = place(zT.length, Int8Array, zT);
    const ref = new Float64Array(n);
    for (let p = 0; p < k; p++) {
      const g = block > 0 ? Math.floor(p / block) : 0;
      for (let j = 0; j < n; j++) {
        const v = block > 0 ? f32((q[p * n + j] - zT[g * n + j]) * sT[g * n + j]) : q[p * n + j];
        ref[j] += xv[p] * v;
      }
    }
    if (block === 0) for (let j = 0; j < n; j++) ref[j] /= sT[j];
    const run = () => K.denseInt4KN(1, k, n, x, w, s, block > 0 ? z : 0, block, 0, 0, out);
    run();
    contenders.push({
      name: block > 0 ? `denseInt4KN, block ${block}` : 'denseInt4KN, per channel',
      run,
      bytes: k * Math.ceil(n / 2),
      error: error(new Float32Array(memory.buffer, out, n), ref).toExponential(1),
    });
  }
  const w8 = place(k * n, Int8Array, int8Weights(k * n));
  const ws = place(4 * n, Float32Array, new Float32Array(n).fill(100));
  const [q8, qs] = [place(k), place(4)];
  K.quantizeRows(1, k, x, q8, qs);
  contenders.push({
    name: 'denseInt8KN',
    run: () => K.denseInt8KN(1, k, n, q8, qs, w8, ws, 0, 0, out),
    bytes: k * n,
  });
  time(contenders, k * n);
  for (const c of contenders) row(`${k} x ${n}`, c);
  top = x; // the next shape reuses the memory
}

for (const [k, n] of TIED) {
  const x = place(4 * k, Float32Array, activations(k));
  const [q8, qs] = [place(k), place(4)];
  K.quantizeRows(1, k, x, q8, qs);
  const qv = new Int8Array(memory.buffer, q8, k).slice();
  const qsv = new Float32Array(memory.buffer, qs, 1)[0];
  const out = place(4 * n);
  const {q, scale, zero, groups} = quantize(n, k, BLOCK);
  const w = place(n * Math.ceil(k / 2), Uint8Array, packRows(q, n, k));
  const s = place(4 * scale.length, Float32Array, scale);
  const z = place(zero.length, Int8Array, zero);
  const ref = new Float64Array(n);
  for (let v = 0; v < n; v++) {
    let acc = 0;
    for (let d = 0; d < k; d++) {
      const g = v * groups + Math.floor(d / BLOCK);
      acc += qv[d] * f32((q[v * k + d] - zero[g]) * scale[g]);
    }
    ref[v] = acc / qsv;
  }
  const run = () => K.denseTInt4(1, k, n, q8, qs, w, s, z, BLOCK, out);
  run();
  const w8 = place(n * k, Int8Array, int8Weights(n * k));
  const ws = place(4 * n, Float32Array, new Float32Array(n).fill(100));
  const contenders = [
    {
      name: `denseTInt4, block ${BLOCK}`,
      run,
      bytes: n * Math.ceil(k / 2),
      error: error(new Float32Array(memory.buffer, out, n), ref).toExponential(1),
    },
    {name: 'denseTInt8', run: () => K.denseTInt8(1, k, n, q8, qs, w8, ws, out), bytes: n * k},
  ];
  time(contenders, k * n);
  for (const c of contenders) row(`${k} x ${n} (tied)`, c);
  top = x;
}

console.log(`Node ${process.version}, one thread, ${TRIALS} runs each, interleaved\n`);
console.log('| k x n | kernel | median ms | min ms | GB/s (median) | error |');
console.log('| --- | --- | ---: | ---: | ---: | ---: |');
for (const r of rows) console.log(r);
