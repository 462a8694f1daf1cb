/**
 * Micro-benchmark of the decoding step's SIMD kernels (wasm/step_kernels.ts) against tfjs-wasm's
 * own tf.matMul (XNNPACK) on the same operands, in tfjs-wasm's heap, weights uploaded and warmed
 * first, interleaved medians. GPT-2 small's shapes: the products qkv [768, 2304], up [768, 3072],
 * out [768, 768], down [3072, 768] and the tied logits [50257, 768]ᵀ (XNNPACK on a [768, 50257]
 * copy kept beside the table: tfjs' own `tf.matMul(x, table, false, true)` transposes the whole
 * table per call) for one row (a decoding step), a few rows (2-8: a batch, or a few new tokens)
 * and a prefill (32 and 128 rows); the int8 products on the same shapes; then attention over the
 * cache, layer normalization and gelu (no XNNPACK yardstick: GB/s, values / ns).
 *
 *   npx esbuild bench/step_kernels_bench.ts --bundle --platform=node --format=cjs \
 *     --outfile=bench/.build/step_kernels_bench.cjs --external:@tensorflow/* \
 *     && node bench/.build/step_kernels_bench.cjs [--runs=N] [--shapes=qkv,up,out,down,logits] \
 *          (also smallQkv, smallUp, smallDown, smallLogits: the small GPT-2's shapes)
 *          [--rows=1,2,4,8,32,128] [--no-int8] [--no-others] [--baseline=old.wasm] [--copies=N] [--relaxed] [--kn]
 *
 * `--copies=N`: N copies of each weight (float32 and int8), each call on the next one, so the
 * weights come from memory as in a model whose weights exceed the caches (GPT-2 small's 340 MB
 * of blocks per token) rather than from the L3 cache as one warmed weight does.
 * Float32 products of DENSE_ROWS_FROM rows and more (a prefill) time `denseRows`, as the compiled
 * step runs them (a baseline module without it: `dense`).
 * `--baseline=file.wasm`: another build of wasm/step_kernels.ts (e.g. an older commit's, decoded
 * from its src/kernels/step_kernels_binary.ts) timed beside the current one, interleaved, on the
 * same operands: a before / after in one process.
 * `--relaxed`: the int8 products on relaxed SIMD (TFJS_ATTENTION_RELAXED_SIMD, off by default;
 * Node 20: `node --experimental-wasm-relaxed-simd ...`) where the engine has it, and the plain SIMD module's int8 products timed
 * beside them, interleaved, their outputs checked equal bit for bit. SmolLM2-135M's up projection
 * [576, 1536]: `--shapes=smolUp` (its down projection: smolDown; a 1B model's 2048 x 8192 up and
 * down: wideUp, wideDown).
 * `--kn`: `denseInt8KN` beside them, on the same int8 weights held in Keras' layout `[k, n]` (its
 * own COPIES of them), its outputs checked equal to denseInt8's bit for bit.
 */
import * as fs from 'fs';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {RELAXED_SIMD} from '../src/kernels/flags';
import {StepActivation, type StepKernels} from '../src/kernels/step_kernels_api';
import {stepKernelsFailure, stepKernelsOn, stepKernelsReady} from '../src/kernels/step_kernels';
import {DENSE_ROWS_FROM} from '../src/generate/compiled_step';

interface WasmParts {
  dataIdMap: {get(id: tf.DataId): {memoryOffset: number}};
  wasm: {
    _malloc(n: number): number;
    _free(p: number): void;
    asm?: {memory?: WebAssembly.Memory};
    wasmExports?: {memory?: WebAssembly.Memory};
  };
}

/** The kernels this benchmark calls (the current module's, or a baseline module's exports). */
type Kernels = Pick<
  StepKernels,
  'dense' | 'denseT' | 'quantizeRows' | 'denseInt8' | 'denseTInt8' | 'attend' | 'layerNorm'
> & {
  /** The int8 product on the kernel in Keras' layout (absent from modules before it). */
  denseInt8KN?: StepKernels['denseInt8KN'];
  activate(n: number, x: number, act: StepActivation, out: number): void;
  /** The prefill's product (absent from modules before it): timed for DENSE_ROWS_FROM rows on. */
  denseRows?: StepKernels['denseRows'];
};

const arg = (name: string) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const RUNS = Number(arg('runs') ?? 15);
const SHAPES: Record<string, {k: number; n: number; transposed: boolean}> = {
  qkv: {k: 768, n: 2304, transposed: false},
  up: {k: 768, n: 3072, transposed: false},
  out: {k: 768, n: 768, transposed: false},
  down: {k: 3072, n: 768, transposed: false},
  logits: {k: 768, n: 50257, transposed: true},
  // the small GPT-2 of `npm run bench -- --generate` (4 layers of width 256, vocab 5000)
  smallQkv: {k: 256, n: 768, transposed: false},
  smallUp: {k: 256, n: 1024, transposed: false},
  smallDown: {k: 1024, n: 256, transposed: false},
  smallLogits: {k: 256, n: 5000, transposed: true},
  // SmolLM2-135M's up / gate projection and its down projection
  smolUp: {k: 576, n: 1536, transposed: false},
  smolDown: {k: 1536, n: 576, transposed: false},
  // a 1B model's up and down projections (2048 wide, 8192 inner)
  wideUp: {k: 2048, n: 8192, transposed: false},
  wideDown: {k: 8192, n: 2048, transposed: false},
};
const shapes = (arg('shapes') ?? 'qkv,up,out,down,logits').split(',');
const rowCounts = (arg('rows') ?? '1,2,4,8,32,128').split(',').map(Number);
const INT8 = !process.argv.includes('--no-int8');
const OTHERS = !process.argv.includes('--no-others');
const BASELINE = arg('baseline');
const COPIES = Number(arg('copies') ?? 1);
const KN = process.argv.includes('--kn');

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

/**
 * Median ms of each of `fs` over `runs` runs after 2 (or COPIES) warm-up runs, interleaved (one run of each in
 * turn), so a noisy machine slows every contender alike.
 */
function time(fs: Array<() => void>, runs = RUNS): number[] {
  for (let i = 0; i < Math.max(2, COPIES); i++) fs.forEach((f) => f());
  const ts: number[][] = fs.map(() => []);
  for (let i = 0; i < runs; i++) {
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

const ms = (t: number) => t.toFixed(t < 1 ? 3 : t < 10 ? 2 : 1);
const gbs = (bytes: number, t: number) => (bytes / t / 1e6).toFixed(1);
const gflops = (flops: number, t: number) => (flops / t / 1e6).toFixed(1);

async function main(): Promise<void> {
  await tf.setBackend('wasm');
  await tf.ready();
  if (!(await stepKernelsReady())) throw new Error(`no SIMD kernels: ${stepKernelsFailure()}`);
  const backend = tf.backend() as unknown as WasmParts;
  const memory = (backend.wasm.asm ?? backend.wasm.wasmExports)?.memory;
  if (!(memory instanceof WebAssembly.Memory)) throw new Error('no tfjs-wasm heap');
  tf.env().set(RELAXED_SIMD, process.argv.includes('--relaxed'));
  const chosen = stepKernelsOn(memory)!;
  const K: Kernels = chosen;
  // the plain SIMD module's int8 products beside the relaxed ones, where those run
  const relaxed = chosen.kind === 'simd-relaxed';
  tf.env().set(RELAXED_SIMD, false);
  const plainInt8: Kernels = stepKernelsOn(memory)!;
  const base: Kernels | null =
    BASELINE == null
      ? null
      : (new WebAssembly.Instance(new WebAssembly.Module(fs.readFileSync(BASELINE)), {
          env: {memory},
        }).exports as unknown as Kernels);
  const at = (t: tf.Tensor) => backend.dataIdMap.get(t.dataId).memoryOffset;
  const malloc = (bytes: number) => {
    const p = backend.wasm._malloc(bytes) >>> 0;
    if (p === 0) throw new Error(`no ${bytes} bytes in the heap`);
    return p;
  };
  const heapF32 = (p: number, n: number) => new Float32Array(memory.buffer, p, n);
  const worstOff = (got: Float32Array, ref: Float32Array | Int32Array | Uint8Array) => {
    let worst = 0;
    for (let i = 0; i < ref.length; i++) {
      worst = Math.max(worst, Math.abs(got[i] - ref[i]) / (Math.abs(ref[i]) + 1));
    }
    return worst;
  };

  // the scratch of denseRows (the compiled step allocates one per generate call), 16-aligned
  const rowsWork = (malloc(stepKernelsOn(memory)!.denseRowsWorkBytes + 16) + 15) & ~15;
  const withBase = base != null;
  console.log(
    `medians of ${RUNS} runs, ms (products: GB/s of weights read once; prefill rows also GFLOP/s)`,
  );
  console.log(
    `| shape | rows | tf.matMul (XNNPACK) | ours f32 |${withBase ? ' baseline f32 |' : ''}` +
      `${INT8 ? ' ours int8 (quantize + product) |' : ''}${INT8 && relaxed ? ' ours int8, plain SIMD |' : ''}` +
      `${INT8 && withBase ? ' baseline int8 |' : ''}${INT8 && KN ? ' ours int8, kernel [k, n] |' : ''}`,
  );
  console.log(
    `| --- | ---: | ---: | ---: |${withBase ? ' ---: |' : ''}${INT8 ? ' ---: |' : ''}` +
      `${INT8 && relaxed ? ' ---: |' : ''}${INT8 && withBase ? ' ---: |' : ''}` +
      `${INT8 && KN ? ' ---: |' : ''}`,
  );
  for (const name of shapes) {
    const {k, n, transposed} = SHAPES[name];
    const copies = Array.from({length: COPIES}, (_, c) =>
      tf.tensor2d(fill(k * n, 1 + c), transposed ? [n, k] : [k, n]),
    );
    const w = copies[0];
    // the yardstick of the tied logits: tf.matMul on a [k, n] copy made once
    const wks = transposed ? copies.map((c) => tf.transpose(c)) : copies;
    const wk = wks[0];
    // each contender's next copy, a third of the copies apart (so none reads a copy another
    // contender has just brought into the cache)
    const third = Math.floor(COPIES / 3);
    const next = [0, third, 2 * third];
    // the int8 weights (random bytes: the timing does not depend on the layout), COPIES of them
    const w8s = Array.from({length: COPIES}, () => malloc(k * n));
    for (const w8 of w8s) {
      const heap8 = new Int8Array(memory.buffer, w8, k * n);
      // in [-127, 127], as Keras' quantizer writes int8 weights
      for (let i = 0; i < k * n; i++)
        heap8[i] = Math.max(-127, ((i * 2654435761) >>> 24) - 128) || 1;
    }
    let next8 = 0;
    // --kn: the same weights in Keras' layout [k, n] (each copy the transpose of one above), read
    // in place by denseInt8KN from its own copy, half the copies away from denseInt8's
    const kn = INT8 && KN && !transposed;
    const w8kns = kn
      ? w8s.map((w8) => {
          const d = malloc(k * n);
          chosen.transposeInt8(n, k, w8, d, n);
          return d;
        })
      : [];
    let nextKN = Math.floor(COPIES / 2);
    const ws = malloc(4 * n);
    heapF32(ws, n).fill(100);
    for (const rows of rowCounts) {
      if (transposed && rows > 32) continue; // 128 rows of logits: a prefill computes one
      const x = tf.tensor2d(fill(rows * k, 2), [rows, k]);
      const out = malloc(4 * rows * n);
      const q = malloc(rows * k);
      const qs = malloc(4 * rows);
      const f32 =
        (L: Kernels, c = -1) =>
        () => {
          const wc = c < 0 ? w : copies[next[c]++ % COPIES];
          if (transposed) L.denseT(rows, k, n, at(x), at(wc), out);
          else if (rows >= DENSE_ROWS_FROM && L.denseRows != null) {
            L.denseRows(rows, k, n, at(x), at(wc), 0, StepActivation.None, out, rowsWork);
          } else L.dense(rows, k, n, at(x), at(wc), 0, StepActivation.None, out);
        };
      const int8 = (L: Kernels) => () => {
        L.quantizeRows(rows, k, at(x), q, qs);
        const w8 = w8s[next8++ % COPIES];
        if (transposed) L.denseTInt8(rows, k, n, q, qs, w8, ws, out);
        else L.denseInt8(rows, k, n, q, qs, w8, ws, 0, StepActivation.None, out);
      };
      const fns = [() => tf.matMul(x, wks[next[0]++ % COPIES]).dispose(), f32(K, 1)];
      if (base) fns.push(f32(base, 2));
      if (INT8) fns.push(int8(K));
      if (INT8 && relaxed) fns.push(int8(plainInt8));
      if (INT8 && base) fns.push(int8(base));
      const int8KN = () => {
        K.quantizeRows(rows, k, at(x), q, qs);
        const w8 = w8kns[nextKN++ % COPIES];
        K.denseInt8KN!(rows, k, n, q, qs, w8, ws, 0, StepActivation.None, out);
      };
      if (kn) fns.push(int8KN);
      const runs = rows * k * n > 1e9 ? Math.min(RUNS, 5) : RUNS;
      const ts = time(fns, runs);
      // agreement with tf.matMul (the benchmark times what it checks), both modules
      const ref = tf.matMul(x, wk);
      const want = ref.dataSync() as Float32Array;
      ref.dispose();
      for (const L of base ? [K, base] : [K]) {
        heapF32(out, rows * n).fill(NaN);
        f32(L)();
        const off = worstOff(heapF32(out, rows * n), want);
        if (!(off <= 1e-5)) throw new Error(`${name} rows ${rows}: off tf.matMul by ${off}`);
      }
      if (INT8 && relaxed) {
        int8(K)();
        const got = new Uint32Array(memory.buffer, out, rows * n).slice();
        int8(plainInt8)();
        const want8 = new Uint32Array(memory.buffer, out, rows * n);
        if (got.some((v, i) => v !== want8[i])) {
          throw new Error(`${name} rows ${rows}: relaxed and plain int8 products differ`);
        }
      }
      if (kn) {
        // the kernel [k, n] gives denseInt8's results on its transpose, bit for bit
        K.quantizeRows(rows, k, at(x), q, qs);
        K.denseInt8(rows, k, n, q, qs, w8s[0], ws, 0, StepActivation.None, out);
        const viaT = new Uint32Array(memory.buffer, out, rows * n).slice();
        K.denseInt8KN!(rows, k, n, q, qs, w8kns[0], ws, 0, StepActivation.None, out);
        const got = new Uint32Array(memory.buffer, out, rows * n);
        if (got.some((v, i) => v !== viaT[i])) {
          throw new Error(`${name} rows ${rows}: denseInt8KN differs from denseInt8`);
        }
      }
      const shape = transposed ? `[${rows},${k}]x[${n},${k}]ᵀ` : `[${rows},${k}]x[${k},${n}]`;
      const cell = (t: number, bytes: number) =>
        `${ms(t)} (${gbs(bytes, t)} GB/s${rows >= 32 ? `, ${gflops(2 * rows * k * n, t)} GFLOP/s` : ''})`;
      const cells = [cell(ts[0], 4 * k * n), cell(ts[1], 4 * k * n)];
      let i = 2;
      if (base) cells.push(cell(ts[i++], 4 * k * n));
      if (INT8) cells.push(cell(ts[i++], k * n));
      if (INT8 && relaxed) cells.push(cell(ts[i++], k * n));
      if (INT8 && base) cells.push(cell(ts[i++], k * n));
      if (INT8 && KN) cells.push(kn ? cell(ts[i++], k * n) : '-');
      console.log(`| ${name} ${shape} | ${rows} | ${cells.join(' | ')} |`);
      x.dispose();
      for (const p of [out, q, qs]) backend.wasm._free(p);
    }
    for (const c of copies) c.dispose();
    if (transposed) for (const c of wks) c.dispose();
    for (const w8 of [...w8s, ...w8kns]) backend.wasm._free(w8);
    backend.wasm._free(ws);
  }
  if (!OTHERS) return;

  // attention over the cache: GPT-2 small's 12 heads of 64, a cache of 1024 positions
  const heads = 12;
  const headDim = 64;
  const maxLength = 1024;
  const width = heads * headDim;
  const kc = tf.tensor1d(fill(maxLength * width, 3));
  const vc = tf.tensor1d(fill(maxLength * width, 4));
  const work = malloc(maxLength * 4);
  console.log('\n| kernel | case | ours | baseline |');
  console.log('| --- | --- | ---: | ---: |');
  const row = (
    kernel: string,
    what: string,
    fns: Array<() => void>,
    unit: (t: number) => string,
  ) => {
    const ts = time(fns);
    console.log(
      `| ${kernel} | ${what} | ${ts.map((t) => `${ms(t)} (${unit(t)})`).join(' | ')}${base ? '' : ' | -'} |`,
    );
  };
  for (const [t, start] of [
    [1, 127],
    [1, 511],
    [32, 0],
    [128, 0],
  ]) {
    const q = tf.tensor1d(fill(t * width, 5));
    const out = malloc(t * width * 4);
    const call = (L: Kernels) => () =>
      L.attend(
        1,
        t,
        heads,
        heads,
        headDim,
        maxLength,
        start,
        at(q),
        at(kc),
        at(vc),
        0,
        0.125,
        work,
        out,
      );
    const keys = start + t;
    // bytes of keys and values read (each query reads its prefix)
    const bytes = 2 * 4 * width * (t === 1 ? keys : (t * (t + 1)) / 2);
    row(
      'attend',
      `${t} ${t === 1 ? 'query' : 'queries'}, ${keys} keys, 12 x 64`,
      base ? [call(K), call(base)] : [call(K)],
      (tt) => `${gbs(bytes, tt)} GB/s`,
    );
    q.dispose();
    backend.wasm._free(out);
  }
  kc.dispose();
  vc.dispose();
  backend.wasm._free(work);
  for (const rows of [1, 32]) {
    const dim = 768;
    const x = tf.tensor1d(fill(rows * dim, 6));
    const g = tf.tensor1d(fill(dim, 7));
    const b = tf.tensor1d(fill(dim, 8));
    const out = malloc(rows * dim * 4);
    const call = (L: Kernels) => () => L.layerNorm(rows, dim, at(x), at(g), at(b), 1e-5, out);
    row(
      'layerNorm',
      `${rows} x ${dim}`,
      base ? [call(K), call(base)] : [call(K)],
      (t) => `${gbs(rows * dim * 4, t)} GB/s`,
    );
    for (const g2 of [x, g, b]) g2.dispose();
    backend.wasm._free(out);
  }
  for (const [act, label] of [
    [StepActivation.GeluTanh, 'gelu tanh'],
    [StepActivation.GeluErf, 'gelu erf'],
  ] as const) {
    for (const n of [3072, 32 * 3072]) {
      const x = tf.tensor1d(fill(n, 9).map((v) => v * 30));
      const out = malloc(n * 4);
      const call = (L: Kernels) => () => L.activate(n, at(x), act, out);
      row(
        `activate`,
        `${label}, ${n} values`,
        base ? [call(K), call(base)] : [call(K)],
        (t) => `${(n / t / 1e6).toFixed(2)} values/ns`,
      );
      x.dispose();
      backend.wasm._free(out);
    }
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
