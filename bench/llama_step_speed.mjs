// A Llama of SmolLM2-135M's shape with random weights, made in JavaScript (no Python, no files),
// and the time per token of `generate` on it, compiled step against the eager stepper:
// `node bench/llama_step_speed.mjs [backend] [compiled|eager|both] [float32|int8]` after
// `npm run build` (it runs dist/index.cjs). Defaults: wasm, both, float32. One thread (tfjs-wasm
// `setThreadsCount(1)`; tfjs-node reads TF_NUM_INTRAOP_THREADS / TF_NUM_INTEROP_THREADS, set
// them to 1). Greedy, 64 new tokens after a 32-token prompt, one warm-up generation first.
// Shape: 30 layers, width 576, 9 query / 3 key-value heads (head 64), SwiGLU 1536, vocabulary
// 49152, tied embedding; LLAMA_LAYERS / LLAMA_NEW narrow it. Prints one JSON line per mode.
// LLAMA_RELAXED=1 opts the int8 products into relaxed SIMD (TFJS_ATTENTION_RELAXED_SIMD; Node 20:
// `node --experimental-wasm-relaxed-simd ...`); the report's `kernels` says which ran.
import {createRequire} from 'node:module';
import {performance} from 'node:perf_hooks';

const require = createRequire(import.meta.url);
const tf = require('@tensorflow/tfjs');
const {setThreadsCount} = require('@tensorflow/tfjs-backend-wasm');
const api = require('../dist/index.cjs');

const [backend = 'wasm', which = 'both', dtype = 'float32'] = process.argv.slice(2);
const LAYERS = Number(process.env.LLAMA_LAYERS ?? 30);
const NEW = Number(process.env.LLAMA_NEW ?? 64);
const PROMPT = 32;
const [WIDTH, HEADS, KV, FF, VOCAB] = [576, 9, 3, 1536, 49152];
const HEAD = WIDTH / HEADS;

/** Uniform values in [-scale, scale) from a linear congruential generator (fast, repeatable). */
function random(n, seed, scale) {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = (s / 2 ** 31 - 1) * scale;
  }
  return out;
}

/** keras-hub's Llama3CausalLM config and its weights by Keras 3 path (random, norms 1). */
function llama() {
  const backbone = {
    name: 'llama3_backbone',
    vocabulary_size: VOCAB,
    num_layers: LAYERS,
    num_query_heads: HEADS,
    num_key_value_heads: KV,
    hidden_dim: WIDTH,
    intermediate_dim: FF,
    rope_max_wavelength: 100000,
    layer_norm_epsilon: 1e-5,
    tie_word_embeddings: true,
    dropout: 0,
  };
  const config = {
    backbone: {
      module: 'keras_hub.src.models.llama3.llama3_backbone',
      class_name: 'Llama3Backbone',
      config: backbone,
    },
    preprocessor: null,
    name: 'llama3_causal_lm',
  };
  const weights = new Map();
  let seed = 1;
  const put = (path, shape, scale) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const values = scale === 'ones' ? new Float32Array(n).fill(1) : random(n, seed++, scale);
    weights.set(`layers/llama3_backbone/layers/${path}`, {shape, values});
  };
  put('reversible_embedding/vars/0', [VOCAB, WIDTH], 0.05);
  put('llama_layer_norm/vars/0', [WIDTH], 'ones');
  const w = 1 / Math.sqrt(WIDTH);
  for (let l = 0; l < LAYERS; l++) {
    const d = `llama_transformer_decoder${l === 0 ? '' : `_${l}`}`;
    put(`${d}/_self_attention_layernorm/vars/0`, [WIDTH], 'ones');
    put(`${d}/_feedforward_layernorm/vars/0`, [WIDTH], 'ones');
    put(`${d}/_self_attention_layer/_query_dense/vars/0`, [WIDTH, HEADS, HEAD], w);
    put(`${d}/_self_attention_layer/_key_dense/vars/0`, [WIDTH, KV, HEAD], w);
    put(`${d}/_self_attention_layer/_value_dense/vars/0`, [WIDTH, KV, HEAD], w);
    put(`${d}/_self_attention_layer/_output_dense/vars/0`, [HEADS, HEAD, WIDTH], w);
    put(`${d}/_feedforward_gate_dense/vars/0`, [WIDTH, FF], w);
    put(`${d}/_feedforward_intermediate_dense/vars/0`, [WIDTH, FF], w);
    put(`${d}/_feedforward_output_dense/vars/0`, [FF, WIDTH], 1 / Math.sqrt(FF));
  }
  return {config, weights};
}

async function main() {
  if (backend === 'tensorflow') require('@tensorflow/tfjs-node');
  if (backend === 'wasm') setThreadsCount(1);
  if (!(await tf.setBackend(backend))) throw new Error(`no backend ${backend}`);
  await tf.ready();
  tf.env().set('TFJS_ATTENTION_RELAXED_SIMD', process.env.LLAMA_RELAXED === '1');
  const {config, weights} = llama();
  let model = api.buildKerasHubModel('Llama3CausalLM', config, weights);
  if (dtype === 'int8') {
    const q = api.quantize(model, 'int8');
    model.dispose();
    model = q;
  }
  const prompt = Array.from({length: PROMPT}, (_, i) => (i * 7919 + 13) % VOCAB);
  const modes = which === 'both' ? ['compiled', 'eager'] : [which];
  for (const mode of modes) {
    tf.env().set('TFJS_ATTENTION_COMPILED_STEP', mode === 'compiled');
    const run = async (n) => {
      const stamps = [];
      let report = null;
      const t0 = performance.now();
      const ids = await api.generate(model, [prompt], {
        maxLength: PROMPT + n,
        onCompile: (r) => (report = r),
        onStep: () => stamps.push(performance.now()),
      });
      const tokens = (await ids.array())[0].slice(PROMPT);
      ids.dispose();
      return {t0, stamps, report, tokens};
    };
    await run(4); // warm-up
    const {t0, stamps, report, tokens} = await run(NEW);
    const gaps = stamps.slice(1).map((s, i) => s - stamps[i]);
    gaps.sort((a, b) => a - b);
    console.log(
      JSON.stringify({
        backend,
        dtype,
        mode,
        compiled: report?.compiled ?? null,
        reason: report?.reason ?? null,
        kernels: report?.run?.kernels ?? null,
        layers: LAYERS,
        firstTokenMs: +(stamps[0] - t0).toFixed(1),
        msPerToken: +gaps[Math.floor(gaps.length / 2)].toFixed(2),
        meanMsPerToken: +(gaps.reduce((a, b) => a + b, 0) / gaps.length).toFixed(2),
        tokens: tokens.slice(0, 8),
      }),
    );
  }
  model.dispose();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
