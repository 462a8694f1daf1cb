// Builds dist/: CommonJS + ES module for Node and bundlers, type declarations, and a browser
// bundle (global `tfAttention`, tfjs taken from the page's global `tf`).
import {execFileSync} from 'node:child_process';
import {rmSync} from 'node:fs';
import {createRequire} from 'node:module';

import * as esbuild from 'esbuild';

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

// Browser: resolve the tfjs packages to the global `tf` of the page.
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
await esbuild.build({
  entryPoints: ['src/browser.ts'],
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: 'es2019',
  external: ['@tensorflow/tfjs-core', '@tensorflow/tfjs-layers'],
  sourcemap: true,
  outfile: 'dist/browser.mjs',
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
  plugins: [tfGlobal],
  outfile: 'dist/tfjs-attention.min.js',
  logLevel: 'warning',
});

execFileSync(
  process.execPath,
  [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.build.json'],
  {stdio: 'inherit'},
);
console.log(
  'built dist/index.cjs, dist/index.mjs, dist/browser.mjs, dist/index.d.ts, dist/tfjs-attention.min.js, dist/train.cjs',
);
