// npm run bench: bundles the benchmark (and tfjs-layers' unexported MultiHeadAttention, whose ESM
// files plain Node cannot load) with esbuild, runs it, then writes the table in bench/README.md.
import {execFileSync} from 'node:child_process';

import * as esbuild from 'esbuild';

const external = [
  '@tensorflow/tfjs',
  '@tensorflow/tfjs-core',
  '@tensorflow/tfjs-core/*',
  '@tensorflow/tfjs-layers',
  '@tensorflow/tfjs-backend-wasm',
];
await esbuild.build({
  entryPoints: ['node_modules/@tensorflow/tfjs-layers/dist/layers/nlp/multihead_attention.js'],
  bundle: true,
  format: 'cjs',
  platform: 'node',
  outfile: 'bench/.build/tfjs_layers_mha.cjs',
  external: ['@tensorflow/tfjs-core', '@tensorflow/tfjs-core/*'],
  logLevel: 'error',
});
await esbuild.build({
  entryPoints: ['bench/bench.ts'],
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'es2019',
  outfile: 'bench/.build/bench.cjs',
  external,
  logLevel: 'warning',
});
execFileSync(process.execPath, ['--max-old-space-size=8192', 'bench/.build/bench.cjs'], {
  stdio: 'inherit',
});
execFileSync(process.execPath, ['bench/table.mjs'], {stdio: 'inherit'});
