/**
 * `npm run bench`: MultiHeadAttention against the GEMM floor, a naive d2l-style matMul port and
 * tfjs-layers' unexported MultiHeadAttention, in one process, interleaved, on the same inputs.
 * Writes bench/results.json and the table in bench/README.md.
 *
 * Contenders per backend and size:
 * - floor: the six GEMMs of attention (q, k, v projections, scores, weighted values, output
 *   projection) on operands already in the layout each GEMM wants;
 * - ours: MultiHeadAttention.apply, unmasked and with valid lengths;
 * - naive: a plain port of the d2l layer (Dense-style matMuls, transpose_qkv, bmm,
 *   where-masked softmax), unmasked and with valid lengths;
 * - tfjs-layers: its unexported einsum MultiHeadAttention (forward only, one run: it is slow);
 * - training steps: the gradients of every weight for a given output gradient, ours and naive.
 */
import {execSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {MultiHeadAttention} from '../src';
import {queryBlocks} from '../src/ops/attention_core';
import {mm} from '../src/kernels/matmul';

import {additiveMask, attentionModel, closeness} from './onnx_attention';

interface Size {
  name: string;
  batch: number;
  tokens: number;
  width: number;
  heads: number;
}

const SIZES: Size[] = [
  {name: 'small', batch: 8, tokens: 32, width: 64, heads: 4},
  {name: 'medium', batch: 4, tokens: 128, width: 256, heads: 8},
  {name: 'long', batch: 1, tokens: 2048, width: 128, heads: 4},
];

const RUNS = Number(process.env.BENCH_RUNS ?? 7);
const WARMUP = 2;

interface Stat {
  min: number;
  median: number;
  max: number;
  runs: number;
  peakBytes: number;
}

function stats(times: number[], peakBytes: number): Stat {
  const s = [...times].sort((a, b) => a - b);
  return {
    min: s[0],
    median: s[Math.floor(s.length / 2)],
    max: s[s.length - 1],
    runs: s.length,
    peakBytes,
  };
}

type Contender = {name: string; fn: () => void | Promise<void>; runs?: number};

function rand(shape: number[], seed: number): tf.Tensor {
  return tf.randomNormal(shape, 0, 0.5, 'float32', seed);
}

/** The d2l MultiHeadAttention, ported with plain matMuls (bias on, as Keras' default). */
function naive(size: Size, w: tf.Tensor[], x: tf.Tensor, lens: tf.Tensor | null): tf.Tensor {
  return tf.tidy(() => {
    const {batch: B, tokens: T, width: D, heads: H} = size;
    const d = D / H;
    const [wq, bq, wk, bk, wv, bv, wo, bo] = w; // kernels [D, H, d] / [H, d, D]
    const x2 = tf.reshape(x, [B * T, D]);
    const proj = (k: tf.Tensor, b: tf.Tensor) =>
      tf.transpose(
        tf.reshape(tf.add(tf.matMul(x2, tf.reshape(k, [D, D])), tf.reshape(b, [D])), [B, T, H, d]),
        [0, 2, 1, 3],
      );
    const q = tf.reshape(proj(wq, bq), [B * H, T, d]);
    const k = tf.reshape(proj(wk, bk), [B * H, T, d]);
    const v = tf.reshape(proj(wv, bv), [B * H, T, d]);
    let scores = tf.div(tf.matMul(q, k, false, true), Math.sqrt(d)); // [B*H, T, T]
    if (lens != null) {
      const valid = tf.less(
        tf.range(0, T, 1, 'int32'),
        tf.reshape(tf.tile(tf.reshape(lens, [B, 1]), [1, H]), [B * H, 1, 1]),
      );
      scores = tf.where(valid, scores, tf.scalar(-1e6));
    }
    const att = tf.matMul(tf.softmax(scores), v); // [B*H, T, d]
    const concat = tf.reshape(tf.transpose(tf.reshape(att, [B, H, T, d]), [0, 2, 1, 3]), [
      B * T,
      D,
    ]);
    return tf.reshape(tf.add(tf.matMul(concat, tf.reshape(wo, [D, D])), bo), [B, T, D]);
  });
}

/**
 * The six GEMMs alone, on operands already in the layout each product wants: `x [B*T, D]` times
 * four `[D, D]` kernels (q, k, v, output projections), and per head `q [T, d] . kᵀ [d, T]` and
 * `p [T, T] . v [T, d]`. Each formulation below multiplies exactly these; the floor of a table is
 * the fastest of them there.
 */
function floorOperands(size: Size) {
  const {batch: B, tokens: T, width: D, heads: H} = size;
  const d = D / H;
  const q = rand([B * H, T, d], 6);
  const kt = rand([B * H, d, T], 7);
  const p = tf.softmax(rand([B * H, T, T], 8));
  const v = rand([B * H, T, d], 9);
  // query blocks as the layer cuts them (none below its threshold: one block)
  const blocks = queryBlocks(B * H, T, T, null);
  const qs = tf.unstack(q);
  const ps = tf.unstack(p);
  return {
    x: rand([B * T, D], 1),
    w: [rand([D, D], 2), rand([D, D], 3), rand([D, D], 4), rand([D, D], 5)],
    q,
    kt,
    p,
    v,
    o: rand([B * T, D], 10),
    // per head: [T, d], [d, T], [T, T], [T, d]
    qs,
    kts: tf.unstack(kt),
    ps,
    vs: tf.unstack(v),
    blockSize: blocks[0][1] - blocks[0][0],
    // per head and query block: q [c, d] and p [c, T]
    qBlocks:
      blocks.length > 1
        ? qs.map((x) => blocks.map(([s, e]) => tf.slice(x, [s, 0], [e - s, d])))
        : [],
    pBlocks:
      blocks.length > 1
        ? ps.map((x) => blocks.map(([s, e]) => tf.slice(x, [s, 0], [e - s, T])))
        : [],
  };
}
type FloorOperands = ReturnType<typeof floorOperands>;

/**
 * The floor formulations. wasm and cpu run each product when it is called, so only the last
 * product's result is read (as the layer's output is); every intermediate is disposed.
 */
const FLOORS: Array<{
  name: string;
  fn: (o: FloorOperands) => void;
  when?: (o: FloorOperands) => boolean;
}> = [
  {
    name: 'batched [B*H] products',
    fn: (o) => floorWith(o, () => [tf.matMul(o.q, o.kt), tf.matMul(o.p, o.v)]),
  },
  {
    // the package's own product (its WebAssembly SIMD sgemm where it loads, else tf.matMul)
    name: 'batched [B*H] products, own SIMD product',
    fn: (o) => floorWith(o, () => [mm(o.q, o.kt), mm(o.p, o.v)], mm),
  },
  {
    name: '2-D products per head, own SIMD product',
    fn: (o) =>
      floorWith(
        o,
        () => [...o.qs.map((q, i) => mm(q, o.kts[i])), ...o.ps.map((p, i) => mm(p, o.vs[i]))],
        mm,
      ),
  },
  {
    name: '2-D products per head',
    fn: (o) =>
      floorWith(o, () => [
        ...o.qs.map((q, i) => tf.matMul(q, o.kts[i])),
        ...o.ps.map((p, i) => tf.matMul(p, o.vs[i])),
      ]),
  },
  {
    name: '2-D products per head and query block',
    fn: (o) =>
      floorWith(o, () =>
        o.qBlocks.flatMap((qb, i) => [
          ...qb.map((q) => tf.matMul(q, o.kts[i])),
          ...o.pBlocks[i].map((p) => tf.matMul(p, o.vs[i])),
        ]),
      ),
    when: (o) => o.qBlocks.length > 0,
  },
];

function floorWith(
  ops: FloorOperands,
  attention: () => tf.Tensor[],
  product: (a: tf.Tensor, b: tf.Tensor) => tf.Tensor = (a, b) => tf.matMul(a, b),
): void {
  tf.tidy(() => {
    product(ops.x, ops.w[0]);
    product(ops.x, ops.w[1]);
    product(ops.x, ops.w[2]);
    attention();
    product(ops.o, ops.w[3]).dataSync();
  });
}

function loadTfjsLayersMha():
  | (new (args: {numHeads: number; keyDim: number}) => {
      call: (q: tf.Tensor, kw: object) => tf.Tensor;
      queryDense: {setWeights: (w: tf.Tensor[]) => void};
      keyDense: {setWeights: (w: tf.Tensor[]) => void};
      valueDense: {setWeights: (w: tf.Tensor[]) => void};
      outputDense: {setWeights: (w: tf.Tensor[]) => void};
    })
  | null {
  const file = path.join(__dirname, 'tfjs_layers_mha.cjs'); // built by bench/run.mjs
  if (!fs.existsSync(file)) return null;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(file).MultiHeadAttention;
}

async function time(fn: () => void | Promise<void>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

/** Peak bytes of tensors allocated during `fn` (tf.profile), above what was allocated before. */
async function peakOf(fn: () => void): Promise<number> {
  const before = tf.memory().numBytes;
  const p = await tf.profile(() => {
    fn();
  });
  return p.peakBytes - before;
}

/** Where one call's time goes: kernel time per kernel name (most first), from tf.profile. */
interface Profile {
  /** the call's wall time under the profiler, ms */
  wallMs: number;
  /** kernel time of every kernel, ms (the rest of wallMs: op dispatch, JavaScript, reads) */
  kernelMs: number;
  kernels: Array<{name: string; calls: number; ms: number}>;
}

async function profileOf(fn: () => void): Promise<Profile> {
  const t0 = performance.now();
  const p = await tf.profile(() => {
    fn();
  });
  const wallMs = performance.now() - t0;
  const by = new Map<string, {calls: number; ms: number}>();
  for (const k of p.kernels) {
    // customGrad scopes contain kernels that are listed themselves
    if (k.name === 'unnamed scope') continue;
    const e = by.get(k.name) ?? {calls: 0, ms: 0};
    e.calls += 1;
    e.ms += typeof k.kernelTimeMs === 'number' ? k.kernelTimeMs : 0;
    by.set(k.name, e);
  }
  const kernels = [...by].map(([name, e]) => ({name, ...e})).sort((a, b) => b.ms - a.ms);
  return {wallMs, kernelMs: kernels.reduce((t, k) => t + k.ms, 0), kernels};
}

// --- onnxruntime -------------------------------------------------------------------------------

interface OrtTensor {
  data: unknown;
}
interface OrtSession {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release(): Promise<void>;
}
interface Ort {
  Tensor: new (type: 'float32', data: Float32Array, dims: number[]) => OrtTensor;
  InferenceSession: {create(model: Uint8Array, options: object): Promise<OrtSession>};
  env: {wasm: {numThreads: number}};
}

/** onnxruntime-node (native, CPU execution provider) and onnxruntime-web (its wasm backend). */
const RUNTIMES: Array<{name: string; module: string; options: object}> = [
  {
    name: 'onnxruntime-node',
    module: 'onnxruntime-node',
    options: {executionProviders: ['cpu'], intraOpNumThreads: 1, interOpNumThreads: 1},
  },
  {
    name: 'onnxruntime-web (wasm)',
    module: 'onnxruntime-web',
    options: {executionProviders: ['wasm']},
  },
];

const loaded = new Map<string, Ort>();
function ortModule(name: string): Ort {
  let m = loaded.get(name);
  if (m == null) {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    m = require(name) as Ort;
    m.env.wasm.numThreads = 1; // onnxruntime-web single-threaded, as tfjs runs here
    loaded.set(name, m);
  }
  return m;
}

function gc(): void {
  (globalThis as {gc?: () => void}).gc?.();
}

/** Every row of the tables: the anchor, onnxruntime-node's forward pass, is 'onnxruntime-node'. */
const ANCHOR = 'onnxruntime-node';

const failures: string[] = [];
/** Aborts the whole run unless `got` equals `want` within 1e-5 absolute + 1e-5 relative. */
function checkSame(what: string, got: ArrayLike<number>, want: ArrayLike<number>): void {
  const c = closeness(got, want);
  const line = `${what}: max |diff| / (1e-5 + 1e-5 |ours|) = ${c.toFixed(3)}`;
  console.log(`check ${line}`);
  if (!(c <= 1)) {
    failures.push(line);
    throw new Error(`OUTPUT MISMATCH, aborting the benchmark: ${line}`);
  }
}

const checks: string[] = [];
const notes: string[] = [];
const wholeLayers: MultiHeadAttention[] = [];

interface Row {
  backend: string;
  size: string;
  contender: string;
  stat: Stat;
  /** median / the fastest floor formulation's median */
  ratio: number | null;
  /** median / onnxruntime-node's median, same backend pass and size */
  ratioOrt: number | null;
  /** what `stat.peakBytes` measures: 'tensors' (tf.profile) or 'rss' (process RSS growth) */
  memory: 'tensors' | 'rss' | 'none';
  /** floor rows: whether this formulation is the floor */
  floor?: boolean;
  /** ours forward and training step: where one call's time went */
  profile?: Profile;
}

async function benchSize(backend: string, size: Size, rows: Row[]): Promise<void> {
  const {batch: B, tokens: T, width: D, heads: H} = size;
  const x = rand([B, T, D], 11);
  const lens = tf.tensor1d(
    Array.from({length: B}, (_, i) =>
      Math.max(1, Math.round(T * (0.5 + (0.5 * i) / Math.max(1, B - 1)))),
    ),
    'int32',
  );
  const mha = new MultiHeadAttention({numHeads: H, keyDim: D / H});
  tf.dispose(mha.apply(x) as tf.Tensor);
  const weights = mha.getWeights().map((w) => w.clone()); // getWeights returns the variables themselves
  const vars = mha.trainableWeights.map((v) => v.read() as tf.Variable);
  const g = rand([B, T, D], 12);
  const ops = floorOperands(size);
  const naiveVars = weights.map((w) => tf.variable(w));
  const ours = (mha.apply(x) as tf.Tensor).dataSync() as Float32Array;
  const oursMasked = (mha.apply(x, {validLens: lens}) as tf.Tensor).dataSync() as Float32Array;
  const where = `${backend} ${size.name}`;

  // onnxruntime sessions on the layer's weights; memory = RSS growth over creation + first run
  const ortContenders: Array<Contender & {rss: number}> = [];
  const sessions: OrtSession[] = [];
  const wData = weights.map((w) => w.dataSync() as Float32Array);
  const xData = x.dataSync() as Float32Array;
  const maskData = additiveMask(lens.dataSync(), T);
  for (const rt of RUNTIMES) {
    const ort = ortModule(rt.module);
    for (const masked of [false, true]) {
      const name = rt.name + (masked ? ', valid lengths' : '');
      const feeds: Record<string, OrtTensor> = {x: new ort.Tensor('float32', xData, [B, T, D])};
      if (masked) feeds.mask = new ort.Tensor('float32', maskData, [B, 1, 1, T]);
      gc();
      const before = process.memoryUsage().rss;
      const session = await ort.InferenceSession.create(
        attentionModel(size, wData, {mask: masked}),
        rt.options,
      );
      const out = (await session.run(feeds)).y.data as Float32Array;
      const rss = process.memoryUsage().rss - before;
      sessions.push(session);
      checkSame(`${where} ${name} vs ours`, out, masked ? oursMasked : ours);
      ortContenders.push({
        name,
        fn: async () => {
          const y = (await session.run(feeds)).y.data as Float32Array;
          if (y.length !== xData.length) throw new Error(`${name}: wrong output size`);
        },
        rss,
      });
    }
  }
  checkSame(`${where} naive forward vs ours`, naive(size, weights, x, null).dataSync(), ours);
  checkSame(
    `${where} naive forward, valid lengths vs ours`,
    naive(size, weights, x, lens).dataSync(),
    oursMasked,
  );

  // The gradients of every weight for the output gradient g, given directly: those of the loss
  // sum(y * g), without that loss' own tfjs ops (a broadcast multiply of the scalar's gradient
  // alone took ~15 ms of the medium step on cpu), which any loss costs whatever the layer.
  const step = (f: () => tf.Tensor, vs: tf.Variable[]) => () => {
    const {value, grads} = tf.engine().gradients(f, vs, g);
    value.dataSync();
    tf.dispose([value, ...grads]);
  };
  const fwd = (f: () => tf.Tensor) => () => {
    const y = f();
    y.dataSync();
    y.dispose();
  };
  // The long size: no naive training step nor masked naive forward (~7 s and ~4 s a run), so the
  // whole benchmark stays within 8 minutes on 2 cores (the long size runs on wasm only, see main).
  const long = size.name === 'long';
  const floors = FLOORS.filter((f) => f.when?.(ops) ?? true).map((f) => ({
    name: `floor: ${f.name}`,
    fn: () => f.fn(ops),
  }));
  const all: Array<Contender & {skip?: boolean}> = [
    ...floors,
    ...ortContenders,
    {name: 'ours forward', fn: fwd(() => mha.apply(x) as tf.Tensor)},
    {
      name: 'ours forward, valid lengths',
      fn: fwd(() => mha.apply(x, {validLens: lens}) as tf.Tensor),
    },
    {name: 'naive forward', fn: fwd(() => naive(size, weights, x, null))},
    {
      name: 'naive forward, valid lengths',
      fn: fwd(() => naive(size, weights, x, lens)),
      skip: long,
    },
    {
      name: 'ours training step',
      fn: step(() => mha.apply(x, {training: true}) as tf.Tensor, vars),
    },
    {
      name: 'ours training step, valid lengths',
      fn: step(() => mha.apply(x, {training: true, validLens: lens}) as tf.Tensor, vars),
    },
    {
      name: 'naive training step',
      fn: step(() => naive(size, naiveVars, x, null), naiveVars),
      skip: long,
    },
  ];
  const contenders: Contender[] = all.filter((c) => !c.skip);
  if (long) {
    const whole = new MultiHeadAttention({numHeads: H, keyDim: D / H, chunkSize: 0});
    tf.dispose(whole.apply(x) as tf.Tensor);
    whole.setWeights(weights);
    const at = contenders.findIndex((c) => c.name === 'ours forward') + 1;
    contenders.splice(at, 0, {
      name: 'ours forward, whole (chunkSize 0)',
      fn: fwd(() => whole.apply(x) as tf.Tensor),
    });
    wholeLayers.push(whole);
    // the blocked and the whole layer agree: outputs and the gradient of the input
    const diff = tf.tidy(() => {
      const gradOf = (layer: MultiHeadAttention) =>
        tf.grad((t: tf.Tensor) => tf.sum(tf.mul(layer.apply(t) as tf.Tensor, g)))(x);
      const out = tf
        .max(tf.abs(tf.sub(mha.apply(x) as tf.Tensor, whole.apply(x) as tf.Tensor)))
        .dataSync()[0];
      const grad = tf.max(tf.abs(tf.sub(gradOf(mha), gradOf(whole)))).dataSync()[0];
      return {out, grad};
    });
    checks.push(
      `${backend} long: query blocks vs whole attention: max |output diff| ${diff.out.toExponential(1)}, max |input-gradient diff| ${diff.grad.toExponential(1)}`,
    );
  }
  const Tl = loadTfjsLayersMha();
  if (Tl && backend === 'cpu' && !long) {
    const tl = new Tl({numHeads: H, keyDim: D / H});
    // builds on one token (a full call takes ~30 s on cpu at the medium size)
    const one = tf.slice(x, [0, 0, 0], [1, 1, D]);
    tf.dispose([tl.call(one, {value: one}), one]);
    // its sublayers hold the weights (the layer itself lists none)
    const parts = [tl.queryDense, tl.keyDense, tl.valueDense, tl.outputDense];
    parts.forEach((p, i) => p.setWeights(weights.slice(2 * i, 2 * i + 2)));
    checkSame(
      `${where} tfjs-layers MultiHeadAttention vs ours`,
      tl.call(x, {value: x}).dataSync(),
      ours,
    );
    contenders.push({
      name: 'tfjs-layers MultiHeadAttention forward (einsum)',
      fn: fwd(() => tl.call(x, {value: x})),
      runs: 1,
    });
  }
  const warm = new Map<string, number>();
  for (const c of contenders) {
    for (let i = 0; i < (c.runs === 1 ? 0 : WARMUP); i++) warm.set(c.name, await time(c.fn));
  }
  // a floor formulation over 2x the fastest one in warm-up is timed once (it cannot be the floor)
  const fastestWarm = Math.min(...floors.map((f) => warm.get(f.name)!));
  for (const c of contenders) {
    if (c.name.startsWith('floor: ') && warm.get(c.name)! > 2 * fastestWarm) c.runs = 1;
  }
  const times = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
  for (let r = 0; r < RUNS; r++) {
    for (const c of contenders) {
      if (c.runs !== undefined && r >= c.runs) continue;
      times.get(c.name)!.push(await time(c.fn));
    }
  }
  const medianOf = (name: string) => stats(times.get(name)!, 0).median;
  const floorName = floors
    .map((f) => f.name)
    .filter((f) => contenders.find((c) => c.name === f)!.runs === undefined)
    .sort((a, b) => medianOf(a) - medianOf(b))[0];
  const floorMedian = medianOf(floorName);
  const anchorMedian = medianOf(ANCHOR);
  for (const c of contenders) {
    const isOrt = ortContenders.find((o) => o.name === c.name);
    const isFloor = c.name.startsWith('floor: ');
    const peak = isOrt ? isOrt.rss : await peakOf(c.fn as () => void);
    const s = stats(times.get(c.name)!, peak);
    const row: Row = {
      backend,
      size: size.name,
      contender: c.name,
      stat: s,
      ratio: s.median / floorMedian,
      ratioOrt: s.median / anchorMedian,
      memory: isOrt ? 'rss' : 'tensors',
      ...(isFloor ? {floor: c.name === floorName} : {}),
      ...(c.name === 'ours forward' || c.name === 'ours training step'
        ? {profile: await profileOf(c.fn as () => void)}
        : {}),
    };
    rows.push(row);
    console.log(
      `${backend.padEnd(5)} ${size.name.padEnd(6)} ${c.name.padEnd(48)} median ${s.median.toFixed(1).padStart(8)} ms ` +
        `(min ${s.min.toFixed(1)}, max ${s.max.toFixed(1)}, n=${s.runs})  ${row.ratio!.toFixed(2)}x floor  ` +
        `${row.ratioOrt!.toFixed(2)}x ort-node  ${isOrt ? 'rss' : 'peak'} ${(s.peakBytes / 2 ** 20).toFixed(1)} MiB`,
    );
  }
  for (const s of sessions) await s.release();
  tf.dispose([x, lens, g, ...weights, ...naiveVars]);
  tf.dispose(
    Object.values(ops)
      .flat(2)
      .filter((t): t is tf.Tensor => t instanceof tf.Tensor),
  );
  mha.dispose();
  for (const w of wholeLayers.splice(0)) w.dispose();
}

/** TensorFlow's intra-op threads in this run (tfjs-node), for the tables. */
let tfThreads: string | undefined;

/** tfjs-node's `tensorflow` backend, when @tensorflow/tfjs-node is installed (it usually is not). */
function tryTensorflowBackend(): boolean {
  // one thread, as every other contender (TensorFlow reads these when tfjs-node loads; a user's
  // own setting is kept)
  process.env.TF_NUM_INTRAOP_THREADS ??= '1';
  process.env.TF_NUM_INTEROP_THREADS ??= '1';
  tfThreads = process.env.TF_NUM_INTRAOP_THREADS;
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('@tensorflow/tfjs-node');
    return tf.findBackend('tensorflow') != null;
  } catch (e) {
    notes.push(
      `tensorflow backend skipped: @tensorflow/tfjs-node did not load (${String((e as Error).message).split('\n')[0]})`,
    );
    return false;
  }
}

async function main(): Promise<void> {
  const backends = (process.env.BENCH_BACKENDS ?? 'wasm,cpu,tensorflow').split(',');
  const sizes = SIZES.filter((s) =>
    (process.env.BENCH_SIZES ?? 'small,medium,long').split(',').includes(s.name),
  );
  const rows: Row[] = [];
  const t0 = Date.now();
  // load both onnxruntimes (native library, wasm module) before any memory is measured
  const warm = SIZES[0];
  const warmWeights = [0, 1, 2, 3, 4, 5, 6, 7].map(
    (i) => new Float32Array(i % 2 === 0 ? warm.width * warm.width : warm.width),
  );
  for (const rt of RUNTIMES) {
    const ort = ortModule(rt.module);
    const s = await ort.InferenceSession.create(attentionModel(warm, warmWeights), rt.options);
    const n = warm.batch * warm.tokens * warm.width;
    await s.run({
      x: new ort.Tensor('float32', new Float32Array(n), [warm.batch, warm.tokens, warm.width]),
    });
    await s.release();
  }
  for (const backend of backends) {
    if (backend === 'tensorflow' && !tryTensorflowBackend()) continue;
    await tf.setBackend(backend);
    await tf.ready();
    for (const size of sizes) {
      await benchSize(backend, size, rows);
    }
  }
  const out = {
    date: new Date().toISOString(),
    node: process.version,
    machine: `${os.cpus()[0]?.model ?? 'unknown cpu'}, ${os.cpus().length} cores, ${os.platform()} ${os.arch()}`,
    commit: gitCommit(),
    tfjs: tf.version.tfjs,
    runs: RUNS,
    warmup: WARMUP,
    seconds: (Date.now() - t0) / 1000,
    ort: {node: packageVersion('onnxruntime-node'), web: packageVersion('onnxruntime-web')},
    ...(tfThreads != null ? {tfThreads} : {}),
    rows,
    checks,
    notes,
  };
  for (const c of [...checks, ...notes]) console.log(c);
  fs.writeFileSync(path.join(__dirname, '..', 'results.json'), JSON.stringify(out, null, 1));
  console.log(`done in ${out.seconds.toFixed(0)}s; wrote bench/results.json`);
}

/** The commit benchmarked, with "+changes" when the work tree differs from it. */
function gitCommit(): string {
  try {
    const head = execSync('git rev-parse --short HEAD', {encoding: 'utf8'}).trim();
    const dirty = execSync('git status --porcelain -- src bench package.json', {encoding: 'utf8'})
      .split('\n')
      .filter(
        (l) =>
          l.trim() !== '' && !/bench\/(README\.md|results\.json|generate_results\.json)$/.test(l),
      );
    return dirty.length > 0 ? `${head}+changes` : head;
  } catch {
    return 'unknown';
  }
}

function packageVersion(name: string): string {
  const file = path.join(__dirname, '..', '..', 'node_modules', name, 'package.json');
  return JSON.parse(fs.readFileSync(file, 'utf8')).version;
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
