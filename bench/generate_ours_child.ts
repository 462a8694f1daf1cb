/**
 * One contender of this package in `npm run bench -- --generate` (bench/generate_vs_transformers.mjs
 * bundles this file and starts it in its own process):
 * `node bench/.build/generate_ours_child.cjs <size> <backend> <dtype>` with backend `wasm`, `cpu` or
 * `tensorflow` (tfjs-node) and dtype `float32` or `int8`: Keras' own int8 model where the size
 * has one (bench/.models/<size>/preset_int8, keras-hub's `quantize("int8")` written by
 * fixtures/family_bench.py: loaded as int8, its bytes as they are, no float copy), else
 * `quantize(model, 'int8')` of the float32 model. An int8 preset's greedy ids are checked against
 * the ones Keras' reloaded int8 model generates (meta.json's `keras_int8_ids`): `idsVsKerasInt8`. One thread: tfjs-wasm `setThreadsCount(1)`, TF_NUM_INTRAOP_THREADS /
 * TF_NUM_INTEROP_THREADS 1 (set by the parent) for tfjs-node.
 *
 * Imports tfjs-core and the run's backend only (see the imports). Loads bench/.models/<size>/preset (a keras-hub `save_to_preset` folder written by
 * fixtures/family_bench.py) with `loadKerasHubPreset`, or else bench/.models/<size>/tfjs (the
 * keras-hub GPT-2 converted by fixtures/gpt2_bench.py) with `loadKerasModel`; load time = that call.
 * Runs one warm-up generation of 4 tokens, then one timed greedy generation of the
 * size's new tokens, reads the process' peak resident memory, and only then checks the float32
 * model's logits on the prompt against Keras' (keras_logits.f32, 1e-4). Time to first token = the call -> `onStep` of the first generated position;
 * per-token gaps = between successive `onStep`s. Prints one `RESULT {json}` line on stdout.
 */
import * as fs from 'fs';
import * as path from 'path';

// what the package needs (tfjs-core and tfjs-layers, its peer dependencies) and the backend of
// the run, loaded below; not the @tensorflow/tfjs union, whose webgl backend, converter and data
// API a Node process running wasm would not load (about 12 MB of resident memory)
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

import * as api from '../src';

const [size, backend, dtype] = process.argv.slice(2);
const dir = path.join(process.cwd(), 'bench', '.models', size);

interface Meta {
  prompt: number[];
  new_tokens: number;
  vocab: number;
  keras_int8_ids?: number[];
  keras_int4_ids?: number[];
}

type Quantize = (model: LayersModel, mode: 'int8' | 'int4') => unknown;

function emit(result: object): void {
  process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
}

async function setBackend(): Promise<void> {
  if (backend === 'tensorflow') {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('@tensorflow/tfjs-node');
  } else if (backend === 'wasm') {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const wasm = require('@tensorflow/tfjs-backend-wasm') as {setThreadsCount(n: number): void};
    wasm.setThreadsCount(1);
  } else if (backend === 'cpu') {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('@tensorflow/tfjs-backend-cpu');
  } else {
    throw new Error(`expected backend wasm, cpu or tensorflow, received "${backend}"`);
  }
  if (!(await tf.setBackend(backend))) throw new Error(`tf.setBackend('${backend}') failed`);
  await tf.ready();
}

/** max |our logits - Keras' logits| on the prompt (all positions). */
function logitsError(model: LayersModel, meta: Meta): number {
  const keras = new Float32Array(
    fs.readFileSync(path.join(dir, 'keras_logits.f32')).buffer.slice(0),
  );
  const T = meta.prompt.length;
  const ours = tf.tidy(() => {
    const ids = tf.tensor2d([meta.prompt], [1, T], 'int32');
    const mask = tf.ones([1, T], 'int32');
    return model.predict([ids, mask]) as tf.Tensor;
  });
  const data = ours.dataSync();
  ours.dispose();
  if (data.length !== keras.length) {
    throw new Error(
      `logits check: expected ${keras.length} logits (${T} x ${meta.vocab}), received ${data.length}`,
    );
  }
  let worst = 0;
  for (let i = 0; i < data.length; i++) worst = Math.max(worst, Math.abs(data[i] - keras[i]));
  return worst;
}

async function run(
  model: LayersModel,
  meta: Meta,
  newTokens: number,
): Promise<{
  start: number;
  end: number;
  steps: number[];
  ids: number[];
  refusal: string | null;
  step: string | null;
}> {
  const T = meta.prompt.length;
  const steps: number[] = [];
  let refusal: string | null = null;
  let step: string | null = null;
  const start = performance.now();
  const out = await api.generate(model, [meta.prompt], {
    maxLength: T + newTokens,
    promptLengths: [T],
    useCache: true,
    onStep: () => steps.push(performance.now()),
    onCompile: (report) => {
      refusal = report.reason;
      step = report.run == null ? null : `${report.run.kernels} kernels, ${report.run.memory}`;
    },
  });
  const end = performance.now();
  const ids = (out.arraySync() as number[][])[0];
  out.dispose();
  return {start, end, steps, ids, refusal, step};
}

async function main(): Promise<void> {
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8')) as Meta;
  // looked up by name at run time: the package does not export `quantize` yet, and a static
  // import would fail to bundle (or be bundled as undefined) until it does
  const name = 'quantize';
  const quantize = (api as unknown as Record<string, Quantize | undefined>)[name];
  const quantized = dtype === 'int8' || dtype === 'int4';
  if (quantized && typeof quantize !== 'function') {
    emit({na: 'quantize not available'});
    return;
  }
  if (!quantized && dtype !== 'float32') {
    throw new Error(`expected dtype float32, int8 or int4, received "${dtype}"`);
  }
  await setBackend();
  // Keras' own quantized preset where the size has one (int8: preset_int8/, int4: preset_int4/)
  const quantizedPreset = path.join(dir, `preset_${dtype}`);
  const kerasInt8 = quantized && fs.existsSync(quantizedPreset);
  const presetDir = kerasInt8 ? quantizedPreset : path.join(dir, 'preset');
  const t0 = performance.now();
  let model = fs.existsSync(presetDir)
    ? (await api.loadKerasHubPreset(presetDir)).model
    : await api.loadKerasModel(api.fileSystem(path.join(dir, 'tfjs', 'model.json')));
  const loadMs = performance.now() - t0;
  if (quantized && !kerasInt8) {
    const q = (await quantize!(model, dtype as 'int8' | 'int4')) as LayersModel | undefined;
    if (q != null && q !== model) {
      model.dispose();
      model = q;
    }
  }
  await run(model, meta, 4); // warm-up: kernels, the wasm JIT, the plan
  const r = await run(model, meta, meta.new_tokens);
  const gaps = r.steps.slice(1).map((t, i) => t - r.steps[i]);
  // the peak of loading and generating, read before the logits check: that check is the bench's,
  // not the user's workload, and its eager predict lets tfjs-wasm's XNNPACK pack a copy of every
  // weight it multiplies (kept for the life of the weight), which would be counted otherwise
  const maxRssBytes = process.resourceUsage().maxRSS * 1024;
  const maxAbsLogitsVsKeras = dtype === 'float32' ? logitsError(model, meta) : null;
  const want = dtype === 'int4' ? meta.keras_int4_ids : meta.keras_int8_ids;
  // Keras' ids: the prompt and the new ones, or the new ones only
  const got =
    want != null && want.length === r.ids.length ? r.ids : r.ids.slice(meta.prompt.length);
  const idsVsKerasInt8 =
    kerasInt8 && want != null
      ? `${want.filter((id, i) => got[i] === id).length} / ${want.length}`
      : null;
  emit({
    ttftMs: r.steps[0] - r.start,
    gapsMs: gaps,
    totalMs: r.end - r.start,
    loadMs,
    maxRssBytes,
    ids: r.ids,
    maxAbsLogitsVsKeras,
    int8Source: !quantized ? null : kerasInt8 ? `keras ${dtype} preset` : 'quantize(float32)',
    idsVsKerasInt8,
    timing: 'generate onStep per chosen token',
    runtimeVersion: `tfjs ${tf.version_core} ${tf.getBackend()}`,
    // null: the timed generation ran the compiled step; else why it ran the eager stepper
    compileRefusal: r.refusal,
    step: r.step,
  });
  model.dispose();
}

main().catch((e: Error) => {
  process.stderr.write(`${e.stack ?? e.message}\n`);
  process.exit(1);
});
