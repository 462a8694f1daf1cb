/**
 * A browser app as a user builds one: the packed tarball (npm pack) installed into a fresh app
 * with `npm install <tgz> --offline`, an app importing `@tensorflow/tfjs` and `tfjs-attention`
 * bundled by esbuild for the browser, served on 127.0.0.1 and run in headless Chromium.
 *
 * No registry and no npm cache: the package's runtime dependencies (and theirs) are installed
 * from this checkout's node_modules (file: folders, copied with --install-links), tfjs is linked
 * from it, and npm runs with an empty cache of its own, so the test passes on a fresh machine.
 *
 * Checks: the bundler took the package's `browser` export condition (dist/browser.mjs, and no
 * other file of the package); the bundle holds no Node-only module; in the page, a functional
 * model of MultiHeadAttention and TransformerEncoder predicts, saves to indexeddb:// and loads
 * back, and the loaded model predicts the same; DotProductAttention on fixed inputs matches a
 * plain-JS softmax(q kᵀ / sqrt(d)) v; no page error and no console error.
 */
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {Browser} from 'playwright-core';

import {expectClose, NestedNumbers} from '../../__tests__/helpers/close';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const {start} = require('../server.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

const root = path.resolve(__dirname, '..', '..');
const NODE_ONLY = ['fs', 'zlib', 'stream', 'util', 'path'];

/** Deterministic numbers in (-1, 1). */
const fill = (n: number, seed: number) =>
  Array.from({length: n}, (_, i) => Math.sin(seed * 1000 + i * 12.9898) * 0.9);
const rows = (values: number[], width: number) =>
  Array.from({length: values.length / width}, (_, i) => values.slice(i * width, (i + 1) * width));

const Q = rows(fill(3 * 4, 1), 4); // [Tq=3, d=4]
const K = rows(fill(5 * 4, 2), 4); // [Tv=5, d=4]
const V = rows(fill(5 * 2, 3), 2); // [Tv=5, dv=2]
const INPUT = [rows(fill(6 * 8, 4), 8), rows(fill(6 * 8, 5), 8)]; // [batch=2, 6, 8]

/** softmax(q kᵀ / sqrt(d)) v, one batch, in plain JS. */
function attentionReference(q: number[][], k: number[][], v: number[][]): number[][] {
  const d = q[0].length;
  return q.map((qi) => {
    const s = k.map((kj) => kj.reduce((acc, x, c) => acc + x * qi[c], 0) / Math.sqrt(d));
    const m = Math.max(...s);
    const e = s.map((x) => Math.exp(x - m));
    const z = e.reduce((a, b) => a + b, 0);
    return v[0].map((_, c) => e.reduce((acc, w, j) => acc + (w / z) * v[j][c], 0));
  });
}

const APP = `import * as tf from '@tensorflow/tfjs';
import {DotProductAttention, MultiHeadAttention, TransformerEncoder} from 'tfjs-attention';

async function run() {
  await tf.ready();
  const x = tf.input({shape: [6, 8]});
  const h = new MultiHeadAttention({numHeads: 2, keyDim: 4, name: 'mha'}).apply(x);
  const y = new TransformerEncoder({intermediateDim: 16, numHeads: 2, name: 'encoder'}).apply(h);
  const model = tf.model({inputs: x, outputs: y});
  const input = tf.tensor3d(${JSON.stringify(INPUT)});
  const predicted = await model.predict(input).array();
  const saved = await model.save('indexeddb://tfjs-attention-app');
  const loaded = await tf.loadLayersModel('indexeddb://tfjs-attention-app');
  const reloaded = await loaded.predict(input).array();
  const attention = await new DotProductAttention()
    .apply([tf.tensor3d([${JSON.stringify(Q)}]), tf.tensor3d([${JSON.stringify(V)}]), tf.tensor3d([${JSON.stringify(K)}])])
    .array();
  return {
    backend: tf.getBackend(),
    savedWeightBytes: saved.modelArtifactsInfo.weightDataBytes,
    classes: [loaded.getLayer('mha').getClassName(), loaded.getLayer('encoder').getClassName()],
    predicted,
    reloaded,
    attention,
  };
}

run().then(
  (r) => { window.appResult = r; },
  (e) => { window.appError = String((e && e.stack) || e); },
);
`;

const PAGE = `<!doctype html>
<html><head><meta charset="utf-8" /><title>tfjs-attention app</title>
<link rel="icon" href="data:," /></head>
<body><script src="bundle.js"></script></body></html>
`;

let app: string;
let bundle: string;
let meta: {inputs: Record<string, {imports: Array<{path: string; original?: string}>}>};
let browser: Browser;
let server: {url: string; close: () => Promise<void>};

let npmCache: string;

function run(cmd: string, args: string[], cwd: string): string {
  // an empty cache: what npm needs must come from the tarball and this checkout
  const env = {...process.env, npm_config_cache: npmCache};
  return execFileSync(cmd, args, {cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe']});
}

/** The folder node would load `name` from when required in `from` (up to the checkout). */
function packageFolder(name: string, from: string): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (dir === root || dir === path.dirname(dir)) {
      throw new Error(`${name} (needed by ${from}) is not installed in ${root}: run npm ci`);
    }
  }
}

/**
 * The package's runtime dependencies and theirs, as `file:` folders of this checkout's
 * node_modules: name -> spec for the app's package.json.
 */
function localDependencies(): Record<string, string> {
  const found: Record<string, string> = {};
  const visit = (dir: string) => {
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    for (const name of Object.keys(pkg.dependencies ?? {})) {
      const folder = packageFolder(name, dir);
      if (found[name] === `file:${folder}`) continue;
      if (found[name] !== undefined) {
        throw new Error(`two copies of ${name} are needed: ${found[name]} and ${folder}`);
      }
      found[name] = `file:${folder}`;
      visit(folder);
    }
  };
  visit(root);
  return found;
}

beforeAll(async () => {
  // dist/ is built by the globalSetup (browser/global_setup.js)
  app = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-browser-app-'));
  npmCache = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-npm-cache-'));
  const tgz = run(
    'npm',
    ['pack', '--silent', '--ignore-scripts', '--pack-destination', app],
    root,
  ).trim();
  fs.writeFileSync(
    path.join(app, 'package.json'),
    JSON.stringify({
      name: 'app',
      version: '1.0.0',
      private: true,
      // what the tarball depends on, already there: npm needs no registry to resolve it
      dependencies: localDependencies(),
    }),
  );
  // the peers (tfjs) are not installed by npm: linked from this checkout below
  run(
    'npm',
    [
      'install',
      `./${tgz}`,
      '--offline',
      '--install-links',
      '--legacy-peer-deps',
      '--ignore-scripts',
      '--no-audit',
      '--no-fund',
    ],
    app,
  );
  fs.symlinkSync(
    path.join(root, 'node_modules', '@tensorflow'),
    path.join(app, 'node_modules', '@tensorflow'),
  );
  fs.writeFileSync(path.join(app, 'app.js'), APP);
  fs.writeFileSync(path.join(app, 'index.html'), PAGE);
  run(
    path.join(root, 'node_modules', '.bin', 'esbuild'),
    [
      'app.js',
      '--bundle',
      '--platform=browser',
      '--format=iife',
      '--outfile=bundle.js',
      '--metafile=meta.json',
      '--log-level=error',
    ],
    app,
  );
  bundle = fs.readFileSync(path.join(app, 'bundle.js'), 'utf8');
  meta = JSON.parse(fs.readFileSync(path.join(app, 'meta.json'), 'utf8'));
  server = await start({
    '/': path.join(app, 'index.html'),
    '/bundle.js': path.join(app, 'bundle.js'),
  });
  browser = await launchChromium();
}, 180000);

afterAll(async () => {
  await browser?.close();
  await server?.close();
  if (app !== undefined) fs.rmSync(app, {recursive: true, force: true});
  if (npmCache !== undefined) fs.rmSync(npmCache, {recursive: true, force: true});
});

describe('an app bundled from the packed tarball', () => {
  it('is installed from the tarball, and the bundle takes its browser build', () => {
    const installed = path.join(app, 'node_modules', 'tfjs-attention');
    expect(fs.lstatSync(installed).isDirectory()).toBe(true); // unpacked, not a link
    expect(fs.existsSync(path.join(installed, 'LICENSE'))).toBe(true);
    expect(fs.existsSync(path.join(installed, 'src'))).toBe(false);
    const fromPackage = Object.keys(meta.inputs).filter((f) =>
      f.startsWith('node_modules/tfjs-attention/'),
    );
    // dist/browser.mjs, and its chunks: the ones behind import() hold the Keras file reader
    expect(fromPackage).toContain('node_modules/tfjs-attention/dist/browser.mjs');
    for (const f of fromPackage.filter((f) => !f.endsWith('/dist/browser.mjs'))) {
      expect(f).toMatch(/^node_modules\/tfjs-attention\/dist\/browser-chunks\/[\w-]+\.mjs$/);
    }
    expect(bundle).toContain('TransformerEncoder');
  });

  it('holds no Node-only module', () => {
    const nodeOnly = new RegExp(`^(node:)?(${NODE_ONLY.join('|')})(/|$)`);
    const found: string[] = [];
    for (const [file, {imports}] of Object.entries(meta.inputs)) {
      for (const imp of imports) {
        // tfjs' own browser fields map util and fs to empty modules: "(disabled):fs"
        if (nodeOnly.test(imp.original ?? imp.path) && !imp.path.startsWith('(disabled):')) {
          found.push(`${file} -> ${imp.path}`);
        }
      }
    }
    expect(found).toEqual([]);
    // the package's browser build imports tfjs, its own chunks, and (lazily, in the reader's
    // chunk) the zip and HDF5 libraries
    const ours = Object.entries(meta.inputs)
      .filter(([f]) => f.startsWith('node_modules/tfjs-attention/'))
      .flatMap(([, {imports}]) => imports);
    expect(ours.length).toBeGreaterThan(0);
    for (const imp of ours) {
      expect(imp.original).toMatch(
        /^(@tensorflow\/tfjs-(core|layers)|\.\/(browser-chunks\/)?[\w-]+\.mjs|fflate|jsfive)$/,
      );
    }
    expect(bundle).not.toMatch(
      new RegExp(`(require\\(|from |import\\()["'](node:)?(${NODE_ONLY.join('|')})["']`),
    );
    expect(bundle).not.toMatch(/\bpngjs\b/);
  });

  it('runs in Chromium: predicts, saves to indexeddb:// and loads back, attention is right', async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    page.on('response', (res) => {
      if (res.status() >= 400) errors.push(`${res.status()} ${res.url()}`);
    });
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(`console error: ${m.text()}`);
    });
    try {
      await page.goto(server.url);
      await page.waitForFunction(() => {
        const w = window as unknown as {appResult?: unknown; appError?: unknown};
        return w.appResult !== undefined || w.appError !== undefined;
      });
      const {appResult: r, appError} = await page.evaluate(() => {
        const w = window as unknown as {appResult?: unknown; appError?: string};
        return {appResult: w.appResult, appError: w.appError};
      });
      expect(appError).toBeUndefined();
      expect(errors).toEqual([]);
      const result = r as {
        backend: string;
        savedWeightBytes: number;
        classes: string[];
        predicted: number[][][];
        reloaded: number[][][];
        attention: number[][][];
      };
      expect(result.backend).toBe('webgl');
      expect(result.classes).toEqual(['MultiHeadAttention', 'TransformerEncoder']);
      expect(result.savedWeightBytes).toBeGreaterThan(0);
      expect([
        result.predicted.length,
        result.predicted[0].length,
        result.predicted[0][0].length,
      ]).toEqual([2, 6, 8]);
      expect(result.predicted.flat(2).every(Number.isFinite)).toBe(true);
      // the same weights on the same backend: the same numbers
      expectClose(result.reloaded as NestedNumbers, result.predicted as NestedNumbers, 1e-6, 0);
      // webgl (float32 textures) against plain JS
      expectClose(result.attention[0] as NestedNumbers, attentionReference(Q, K, V), 1e-4, 1e-4);
    } finally {
      await page.close();
    }
  });

  it('works from Node too, as installed: CommonJS, ES module and TypeScript under strict', () => {
    fs.writeFileSync(
      path.join(app, 'node.cjs'),
      `const tf = require('@tensorflow/tfjs');
       const {MultiHeadAttention} = require('tfjs-attention');
       const [y, w] = new MultiHeadAttention({numHeads: 2, keyDim: 4}).apply(tf.ones([1, 3, 8]), {returnAttentionScores: true});
       console.log(JSON.stringify([y.shape, w.shape]));`,
    );
    fs.writeFileSync(
      path.join(app, 'node.mjs'),
      `import * as tf from '@tensorflow/tfjs';
       import {DotProductAttention} from 'tfjs-attention';
       const y = new DotProductAttention().apply([tf.ones([1, 2, 4]), tf.ones([1, 5, 4])]);
       console.log(JSON.stringify(y.shape));`,
    );
    fs.writeFileSync(
      path.join(app, 'typed.mts'),
      `import * as tf from '@tensorflow/tfjs';
       import {Attention, MultiHeadAttention, fileSystem} from 'tfjs-attention';
       const x = tf.input({shape: [4, 8]});
       const y: tf.SymbolicTensor = new MultiHeadAttention({numHeads: 2, keyDim: 4}).apply(x);
       export const model = tf.model({inputs: x, outputs: y});
       const [out, scores] = new Attention().apply([tf.ones([1, 2, 8]), tf.ones([1, 3, 8])], {
         returnAttentionScores: true,
       });
       export const shapes: number[][] = [out.shape, scores.shape];
       export const save = fileSystem('unused').save; // present, not optional
       `,
    );
    const out = (file: string) => run(process.execPath, [file], app).trim().split('\n').pop();
    expect(out('node.cjs')).toBe('[[1,3,8],[1,2,3,3]]');
    expect(out('node.mjs')).toBe('[1,2,4]');
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    expect(
      run(
        process.execPath,
        [
          tsc,
          '--noEmit',
          '--strict',
          '--module',
          'nodenext',
          '--moduleResolution',
          'nodenext',
          '--target',
          'es2022',
          '--lib',
          'es2022,dom',
          '--skipLibCheck',
          'typed.mts',
        ],
        app,
      ),
    ).toBe('');
  });
});
