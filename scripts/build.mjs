// Builds dist/: CommonJS + ES module for Node and bundlers, type declarations, and a browser
// bundle (global `tfAttention`, tfjs taken from the page's global `tf`).
//
// The Keras file readers' libraries (fflate for zip, jsfive for HDF5) are imported by `import()`
// only where a file is read, and stay out of the browser builds: dist/browser.mjs keeps them as
// bare specifiers (the app's bundler resolves them from the package's dependencies and splits
// them into their own chunk, as it does the reader's own code in dist/browser-chunks/), and dist/tfjs-attention.min.js loads them on first use from the ES
// modules dist/tfjs-attention-fflate.mjs / dist/tfjs-attention-jsfive.mjs next to it.
import {execFileSync} from 'node:child_process';
import {chmodSync, rmSync, writeFileSync} from 'node:fs';
import {createRequire} from 'node:module';

import * as esbuild from 'esbuild';

import {BUILD_STAMP, buildInputsHash} from './build_inputs.mjs';

const require = createRequire(import.meta.url);
const external = [
  '@tensorflow/tfjs-core',
  '@tensorflow/tfjs-layers',
  '@tensorflow/tfjs',
  '@tensorflow/tfjs-node',
  '@tensorflow/tfjs-backend-wasm',
  'pngjs',
  'fs',
  'path',
];
rmSync('dist', {recursive: true, force: true});

const common = {
  entryPoints: ['src/index.ts'],
  bundle: true,
  platform: 'node',
  target: 'es2019',
  external,
  sourcemap: true,
  logLevel: 'warning',
};
await esbuild.build({...common, format: 'cjs', outfile: 'dist/index.cjs'});
await esbuild.build({...common, format: 'esm', outfile: 'dist/index.mjs'});

// The training script (bin tfjs-attention-train).
await esbuild.build({
  ...common,
  entryPoints: ['src/train/cli.ts'],
  format: 'cjs',
  outfile: 'dist/train.cjs',
  banner: {js: '#!/usr/bin/env node'},
});
// The fine-tuning script (bin tfjs-attention-finetune).
await esbuild.build({
  ...common,
  entryPoints: ['src/train/finetune_cli.ts'],
  format: 'cjs',
  outfile: 'dist/finetune.cjs',
  banner: {js: '#!/usr/bin/env node'},
});

// the bins run as commands (npx, node_modules/.bin): executable, whatever the umask
for (const bin of ['dist/train.cjs', 'dist/finetune.cjs']) chmodSync(bin, 0o755);

// Browser: resolve the tfjs packages to the global `tf` of the page.
/** The libraries that only the Keras file readers import (lazily), and their files for the page. */
const LAZY_READERS = {fflate: 'tfjs-attention-fflate.mjs', jsfive: 'tfjs-attention-jsfive.mjs'};
/** For the script tag: `import('fflate')` becomes `import('./tfjs-attention-fflate.mjs')`, which a
 * classic script resolves against its own URL. */
const lazyReaderFiles = {
  name: 'lazy-reader-files',
  setup(build) {
    build.onResolve({filter: /^(fflate|jsfive)$/}, (args) => {
      if (args.kind !== 'dynamic-import') {
        throw new Error(`expected ${args.path} imported with import() only, in ${args.importer}`);
      }
      return {path: `./${LAZY_READERS[args.path]}`, external: true};
    });
  },
};
const tfGlobal = {
  name: 'tf-global',
  setup(build) {
    build.onResolve({filter: /^@tensorflow\/tfjs-(core|layers)$/}, (args) => ({
      path: args.path,
      namespace: 'tf-global',
    }));
    build.onLoad({filter: /.*/, namespace: 'tf-global'}, () => ({
      contents: 'module.exports = globalThis.tf;',
      loader: 'js',
    }));
  },
};
// Browser ES module for bundlers (the `browser` export condition): no Node-only module, tfjs
// left to the app's own imports.
// Split: the code behind an `import()` (the Keras file reader) goes to dist/browser-chunks/, an
// ES module the app's bundler sees as its own, so it drops that code for an app that never calls
// loadKerasModel (one file would hold it in esbuild's module wrappers, which no bundler drops).
await esbuild.build({
  entryPoints: {browser: 'src/browser.ts'},
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2019',
  external: ['@tensorflow/tfjs-core', '@tensorflow/tfjs-layers', ...Object.keys(LAZY_READERS)],
  sourcemap: true,
  outdir: 'dist',
  entryNames: '[name]',
  chunkNames: 'browser-chunks/[name]-[hash]',
  outExtension: {'.js': '.mjs'},
  logLevel: 'warning',
});
await esbuild.build({
  entryPoints: ['src/browser.ts'],
  bundle: true,
  format: 'iife',
  globalName: 'tfAttention',
  platform: 'browser',
  target: 'es2019',
  minify: true,
  sourcemap: true,
  plugins: [tfGlobal, lazyReaderFiles],
  outfile: 'dist/tfjs-attention.min.js',
  logLevel: 'warning',
});
// The script tag's lazily loaded readers: each library as one ES module.
for (const [pkg, file] of Object.entries(LAZY_READERS)) {
  await esbuild.build({
    stdin: {contents: `export * from '${pkg}';`, resolveDir: process.cwd(), loader: 'js'},
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2019',
    minify: true,
    outfile: `dist/${file}`,
    logLevel: 'warning',
  });
}

execFileSync(
  process.execPath,
  [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
  {stdio: 'inherit'},
);
// last: the inputs' hash, which jest's globalSetup reads to skip a build of the same inputs
writeFileSync(BUILD_STAMP, `${buildInputsHash(process.cwd())}\n`);
console.log(
  'built dist/index.cjs, dist/index.mjs, dist/browser.mjs, dist/index.d.ts, dist/tfjs-attention.min.js (+ ' +
    Object.values(LAZY_READERS).join(', ') +
    '), dist/train.cjs, dist/finetune.cjs',
);
