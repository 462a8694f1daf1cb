// Generation in a browser tab: headless Chromium loads one of the bench's keras-hub presets over
// http into tfjs-wasm (one thread) with the browser bundle, generates greedily on the compiled
// step and reports ms per token, the step that ran, and the ids against Keras' own (meta.json).
//
//   node bench/page_generate.mjs <size> <preset folder> [new tokens]
//   node bench/page_generate.mjs llama3.2-1b-shape preset_int8 16
//
// The preset is one that fixtures/family_bench.py wrote under bench/.models/<size>/ (preset,
// preset_int8, preset_int4); Keras' ids are meta.json's keras_greedy_ids / keras_int8_ids /
// keras_int4_ids. Needs `npm run build` (dist/tfjs-attention.min.js) and a Chromium (as the
// browser tests find it: CHROMIUM_PATH or PATH).
import {createReadStream, existsSync, readFileSync, statSync} from 'node:fs';
import {createServer} from 'node:http';
import {createRequire} from 'node:module';
import {dirname, extname, join, resolve} from 'node:path';
import {fileURLToPath} from 'node:url';

/* global window, location, performance, navigator -- the page functions run in the tab */
const require = createRequire(import.meta.url);
const {launchChromium} = require('../browser/chromium.js');

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const [size, presetName, newArg] = process.argv.slice(2);
if (size == null || presetName == null) {
  console.error('usage: node bench/page_generate.mjs <size> <preset folder> [new tokens]');
  process.exit(2);
}
const dir = join(root, 'bench', '.models', size);
const presetDir = join(dir, presetName);
if (!existsSync(join(presetDir, 'config.json'))) {
  console.error(`no preset at ${presetDir}: make it with fixtures/family_bench.py ${size}`);
  process.exit(2);
}
const meta = JSON.parse(readFileSync(join(dir, 'meta.json'), 'utf8'));
const ids = (v) => (typeof v === 'string' ? JSON.parse(v) : v);
const kerasIds = ids(
  presetName.endsWith('int8')
    ? meta.keras_int8_ids
    : presetName.endsWith('int4')
      ? meta.keras_int4_ids
      : meta.keras_greedy_ids,
);
const newTokens = Number(newArg ?? meta.new_tokens);

const tfjs = (pkg, file) => join(root, 'node_modules', '@tensorflow', pkg, 'dist', file);
const page = `<!doctype html><meta charset="utf-8"><title>generate</title>
<script src="/tf.min.js"></script><script src="/tf-backend-wasm.min.js"></script>
<script src="/tfjs-attention.min.js"></script>`;
const ROUTES = {
  '/tf.min.js': tfjs('tfjs', 'tf.min.js'),
  '/tf-backend-wasm.min.js': tfjs('tfjs-backend-wasm', 'tf-backend-wasm.min.js'),
  '/tfjs-attention.min.js': join(root, 'dist', 'tfjs-attention.min.js'),
  '/tfjs-attention-fflate.mjs': join(root, 'dist', 'tfjs-attention-fflate.mjs'),
  '/tfjs-attention-jsfive.mjs': join(root, 'dist', 'tfjs-attention-jsfive.mjs'),
};
for (const f of ['', '-simd', '-threaded-simd']) {
  ROUTES[`/wasm/tfjs-backend-wasm${f}.wasm`] = tfjs(
    'tfjs-backend-wasm',
    `tfjs-backend-wasm${f}.wasm`,
  );
}
for (const f of ['config.json', 'task.json', 'metadata.json', 'model.weights.h5']) {
  ROUTES[`/preset/${f}`] = join(presetDir, f);
}
const TYPES = {'.js': 'text/javascript', '.mjs': 'text/javascript', '.wasm': 'application/wasm'};

const server = createServer((req, res) => {
  const pathname = new URL(req.url ?? '/', 'http://127.0.0.1').pathname;
  if (pathname === '/') {
    res.writeHead(200, {'content-type': 'text/html'}).end(page);
    return;
  }
  const file = ROUTES[pathname];
  if (file == null || !existsSync(file)) {
    res.writeHead(404).end('not found');
    return;
  }
  // ranges: the loader reads a large weights file by parts
  const total = statSync(file).size;
  const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
  const type = TYPES[extname(file)] ?? 'application/octet-stream';
  if (range != null) {
    const start = Number(range[1]);
    const end = range[2] === '' ? total - 1 : Math.min(Number(range[2]), total - 1);
    res.writeHead(206, {
      'content-type': type,
      'content-range': `bytes ${start}-${end}/${total}`,
      'content-length': end - start + 1,
      'accept-ranges': 'bytes',
    });
    createReadStream(file, {start, end}).pipe(res);
    return;
  }
  res.writeHead(200, {'content-type': type, 'content-length': total, 'accept-ranges': 'bytes'});
  createReadStream(file).pipe(res);
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/`;

const browser = await launchChromium();
try {
  const tab = await browser.newPage();
  const errors = [];
  tab.on('pageerror', (e) => errors.push(e.message));
  // the loader asks for the files a preset may have (task.weights.h5, the tokenizer's): a 404
  // of those is expected, listed apart
  const missing = [];
  tab.on('response', (r) => {
    if (r.status() >= 400) missing.push(new URL(r.url()).pathname);
  });
  await tab.goto(url);
  await tab.waitForFunction(() => typeof window.tfAttention === 'object');
  const result = await tab.evaluate(
    async ({prompt, newTokens}) => {
      const {tf, tfAttention} = window;
      tf.wasm.setWasmPaths(`${location.origin}/wasm/`);
      tf.wasm.setThreadsCount(1);
      await tf.setBackend('wasm');
      await tf.ready();
      const t0 = performance.now();
      const {model} = await tfAttention.loadKerasHubPreset(`${location.origin}/preset`);
      const loadMs = performance.now() - t0;
      const T = prompt.length;
      const steps = [];
      let report = null;
      const out = await tfAttention.generate(model, [prompt], {
        maxLength: T + newTokens,
        promptLengths: [T],
        useCache: true,
        onStep: () => steps.push(performance.now()),
        onCompile: (r) => {
          report = {
            reason: r.reason,
            run: r.run == null ? null : `${r.run.kernels} kernels, ${r.run.memory}`,
          };
        },
      });
      const got = (await out.array())[0];
      out.dispose();
      const gaps = steps
        .slice(1)
        .map((t, i) => t - steps[i])
        .sort((a, b) => a - b);
      return {
        loadMs,
        msPerToken: gaps[Math.floor(gaps.length / 2)],
        ids: got,
        report,
        backend: tf.getBackend(),
        userAgent: navigator.userAgent,
      };
    },
    {prompt: ids(meta.prompt), newTokens},
  );
  const want = kerasIds == null ? null : kerasIds.slice(0, ids(meta.prompt).length + newTokens);
  const same = want == null ? null : want.filter((id, i) => result.ids[i] === id).length;
  console.log(
    JSON.stringify(
      {
        size,
        preset: presetName,
        newTokens,
        ...result,
        ids: undefined,
        idsVsKeras: want == null ? null : `${same} / ${want.length}`,
        errors,
        notFound: missing,
      },
      null,
      1,
    ),
  );
} finally {
  await browser.close();
  server.close();
}
