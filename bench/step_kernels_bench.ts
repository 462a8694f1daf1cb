/**
 * Micro-benchmark of the decoding step's SIMD products (wasm/step_kernels.ts) against tfjs-wasm's
 * own tf.matMul (XNNPACK) on the same operands, in tfjs-wasm's heap, weights uploaded and warmed
 * first: GPT-2 small's shapes (qkv [768, 2304], up [768, 3072], down [3072, 768], tied logits
 * [50257, 768]ᵀ) for one row (a decoding step) and 32 rows (a prefill), and the int8 products
 * (Keras 3's int8 Dense / tied logits, inputs quantized per row) on the same shapes. Medians.
 *
 *   npx esbuild bench/step_kernels_bench.ts --bundle --platform=node --format=cjs \
 *     --outfile=bench/.build/step_kernels_bench.cjs --external:@tensorflow/* \
 *     && node bench/.build/step_kernels_bench.cjs [--runs=N] [--shapes=qkv,up,down,logits] [--rows=1,32]
 */
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {StepActivation, type StepKernels} from '../src/kernels/step_kernels_api';
import {stepKernelsFailure, stepKernelsOn, stepKernelsReady} from '../src/kernels/step_kernels';

interface WasmParts {
  dataIdMap: {get(id: tf.DataId): {memoryOffset: number}};
  wasm: {
    _malloc(n: number): number;
    _free(p: number): void;
    asm?: {memory?: WebAssembly.Memory};
    wasmExports?: {memory?: WebAssembly.Memory};
  };
}

const arg = (name: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const RUNS = Number(arg('runs') ?? 15);
const SHAPES: Record<string, {k: number; n: number; transposed: boolean}> = {
  qkv: {k: 768, n: 2304, transposed: false},
  up: {k: 768, n: 3072, transposed: false},
  down: {k: 3072, n: 768, transposed: false},
  logits: {k: 768, n: 50257, transposed: true},
};
const shapes = (arg('shapes') ?? 'qkv,up,down,logits').split(',');
const rowCounts = (arg('rows') ?? '1,32').split(',').map(Number);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

/**
 * Median ms of each of `fs` over RUNS runs after 3 warm-up runs, interleaved (one run of each in
 * turn), so a noisy machine slows every contender alike.
 */
function time(fs: Array<() => void>): number[] {
  for (let i = 0; i < 3; i++) fs.forEach((f) => f());
  const ts: number[][] = fs.map(() => []);
  for (let i = 0; i < RUNS; i++) {
    fs.forEach((f, j) => {
      const t0 = performance.now();
      f();
      ts[j].push(performance.now() - t0);
    });
  }
  return ts.map(median);
}

function fill(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 32 - 0.5) * 0.2;
  }
  return out;
}

async function main(): Promise<void> {
  await tf.setBackend('wasm');
  await tf.ready();
  if (!(await stepKernelsReady())) throw new Error(`no SIMD kernels: ${stepKernelsFailure()}`);
  const backend = tf.backend() as unknown as WasmParts;
  const memory = (backend.wasm.asm ?? backend.wasm.wasmExports)?.memory;
  if (!(memory instanceof WebAssembly.Memory)) throw new Error('no tfjs-wasm heap');
  const K: StepKernels = stepKernelsOn(memory)!;
  const at = (t: tf.Tensor) => backend.dataIdMap.get(t.dataId).memoryOffset;
  const malloc = (bytes: number) => {
    const p = backend.wasm._malloc(bytes) >>> 0;
    if (p === 0) throw new Error(`no ${bytes} bytes in the heap`);
    return p;
  };

  console.log(`medians of ${RUNS} runs, ms (GB/s of weights read once)`);
  console.log(
    '| shape | rows | tf.matMul (XNNPACK) | dense / denseT f32 | int8 (quantize + product) |',
  );
  console.log('| --- | ---: | ---: | ---: | ---: |');
  for (const name of shapes) {
    const {k, n, transposed} = SHAPES[name];
    const w = tf.tensor2d(fill(k * n, 1), transposed ? [n, k] : [k, n]);
    // tied logits: also tf.matMul on a [k, n] copy made once (what a plan could keep instead)
    const wk = transposed ? tf.transpose(w) : null;
    // the int8 weights and their per-column scales, beside tfjs' tensors in the heap
    const w8 = malloc(k * n);
    const heap8 = new Int8Array(memory.buffer, w8, k * n);
    for (let i = 0; i < k * n; i++) heap8[i] = ((i * 2654435761) >>> 24) - 128 || 1;
    const ws = malloc(4 * n);
    new Float32Array(memory.buffer, ws, n).fill(100);
    for (const rows of rowCounts) {
      const x = tf.tensor2d(fill(rows * k, 2), [rows, k]);
      const out = malloc(4 * rows * n);
      const q = malloc(rows * k);
      const qs = malloc(4 * rows);
      const [viaTf, f32, int8, viaTfCopy] = time([
        () => tf.matMul(x, w, false, transposed).dispose(),
        () =>
          transposed
            ? K.denseT(rows, k, n, at(x), at(w), out)
            : K.dense(rows, k, n, at(x), at(w), 0, StepActivation.None, out),
        () => {
          K.quantizeRows(rows, k, at(x), q, qs);
          if (transposed) K.denseTInt8(rows, k, n, q, qs, w8, ws, out);
          else K.denseInt8(rows, k, n, q, qs, w8, ws, 0, StepActivation.None, out);
        },
        ...(wk ? [() => tf.matMul(x, wk).dispose()] : []),
      ]);
      // agreement with tf.matMul (the benchmark times what it checks)
      const want = tf.matMul(x, w, false, transposed);
      const ref = want.dataSync();
      if (transposed) K.denseT(rows, k, n, at(x), at(w), out);
      else K.dense(rows, k, n, at(x), at(w), 0, StepActivation.None, out);
      const got = new Float32Array(memory.buffer, out, rows * n);
      let worst = 0;
      for (let i = 0; i < ref.length; i++) {
        worst = Math.max(worst, Math.abs(got[i] - ref[i]) / (Math.abs(ref[i]) + 1));
      }
      want.dispose();
      if (worst > 1e-5) throw new Error(`${name} rows ${rows}: off tf.matMul by ${worst}`);
      const gbs = (bytes: number, ms: number) => (bytes / ms / 1e6).toFixed(1);
      const shape = transposed ? `[${rows},${k}]x[${n},${k}]ᵀ` : `[${rows},${k}]x[${k},${n}]`;
      const copy = viaTfCopy == null ? '' : `; on a [k, n] copy ${viaTfCopy.toFixed(3)}`;
      console.log(
        `| ${name} ${shape} | ${rows} | ${viaTf.toFixed(3)} (${gbs(4 * k * n, viaTf)})${copy} | ` +
          `${f32.toFixed(3)} (${gbs(4 * k * n, f32)}) | ${int8.toFixed(3)} (${gbs(k * n, int8)}) |`,
      );
      x.dispose();
      for (const p of [out, q, qs]) backend.wasm._free(p);
    }
    w.dispose();
    wk?.dispose();
    backend.wasm._free(w8);
    backend.wasm._free(ws);
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
