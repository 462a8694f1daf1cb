/**
 * `npm run bench` (or `npm run bench -- --generate` alone): `generate` with the key / value
 * cache against recomputing the prefix at each step, on a small decoder-only model
 * (TokenAndPositionEmbedding, 2 blocks of causal MultiHeadAttention + LayerNorm + feed-forward,
 * hidden 64, 4 heads, vocab 100, maxLength 288): 256 greedy tokens after a 32-token prompt,
 * batch 1. Per-token times (between successive steps, from `onStep`) at the start (tokens
 * 32-63) and at the end (tokens 256-287), medians; whole generations, medians, and their ratio.
 * Both modes run interleaved, on the same model and prompt, and must give the same tokens.
 *
 * Options: `--quick` (1 timed run per mode instead of 3), `BENCH_BACKENDS=wasm,cpu`.
 * Writes bench/generate_results.json (the table in bench/README.md is written by table.mjs).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {generate, MultiHeadAttention, TokenAndPositionEmbedding} from '../src';

const HIDDEN = 64;
const HEADS = 4;
const BLOCKS = 2;
const VOCAB = 100;
const PROMPT = 32;
const MAX_LENGTH = 288;
const QUICK = process.argv.includes('--quick');
const RUNS = QUICK ? 1 : 3;

type S = tf.SymbolicTensor;

function decoderOnly(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: VOCAB,
    sequenceLength: MAX_LENGTH,
    embeddingDim: HIDDEN,
  }).apply(ids) as S;
  for (let i = 0; i < BLOCKS; i++) {
    const att = new MultiHeadAttention({
      numHeads: HEADS,
      keyDim: HIDDEN / HEADS,
      useCausalMask: true,
    }).apply(x) as S;
    const h = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, att])) as S;
    const f = tf.layers.dense({units: 4 * HIDDEN, activation: 'relu'}).apply(h) as S;
    const g = tf.layers.dense({units: HIDDEN}).apply(f) as S;
    x = tf.layers.layerNormalization().apply(tf.layers.add().apply([h, g])) as S;
  }
  const model = tf.model({inputs: ids, outputs: tf.layers.dense({units: VOCAB}).apply(x) as S});
  model.setWeights(
    model.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.3, 'float32', 100 + i)),
  );
  return model;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

interface Run {
  totalMs: number;
  /** ms of the step that chose token t, for t = PROMPT + 1 .. MAX_LENGTH - 1. */
  perToken: Map<number, number>;
  tokens: number[];
}

async function once(model: tf.LayersModel, prompt: number[], useCache: boolean): Promise<Run> {
  const stamps = new Map<number, number>();
  const t0 = performance.now();
  const out = await generate(model, [prompt], {
    maxLength: MAX_LENGTH,
    useCache,
    onStep: (t) => stamps.set(t, performance.now()),
  });
  const totalMs = performance.now() - t0;
  const tokens = (out.arraySync() as number[][])[0];
  out.dispose();
  const perToken = new Map<number, number>();
  for (let t = PROMPT + 1; t < MAX_LENGTH; t++) {
    perToken.set(t, (stamps.get(t) as number) - (stamps.get(t - 1) as number));
  }
  return {totalMs, perToken, tokens};
}

export interface ModeResult {
  /** Median over runs of the median per-token ms of tokens 33-63 (the first has the prefill). */
  startMs: number;
  /** The same for tokens 256-287. */
  endMs: number;
  /** Median whole generation, ms. */
  totalMs: number;
  runs: number;
}

function summarize(runs: Run[]): ModeResult {
  const window = (r: Run, from: number, to: number) =>
    median([...r.perToken].filter(([t]) => t >= from && t <= to).map(([, ms]) => ms));
  return {
    startMs: median(runs.map((r) => window(r, PROMPT + 1, 63))),
    endMs: median(runs.map((r) => window(r, 256, MAX_LENGTH - 1))),
    totalMs: median(runs.map((r) => r.totalMs)),
    runs: runs.length,
  };
}

async function benchBackend(backend: string) {
  await tf.setBackend(backend);
  await tf.ready();
  const model = decoderOnly();
  const prompt = Array.from({length: PROMPT}, (_, i) => 1 + ((i * 37) % (VOCAB - 1)));
  // warm-up (kernels, the JIT, wasm memory): a whole cached generation, a few recomputed steps
  for (const [useCache, maxLength] of [
    [true, MAX_LENGTH],
    [false, PROMPT + 4],
  ] as const) {
    await generate(model, [prompt], {maxLength, useCache}).then((t) => t.dispose());
  }
  const cached: Run[] = [];
  const recomputed: Run[] = [];
  const leaks: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const before = tf.memory().numTensors;
    cached.push(await once(model, prompt, true));
    recomputed.push(await once(model, prompt, false));
    leaks.push(tf.memory().numTensors - before);
    console.log(
      `${backend} run ${i + 1}/${RUNS}: cached ${cached[i].totalMs.toFixed(0)} ms, ` +
        `recomputing ${recomputed[i].totalMs.toFixed(0)} ms`,
    );
  }
  const same = cached.every((r, i) => r.tokens.join() === recomputed[i].tokens.join());
  model.dispose();
  const c = summarize(cached);
  const r = summarize(recomputed);
  return {
    backend,
    cached: c,
    recomputed: r,
    sameTokens: same,
    leakedTensors: Math.max(...leaks),
    speedup: r.totalMs / c.totalMs,
    cachedFlatness: c.endMs / c.startMs,
  };
}

async function main(): Promise<void> {
  const backends = (process.env.BENCH_BACKENDS ?? 'wasm,cpu').split(',');
  const t0 = Date.now();
  const rows = [];
  for (const backend of backends) rows.push(await benchBackend(backend));
  const out = {
    date: new Date().toISOString(),
    node: process.version,
    quick: QUICK,
    runs: RUNS,
    model: {hidden: HIDDEN, heads: HEADS, blocks: BLOCKS, vocab: VOCAB, maxLength: MAX_LENGTH},
    prompt: PROMPT,
    seconds: (Date.now() - t0) / 1000,
    rows,
  };
  for (const x of rows) {
    console.log(
      `${x.backend}: cached ${x.cached.startMs.toFixed(2)} -> ${x.cached.endMs.toFixed(2)} ms/token ` +
        `(x${x.cachedFlatness.toFixed(2)}), recomputing ${x.recomputed.startMs.toFixed(1)} -> ` +
        `${x.recomputed.endMs.toFixed(1)} ms/token; whole generation ${x.cached.totalMs.toFixed(0)} ` +
        `vs ${x.recomputed.totalMs.toFixed(0)} ms (${x.speedup.toFixed(1)}x); same tokens: ` +
        `${x.sameTokens}; leaked tensors: ${x.leakedTensors}`,
    );
  }
  fs.writeFileSync(
    path.join(__dirname, '..', 'generate_results.json'),
    JSON.stringify(out, null, 1),
  );
  console.log(`done in ${out.seconds.toFixed(0)}s; wrote bench/generate_results.json`);
}

main();
