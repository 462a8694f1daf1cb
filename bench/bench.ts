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
 * - training steps: loss and the gradients of every weight, for ours and naive.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {MultiHeadAttention} from '../src';

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

type Contender = {name: string; fn: () => void; runs?: number};

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

/** The six GEMMs alone, on pre-shaped operands. */
function floorOperands(size: Size) {
  const {batch: B, tokens: T, width: D, heads: H} = size;
  const d = D / H;
  return {
    x: rand([B * T, D], 1),
    w: [rand([D, D], 2), rand([D, D], 3), rand([D, D], 4), rand([D, D], 5)],
    q: rand([B * H, T, d], 6),
    kt: rand([B * H, d, T], 7),
    p: tf.softmax(rand([B * H, T, T], 8)),
    v: rand([B * H, T, d], 9),
    o: rand([B * T, D], 10),
  };
}

function floor(ops: ReturnType<typeof floorOperands>): void {
  tf.tidy(() => {
    const outs = [
      tf.matMul(ops.x, ops.w[0]),
      tf.matMul(ops.x, ops.w[1]),
      tf.matMul(ops.x, ops.w[2]),
      tf.matMul(ops.q, ops.kt),
      tf.matMul(ops.p, ops.v),
      tf.matMul(ops.o, ops.w[3]),
    ];
    for (const o of outs) o.dataSync();
  });
}

function loadTfjsLayersMha():
  | (new (args: {numHeads: number; keyDim: number}) => {
      call: (q: tf.Tensor, kw: object) => tf.Tensor;
    })
  | null {
  const file = path.join(__dirname, 'tfjs_layers_mha.cjs'); // built by bench/run.mjs
  if (!fs.existsSync(file)) return null;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(file).MultiHeadAttention;
}

function time(fn: () => void): number {
  const t0 = performance.now();
  fn();
  return performance.now() - t0;
}

/** Peak bytes allocated during `fn`, above what was allocated before it. */
async function peakOf(fn: () => void): Promise<number> {
  const before = tf.memory().numBytes;
  const p = await tf.profile(() => {
    fn();
  });
  return p.peakBytes - before;
}

const checks: string[] = [];
const wholeLayers: MultiHeadAttention[] = [];

interface Row {
  backend: string;
  size: string;
  contender: string;
  stat: Stat;
  ratio: number | null;
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

  const step = (f: () => tf.Tensor, vs: tf.Variable[]) => () => {
    const {value, grads} = tf.variableGrads(() => tf.sum(tf.mul(f(), g)) as tf.Scalar, vs);
    value.dataSync();
    tf.dispose([value, ...Object.values(grads)]);
  };
  const fwd = (f: () => tf.Tensor) => () => {
    const y = f();
    y.dataSync();
    y.dispose();
  };
  // The long size: no naive training step nor masked naive forward (~7 s and ~4 s a run), so the
  // whole benchmark stays within 10 minutes on 2 cores (the long size runs on wasm only, see main).
  const long = size.name === 'long';
  const training = true;
  const all: Array<Contender & {skip?: boolean}> = [
    {name: 'floor (6 GEMMs)', fn: () => floor(ops)},
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
      skip: !training,
    },
    {
      name: 'ours training step, valid lengths',
      fn: step(() => mha.apply(x, {training: true, validLens: lens}) as tf.Tensor, vars),
      skip: !training,
    },
    {
      name: 'naive training step',
      fn: step(() => naive(size, naiveVars, x, null), naiveVars),
      skip: long,
    },
  ];
  const contenders: Contender[] = all.filter((c) => !c.skip);
  if (size.name === 'long') {
    const whole = new MultiHeadAttention({numHeads: H, keyDim: D / H, chunkSize: 0});
    tf.dispose(whole.apply(x) as tf.Tensor);
    whole.setWeights(weights);
    contenders.splice(2, 0, {
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
  if (Tl && backend === 'cpu' && size.name !== 'long') {
    const tl = new Tl({numHeads: H, keyDim: D / H});
    tf.dispose(tl.call(x, {value: x})); // builds
    contenders.push({
      name: 'tfjs-layers MultiHeadAttention forward (einsum)',
      fn: fwd(() => tl.call(x, {value: x})),
      runs: 1,
    });
  }
  for (const c of contenders) for (let i = 0; i < (c.runs === 1 ? 0 : WARMUP); i++) c.fn();
  const times = new Map<string, number[]>(contenders.map((c) => [c.name, []]));
  for (let r = 0; r < RUNS; r++) {
    for (const c of contenders) {
      if (c.runs !== undefined && r >= c.runs) continue;
      times.get(c.name)!.push(time(c.fn));
    }
  }
  const floorMedian = stats(times.get('floor (6 GEMMs)')!, 0).median;
  for (const c of contenders) {
    const s = stats(times.get(c.name)!, await peakOf(c.fn));
    const row = {
      backend,
      size: size.name,
      contender: c.name,
      stat: s,
      ratio: s.median / floorMedian,
    };
    rows.push(row);
    console.log(
      `${backend.padEnd(5)} ${size.name.padEnd(6)} ${c.name.padEnd(48)} median ${s.median.toFixed(1).padStart(8)} ms ` +
        `(min ${s.min.toFixed(1)}, max ${s.max.toFixed(1)}, n=${s.runs})  ${(s.median / floorMedian).toFixed(2)}x floor  peak ${(s.peakBytes / 2 ** 20).toFixed(1)} MiB`,
    );
  }
  tf.dispose([x, lens, g, ...weights, ...naiveVars, ...Object.values(ops).flat()]);
  mha.dispose();
  for (const w of wholeLayers.splice(0)) w.dispose();
}

async function main(): Promise<void> {
  const backends = (process.env.BENCH_BACKENDS ?? 'wasm,cpu').split(',');
  const sizes = SIZES.filter((s) =>
    (process.env.BENCH_SIZES ?? 'small,medium,long').split(',').includes(s.name),
  );
  const rows: Row[] = [];
  const t0 = Date.now();
  for (const backend of backends) {
    await tf.setBackend(backend);
    await tf.ready();
    for (const size of sizes) {
      // tfjs' cpu backend needs ~8 s for one 2048-token pass: the long size runs on wasm only
      if (size.name === 'long' && backend === 'cpu' && !process.env.BENCH_CPU_LONG) continue;
      await benchSize(backend, size, rows);
    }
  }
  const out = {
    date: new Date().toISOString(),
    node: process.version,
    runs: RUNS,
    warmup: WARMUP,
    seconds: (Date.now() - t0) / 1000,
    rows,
    checks,
  };
  for (const c of checks) console.log(c);
  fs.writeFileSync(path.join(__dirname, '..', 'results.json'), JSON.stringify(out, null, 1));
  console.log(`done in ${out.seconds.toFixed(0)}s; wrote bench/results.json`);
}

main();
