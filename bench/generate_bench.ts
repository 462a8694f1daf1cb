/**
 * `npm run bench` (or `npm run bench -- --generate-cache` alone): `generate` with the key / value
 * cache against recomputing the prefix at each step, on two small models: a decoder-only model
 * (TokenAndPositionEmbedding, 2 blocks of causal MultiHeadAttention + LayerNorm + feed-forward,
 * hidden 64, 4 heads, vocab 100, maxLength 288), and a maskZero model (TokenAndPositionEmbedding
 * with maskZero, vocab 40, and 2 keras-hub TransformerDecoders, width 64, 4 heads; its logits
 * favour the id 0 and it samples with a seed, so that about a third of the generated ids, and
 * one in seven prompted ones, are masked keys inside the cache): 256 tokens (greedy, and sampled
 * for the maskZero model) after a 32-token prompt, batch 1. Per-token times (between successive steps, from `onStep`) at the start (tokens
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

import {
  generate,
  type GenerateOptions,
  MultiHeadAttention,
  TokenAndPositionEmbedding,
  TransformerDecoder,
} from '../src';

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

const MASKED_VOCAB = 40;

/** keras-hub style, ids with maskZero: every id 0 (prompted or generated) is a masked key. */
function maskedDecoders(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: MASKED_VOCAB,
    sequenceLength: MAX_LENGTH,
    embeddingDim: HIDDEN,
    maskZero: true,
  }).apply(ids) as S;
  for (let i = 0; i < BLOCKS; i++) {
    x = new TransformerDecoder({intermediateDim: 2 * HIDDEN, numHeads: HEADS}).apply(x) as S;
  }
  const logits = tf.layers.dense({units: MASKED_VOCAB});
  const model = tf.model({inputs: ids, outputs: logits.apply(x) as S});
  model.setWeights(
    model.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.3, 'float32', 200 + i)),
  );
  // the id 0 favoured: about a third of the sampled ids are 0 (counted in the results)
  const bias = logits.getWeights()[1].arraySync() as number[];
  bias[0] += 5;
  logits.setWeights([logits.getWeights()[0], tf.tensor1d(bias)]);
  return model;
}

/** How each model chooses its tokens (the same in both modes). */
type Sampling = Pick<GenerateOptions, 'sampler' | 'seed'>;

const MODELS: Record<string, {make: () => tf.LayersModel; vocab: number; sampling: Sampling}> = {
  'decoder-only': {make: decoderOnly, vocab: VOCAB, sampling: {sampler: 'greedy'}},
  // sampled with a seed: greedy on random weights repeats one id
  maskZero: {make: maskedDecoders, vocab: MASKED_VOCAB, sampling: {sampler: 'random', seed: 7}},
};

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

async function once(
  model: tf.LayersModel,
  prompt: number[],
  useCache: boolean,
  sampling: Sampling,
): Promise<Run> {
  const stamps = new Map<number, number>();
  const t0 = performance.now();
  const out = await generate(model, [prompt], {
    ...sampling,
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

async function benchBackend(backend: string, name: string) {
  await tf.setBackend(backend);
  await tf.ready();
  const {make, vocab, sampling} = MODELS[name];
  const model = make();
  // the maskZero model's prompt holds a few 0s too (masked keys from the prefill on)
  const prompt = Array.from({length: PROMPT}, (_, i) =>
    name === 'maskZero' && i % 7 === 3 ? 0 : 1 + ((i * 37) % (vocab - 1)),
  );
  // warm-up (kernels, the JIT, wasm memory): a whole cached generation, a few recomputed steps
  for (const [useCache, maxLength] of [
    [true, MAX_LENGTH],
    [false, PROMPT + 4],
  ] as const) {
    await generate(model, [prompt], {...sampling, maxLength, useCache}).then((t) => t.dispose());
  }
  const cached: Run[] = [];
  const recomputed: Run[] = [];
  const leaks: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const before = tf.memory().numTensors;
    cached.push(await once(model, prompt, true, sampling));
    recomputed.push(await once(model, prompt, false, sampling));
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
    model: name,
    /** Generated ids that are 0 (a cached run). */
    generatedZeros: cached[0].tokens.slice(PROMPT).filter((t) => t === 0).length,
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
  for (const name of Object.keys(MODELS)) {
    for (const backend of backends) rows.push(await benchBackend(backend, name));
  }
  const out = {
    date: new Date().toISOString(),
    node: process.version,
    quick: QUICK,
    runs: RUNS,
    model: {hidden: HIDDEN, heads: HEADS, blocks: BLOCKS, vocab: VOCAB, maxLength: MAX_LENGTH},
    maskedVocab: MASKED_VOCAB,
    prompt: PROMPT,
    seconds: (Date.now() - t0) / 1000,
    rows,
  };
  for (const x of rows) {
    console.log(
      `${x.model}, ${x.backend}: cached ${x.cached.startMs.toFixed(2)} -> ${x.cached.endMs.toFixed(2)} ms/token ` +
        `(x${x.cachedFlatness.toFixed(2)}), recomputing ${x.recomputed.startMs.toFixed(1)} -> ` +
        `${x.recomputed.endMs.toFixed(1)} ms/token; whole generation ${x.cached.totalMs.toFixed(0)} ` +
        `vs ${x.recomputed.totalMs.toFixed(0)} ms (${x.speedup.toFixed(1)}x); same tokens: ` +
        `${x.sameTokens}; leaked tensors: ${x.leakedTensors}; generated 0s: ${x.generatedZeros}`,
    );
  }
  fs.writeFileSync(
    path.join(__dirname, '..', 'generate_results.json'),
    JSON.stringify(out, null, 1),
  );
  console.log(`done in ${out.seconds.toFixed(0)}s; wrote bench/generate_results.json`);
}

main();
