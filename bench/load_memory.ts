/**
 * Peak memory of loading a converted model: a GPT of the package's layers (ReversibleEmbedding,
 * tied, + PositionEmbedding + TransformerDecoder blocks + LayerNormalization, random weights) is
 * saved with `fileSystem` in the tfjs form and in the converted Keras 3 form (`toKeras3Artifacts`:
 * Keras 3 weight paths), then each (backend, form, loader) is loaded in a fresh child process
 * that reports its peak resident memory (`process.resourceUsage().maxRSS`), its resident memory
 * before loading, the weights' bytes, their ratio and the load time.
 *
 * Run (from the repository root):
 *
 * ```sh
 * npx esbuild bench/load_memory.ts --bundle --platform=node --format=cjs \
 *   --external:@tensorflow/* --outfile=bench/.build/load_memory.cjs
 * node bench/.build/load_memory.cjs            # GPT-2 small's shape (124M parameters, 498 MB)
 * LOAD_BENCH_SIZE=small node bench/.build/load_memory.cjs   # 4 blocks, width 256, vocab 5000
 * ```
 *
 * `LOAD_BENCH_LOADERS=loadKerasModel,inPlace` and `LOAD_BENCH_BACKENDS=cpu,wasm` narrow the runs.
 */
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-wasm';

import {
  fileSystem,
  loadKerasModel,
  PositionEmbedding,
  ReversibleEmbedding,
  toKeras3Artifacts,
  TransformerDecoder,
} from '../src';

/** The loaders compared: the public entry on a folder path. */
const LOADERS: Record<string, (dir: string) => Promise<tf.LayersModel>> = {
  loadKerasModel: (dir) => loadKerasModel(dir),
};

type S = tf.SymbolicTensor;

const SIZES = {
  gpt2: {vocab: 50257, width: 768, heads: 12, blocks: 12, positions: 1024},
  small: {vocab: 5000, width: 256, heads: 8, blocks: 4, positions: 256},
};

function gpt(size: keyof typeof SIZES): tf.LayersModel {
  const {vocab, width, heads, blocks, positions} = SIZES[size];
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const emb = new ReversibleEmbedding({inputDim: vocab, outputDim: width, name: 'token_embedding'});
  const tokens = emb.apply(ids) as S;
  const pos = new PositionEmbedding({sequenceLength: positions}).apply(tokens) as S;
  let x = tf.layers.add().apply([tokens, pos]) as S;
  for (let i = 0; i < blocks; i++) {
    x = new TransformerDecoder({
      intermediateDim: 4 * width,
      numHeads: heads,
      normalizeFirst: true,
      activation: 'gelu_approximate',
    }).apply(x) as S;
  }
  x = tf.layers.layerNormalization({epsilon: 1e-5}).apply(x) as S;
  const model = tf.model({inputs: ids, outputs: emb.apply(x) as S});
  // small random weights, one weight at a time (seeded)
  model.weights.forEach((w, i) => {
    const v = tf.randomUniform(w.shape as number[], -0.05, 0.05, 'float32', 1000 + i);
    w.write(v);
    v.dispose();
  });
  return model;
}

async function artifactsOf(model: tf.LayersModel): Promise<tf.io.ModelArtifacts> {
  let saved: tf.io.ModelArtifacts | null = null;
  await model.save(
    tf.io.withSaveHandler(async (a) => {
      saved = a;
      return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
    }),
  );
  return saved as unknown as tf.io.ModelArtifacts;
}

interface Result {
  backend: string;
  form: string;
  loader: string;
  weightsBytes: number;
  rssBeforeBytes: number;
  peakRssBytes: number;
  ratio: number;
  loadMs: number;
  tensorsAfterDispose: number;
  bytesAfterDispose: number;
}

async function child(backend: string, dir: string, form: string, loader: string): Promise<void> {
  await tf.setBackend(backend);
  await tf.ready();
  const rssBefore = process.memoryUsage().rss;
  const before = tf.memory();
  const t0 = performance.now();
  const model = await LOADERS[loader](dir);
  const loadMs = performance.now() - t0;
  const peak = process.resourceUsage().maxRSS * 1024;
  const weightsBytes = model.weights.reduce(
    (n, w) => n + tf.util.sizeFromShape(w.shape as number[]) * 4,
    0,
  );
  // a prediction, so that a model that loaded wrongly is noticed
  tf.tidy(() => {
    const out = model.predict(tf.tensor2d([[1, 2, 3]], [1, 3], 'int32')) as tf.Tensor;
    if (!Number.isFinite(out.sum().dataSync()[0])) throw new Error('non-finite output');
  });
  model.dispose();
  const after = tf.memory();
  const result: Result = {
    backend,
    form,
    loader,
    weightsBytes,
    rssBeforeBytes: rssBefore,
    peakRssBytes: peak,
    ratio: peak / weightsBytes,
    loadMs,
    tensorsAfterDispose: after.numTensors - before.numTensors,
    bytesAfterDispose: after.numBytes - before.numBytes,
  };
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

/** Saves the model of `size`, random weights, in both forms under `root`. */
async function save(root: string, size: keyof typeof SIZES): Promise<void> {
  await tf.setBackend('cpu');
  const model = gpt(size);
  const artifacts = await artifactsOf(model);
  model.dispose();
  await fileSystem(path.join(root, 'tfjs')).save(artifacts);
  await fileSystem(path.join(root, 'keras3')).save(await toKeras3Artifacts(artifacts));
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--child') return child(args[1], args[2], args[3], args[4]);
  if (args[0] === '--save') return save(args[1], args[2] as keyof typeof SIZES);
  const size = (process.env.LOAD_BENCH_SIZE ?? 'gpt2') as keyof typeof SIZES;
  if (!(size in SIZES))
    throw new Error(`LOAD_BENCH_SIZE: expected gpt2 or small, received ${size}`);
  const loaders = (process.env.LOAD_BENCH_LOADERS ?? Object.keys(LOADERS).join(',')).split(',');
  const backends = (process.env.LOAD_BENCH_BACKENDS ?? 'cpu,wasm').split(',');
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'load-memory-'));
  try {
    // the model is made and saved in a child of its own: Linux hands a process's peak RSS on to
    // the processes it starts, so this one must stay small
    execFileSync(process.execPath, [__filename, '--save', root, size], {stdio: 'inherit'});
    const results: Result[] = [];
    for (const backend of backends) {
      for (const form of ['tfjs', 'keras3']) {
        for (const loader of loaders) {
          const out = execFileSync(
            process.execPath,
            [__filename, '--child', backend, path.join(root, form), form, loader],
            {encoding: 'utf8', maxBuffer: 1 << 24},
          );
          const line = out.split('\n').find((l) => l.startsWith('RESULT '));
          if (line == null) throw new Error(`no result from ${backend} ${form} ${loader}: ${out}`);
          const r = JSON.parse(line.slice(7)) as Result;
          results.push(r);
          const mb = (n: number) => (n / 1e6).toFixed(0);
          console.log(
            `${backend.padEnd(5)} ${form.padEnd(7)} ${loader.padEnd(15)} weights ${mb(r.weightsBytes)} MB, ` +
              `rss before ${mb(r.rssBeforeBytes)} MB, peak ${mb(r.peakRssBytes)} MB ` +
              `(${r.ratio.toFixed(2)}x the weights), ${r.loadMs.toFixed(0)} ms, ` +
              `left after dispose: ${r.tensorsAfterDispose} tensors, ${r.bytesAfterDispose} bytes`,
          );
        }
      }
    }
  } finally {
    fs.rmSync(root, {recursive: true, force: true});
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
