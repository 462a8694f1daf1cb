// One transformers.js contender of `npm run bench -- --generate` (bench/generate_vs_transformers.mjs
// starts it in its own process): `node bench/generate_transformers_child.mjs <size> <runtime> <dtype>`
// with runtime `node` (onnxruntime-node, CPU execution provider) or `web` (onnxruntime-web's wasm
// backend in Node, installed as transformers.js' runtime through globalThis[Symbol.for('onnxruntime')])
// and dtype `fp32` (onnx/model.onnx), `q8` (onnx/model_quantized.onnx) or `q4` (onnx/model_q4.onnx). One thread: onnxruntime
// intra-op and inter-op 1, onnxruntime-web numThreads 1.
//
// A model over protobuf's 2 GB (float32 Qwen2.5-0.5B) keeps its weights in an external data file
// beside the .onnx, `<file>_data` (onnx/model.onnx_data). transformers.js reads one only when told:
// onnxruntime-node gets `use_external_data_format` (transformers.js checks that the file is there;
// onnxruntime-node, given the model's path, reads it itself), onnxruntime-web gets the file's
// bytes as session_options.externalData `{path, data}` (in Node transformers.js hands it the model's
// path and no external data: the wasm build mounts the bytes under the name the graph gives them).
//
// Greedy generation from the fixed prompt in bench/.models/<size>/meta.json (input ids as a tensor,
// no tokenizer), one warm-up generation of 4 tokens, then one timed generation. Times come from a
// streamer: transformers.js calls `put` once with the prompt before the first forward pass, then
// once per chosen token; time to first token = call -> the first token's `put`, per-token gaps =
// between successive `put`s. Prints one JSON line on stdout.
import {createRequire} from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {performance} from 'node:perf_hooks';
import {fileURLToPath} from 'node:url';

const require = createRequire(import.meta.url);
/** An installed package's version (read from its folder: not every package exports package.json). */
function packageVersion(name) {
  const dir = path.join(process.cwd(), 'node_modules', name);
  return JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')).version;
}
const [size, runtime, dtype] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const modelsDir = path.join(here, '.models');
const meta = JSON.parse(fs.readFileSync(path.join(modelsDir, size, 'meta.json'), 'utf8'));

const ortName = runtime === 'web' ? 'onnxruntime-web' : 'onnxruntime-node';
if (runtime === 'web') {
  const ortWeb = require('onnxruntime-web');
  ortWeb.env.wasm.numThreads = 1;
  globalThis[Symbol.for('onnxruntime')] = ortWeb;
  // transformers.js requires onnxruntime-node when it loads, whatever runtime it is given, and
  // onnxruntime-node then registers its native backend (priority 100) in the onnxruntime-common
  // that onnxruntime-web shares: a session created through onnxruntime-web with transformers.js'
  // empty list of execution providers would run natively. onnxruntime-web stands in for it.
  const fromTransformers = createRequire(require.resolve('@huggingface/transformers'));
  const nodePath = fromTransformers.resolve('onnxruntime-node');
  require.cache[nodePath] = {id: nodePath, filename: nodePath, loaded: true, exports: ortWeb};
} else if (runtime !== 'node') {
  throw new Error(`expected runtime "node" or "web", received "${runtime}"`);
}
const {AutoModelForCausalLM, BaseStreamer, Tensor, env} = await import('@huggingface/transformers');
env.localModelPath = modelsDir + path.sep;
env.allowRemoteModels = false;
env.allowLocalModels = true;
if (runtime === 'web') {
  env.backends.onnx.wasm.numThreads = 1;
  // transformers.js points onnxruntime-web at its CDN build and pre-fetches it; offline, and to run
  // the installed onnxruntime-web, let that package load its own wasm files
  env.useWasmCache = false;
  env.backends.onnx.wasm.wasmPaths = undefined;
}

// the dtype's file and, when it has one, its external data file (transformers.js' name for it)
const onnxFile =
  dtype === 'q8' ? 'model_quantized.onnx' : dtype === 'q4' ? 'model_q4.onnx' : 'model.onnx';
const external = fs.existsSync(path.join(modelsDir, size, 'tjs', 'onnx', `${onnxFile}_data`));
const sessionOptions = {intraOpNumThreads: 1, interOpNumThreads: 1};
const externalOptions = {};
if (external && runtime === 'node') {
  externalOptions.use_external_data_format = {[onnxFile]: 1};
} else if (external) {
  // a string `data` is read by transformers.js from the model's folder into bytes
  sessionOptions.externalData = [{path: `${onnxFile}_data`, data: `onnx/${onnxFile}_data`}];
}

const t0 = performance.now();
const model = await AutoModelForCausalLM.from_pretrained(`${size}/tjs`, {
  dtype,
  // with a runtime installed through the symbol, transformers.js lists no devices; 'auto' hands
  // onnxruntime-web an empty list, and it takes its own default backend (wasm)
  device: runtime === 'node' ? 'cpu' : 'auto',
  session_options: sessionOptions,
  ...externalOptions,
});
const loadMs = performance.now() - t0;
// the session runs where this contender says: onnxruntime-node's native handler
// (`OnnxruntimeSessionHandler`) for node, any other (onnxruntime-web's, minified) for web; a
// session of the other runtime would be timed under this one's name
const handler = Object.values(model.sessions)[0]?.handler?.constructor?.name ?? 'unknown';
if ((handler === 'OnnxruntimeSessionHandler') !== (runtime === 'node')) {
  throw new Error(
    `expected a session of ${ortName}, received one whose handler is ${handler} ` +
      `(${runtime === 'web' ? "onnxruntime-node's" : 'not onnxruntime-node'})`,
  );
}

class Stamps extends BaseStreamer {
  constructor() {
    super();
    this.times = [];
  }
  put() {
    this.times.push(performance.now());
  }
  end() {}
}

async function run(newTokens) {
  const prompt = meta.prompt;
  const ids = new Tensor('int64', BigInt64Array.from(prompt.map(BigInt)), [1, prompt.length]);
  const mask = new Tensor('int64', new BigInt64Array(prompt.length).fill(1n), [1, prompt.length]);
  const streamer = new Stamps();
  const start = performance.now();
  const out = await model.generate({
    input_ids: ids,
    attention_mask: mask,
    max_new_tokens: newTokens,
    do_sample: false,
    streamer,
  });
  const end = performance.now();
  const tokens = Array.from(out.data, Number);
  // times[0]: the prompt's put, before any forward pass; times[1..]: one per chosen token
  const chosen = streamer.times.slice(1);
  return {start, end, chosen, tokens};
}

await run(4); // warm-up: sessions, the wasm JIT, allocator pools
const r = await run(meta.new_tokens);
const gaps = r.chosen.slice(1).map((t, i) => t - r.chosen[i]);
const result = {
  ttftMs: r.chosen[0] - r.start,
  gapsMs: gaps,
  totalMs: r.end - r.start,
  loadMs,
  maxRssBytes: process.resourceUsage().maxRSS * 1024,
  ids: r.tokens,
  timing: 'streamer: put() per chosen token',
  runtimeVersion: `${ortName} ${packageVersion(ortName)}`,
  sessionHandler: handler,
  externalData: external,
};
await model.dispose();
process.stdout.write(`RESULT ${JSON.stringify(result)}\n`);
