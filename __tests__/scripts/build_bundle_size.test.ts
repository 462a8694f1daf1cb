/**
 * The Keras file readers are loaded lazily: an app that only builds layers, bundled by esbuild
 * (minified, tree-shaken) from the package's browser build (dist/browser.mjs, built by the
 * globalSetup), stays within a few KB of a recorded size; the reader (its own code in
 * dist/browser-chunks/, fflate and jsfive as bare `import()` specifiers) goes only into an app
 * that calls loadKerasModel, in chunks of their own when the app's bundler splits, and such an
 * app still loads a committed .keras file and predicts what Keras predicted. The script tag's
 * dist/tfjs-attention.min.js leaves fflate and jsfive to the two ES modules it imports on first
 * use (dist/tfjs-attention-fflate.mjs, dist/tfjs-attention-jsfive.mjs).
 */
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as esbuild from 'esbuild';

const root = path.resolve(__dirname, '..', '..');
const dist = path.join(root, 'dist');

/**
 * Minified size in bytes of LAYERS_APP below, measured when the readers were made lazy (the
 * reading code and the tokenizers add nothing to it). Update it, with the reason in the commit,
 * when layers are added to the package; a jump of tens of KB means something stopped being lazy
 * or tree-shakable (before: 284,406 bytes, jsfive and fflate kept in esbuild's module wrappers).
 */
const LAYERS_APP_BYTES = 238_633; // 226,909 before LoRA on Dense, Embedding, ReversibleEmbedding and the int8 / int4 layers (the package's Dense and Embedding registered under tfjs' names, lora.ts' lookup term, merges and requantization, ops/gather_rows.ts; 11.4 KB); 222,665 before LoRA (layers/core/lora.ts, lora_model.ts, keras_layer_order.ts and EinsumDense's LoRA methods; 4.2 KB); 214,309 before the int4 layers (ops/int4.ts, ops/int4_products.ts, the layers' int4 forms); 162,479 before the Qwen, Qwen 3, Mistral, SmolLM3 and Gemma 3 layers and the families' compile rules (registered for deserialization, they sit in the layers' shared chunk); 153,269 before the masked tfjs layers (GlobalAveragePooling1D, Softmax, merge masks) and the int8 EinsumDense equations; 149,166 before the eager step's fused ops
/**
 * The entry chunk of an app calling loadKerasModel, split: the layers and loadKerasModel's static
 * part (the Keras topology rewrite it shares with converted models); the readers are elsewhere.
 */
const KERAS_APP_ENTRY_BYTES = 171_035;
/** "A few KB". */
const SLACK = 4 * 1024;
/**
 * The script tag's bundle (it holds everything but the two libraries): 412,735 bytes with jsfive
 * and fflate inside, 296,457 when they became lazy, 335,271 with loadKerasHubPreset, the Keras int8
 * files and the step kernels of the generation work added, 480,874 with five more keras-hub families,
 * SentencePiece and the rotary step ops. It grows with every feature, so it is
 * held below this size plus half the libraries' 114 KB, which their return would pass.
 */
const MIN_JS_BYTES = 549_983; // 480,874 before int4 (ops/int4*.ts, the int4 kernels' module bytes) and LoRA fine-tuning (finetune/, the .lora.h5 file, the merged preset weights)
const MIN_JS_GROWTH = 57 * 1024;

const LAYERS_APP = `import {MultiHeadAttention} from 'tfjs-attention';
console.log(new MultiHeadAttention({numHeads: 2, keyDim: 4}).getConfig());`;

// strings found only in the readers' code: our zip and HDF5 readers, fflate and jsfive
const READER_MARKERS = [
  'reading a .keras file',
  'not a readable HDF5 file',
  'invalid zip data', // fflate
  'superblock version', // jsfive
];

/** The markers found in `text` (a short failure message instead of a bundle printed whole). */
const markersIn = (text: string) => READER_MARKERS.filter((m) => text.includes(m));

async function bundle(
  contents: string,
  options: esbuild.BuildOptions = {},
): Promise<{outputFiles: esbuild.OutputFile[]; errors: esbuild.Message[]}> {
  const result = await esbuild.build({
    stdin: {contents, resolveDir: root, loader: 'js'},
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    write: false,
    external: ['@tensorflow/*'],
    alias: {'tfjs-attention': path.join(dist, 'browser.mjs')},
    logLevel: 'error',
    ...options,
  });
  return {outputFiles: result.outputFiles ?? [], errors: result.errors};
}

describe('browser bundle size (lazy Keras readers)', () => {
  it('the markers identify the readers (so their absence below means something)', async () => {
    const fflate = fs.readFileSync(path.join(dist, 'tfjs-attention-fflate.mjs'), 'utf8');
    const jsfive = fs.readFileSync(path.join(dist, 'tfjs-attention-jsfive.mjs'), 'utf8');
    const chunks = fs
      .readdirSync(path.join(dist, 'browser-chunks'))
      .filter((f) => f.endsWith('.mjs'))
      .map((f) => fs.readFileSync(path.join(dist, 'browser-chunks', f), 'utf8'))
      .join('\n');
    expect(fflate).toContain(READER_MARKERS[2]);
    expect(jsfive).toContain(READER_MARKERS[3]);
    expect(chunks).toContain(READER_MARKERS[0]);
    expect(chunks).toContain(READER_MARKERS[1]);
  });

  it('an app that only builds layers stays within a few KB of its recorded size', async () => {
    const {outputFiles} = await bundle(LAYERS_APP);
    expect(outputFiles).toHaveLength(1);
    const text = outputFiles[0].text;
    expect(markersIn(text)).toEqual([]);
    // the tokenizers are tree-shaken too (their class names survive minification as strings)
    expect(/WordPiece|merges\.txt/.test(text)).toBe(false);
    const bytes = outputFiles[0].contents.length;
    if (bytes > LAYERS_APP_BYTES + SLACK) {
      throw new Error(
        `expected the layers-only app to be at most ${LAYERS_APP_BYTES} + ${SLACK} bytes, ` +
          `received ${bytes} bytes`,
      );
    }
    expect(bytes).toBeGreaterThan(LAYERS_APP_BYTES / 2); // the app bundle really holds the layers
  });

  it('an app calling loadKerasModel gets the readers in chunks of their own when it splits', async () => {
    const {outputFiles} = await bundle(
      `import {loadKerasModel} from 'tfjs-attention';
       export const load = (bytes) => loadKerasModel(bytes);`,
      {splitting: true, outdir: path.join(os.tmpdir(), 'unused-out'), entryNames: 'app'},
    );
    const entry = outputFiles.find((f) => path.basename(f.path) === 'app.js');
    if (entry === undefined) throw new Error('expected an app.js output');
    const lazy = outputFiles.filter((f) => f !== entry && f.path.endsWith('.js'));
    expect(lazy.length).toBeGreaterThanOrEqual(2); // the reader and its libraries
    expect(markersIn(entry.text)).toEqual([]);
    expect(markersIn(lazy.map((f) => f.text).join('\n'))).toEqual(READER_MARKERS);
    expect(entry.contents.length).toBeLessThanOrEqual(KERAS_APP_ENTRY_BYTES + SLACK);
    // fflate, jsfive and the reader: over 100 KB that only a file being read loads
    expect(lazy.reduce((n, f) => n + f.contents.length, 0)).toBeGreaterThan(100_000);
  });

  it('such an app, bundled from the browser build, loads a .keras file and predicts as Keras', async () => {
    const fixture = path.join(root, 'fixtures', 'keras_files');
    const io = JSON.parse(fs.readFileSync(path.join(fixture, 'functional.io.json'), 'utf8'));
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-lazy-app-'));
    try {
      fs.symlinkSync(path.join(root, 'node_modules'), path.join(out, 'node_modules'));
      await bundle(
        `import * as tf from '@tensorflow/tfjs';
         import {readFileSync} from 'fs';
         import {loadKerasModel} from 'tfjs-attention';
         const io = JSON.parse(readFileSync(${JSON.stringify(path.join(fixture, 'functional.io.json'))}, 'utf8'));
         const bytes = readFileSync(${JSON.stringify(path.join(fixture, 'functional.keras'))});
         const fractions = [];
         const model = await loadKerasModel(new Uint8Array(bytes), {onProgress: (f) => fractions.push(f)});
         const [x] = io.inputs;
         const y = model.predict(tf.tensor(x.data, x.shape, x.dtype));
         console.log(JSON.stringify({shape: y.shape, data: Array.from(y.dataSync()), last: fractions[fractions.length - 1]}));`,
        {
          write: true,
          splitting: true,
          minify: false,
          outdir: out,
          entryNames: 'app',
          outExtension: {'.js': '.mjs'},
          external: ['@tensorflow/*', 'fs'],
        },
      );
      expect(fs.readdirSync(out).filter((f) => f.endsWith('.mjs')).length).toBeGreaterThan(1);
      const printed = execFileSync(process.execPath, [path.join(out, 'app.mjs')], {
        cwd: out,
        encoding: 'utf8',
      });
      const result = JSON.parse(printed.trim().split('\n').pop() as string);
      expect(result.shape).toEqual(io.outputs[0].shape);
      expect(result.last).toBe(1);
      const expected: number[] = io.outputs[0].data;
      const worst = Math.max(...expected.map((v, i) => Math.abs(v - result.data[i])));
      expect(worst).toBeLessThan(1e-4); // Keras' recorded predictions
    } finally {
      fs.rmSync(out, {recursive: true, force: true});
    }
  });

  it('the script tag bundle imports fflate and jsfive from the files next to it, on first use', async () => {
    const minJs = fs.readFileSync(path.join(dist, 'tfjs-attention.min.js'), 'utf8');
    expect(minJs).toContain('import("./tfjs-attention-fflate.mjs")');
    expect(minJs).toContain('import("./tfjs-attention-jsfive.mjs")');
    // our readers are in it; the libraries are not
    expect(markersIn(minJs)).toEqual(READER_MARKERS.slice(0, 2));
    expect(Buffer.byteLength(minJs)).toBeLessThanOrEqual(MIN_JS_BYTES + MIN_JS_GROWTH);
    // the two modules export what the readers take from the packages
    const fflate = await bundle(`import {inflateSync} from './dist/tfjs-attention-fflate.mjs';
      console.log(inflateSync);`);
    const jsfive = await bundle(`import {File, Group} from './dist/tfjs-attention-jsfive.mjs';
      console.log(File, Group);`);
    expect(fflate.errors).toEqual([]);
    expect(jsfive.errors).toEqual([]);
  });
});
