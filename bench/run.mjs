// npm run bench: bundles the benchmarks (and tfjs-layers' unexported MultiHeadAttention, whose ESM
// files plain Node cannot load) with esbuild, runs them, then writes the tables in
// bench/README.md. `npm run bench -- --generate` runs the generate benchmark alone, `--attention`
// the attention benchmark alone; `--quick` makes the generate benchmark time one run per mode.
import {execFileSync} from 'node:child_process';

import * as esbuild from 'esbuild';

const args = process.argv.slice(2);
const onlyGenerate = args.includes('--generate');
const onlyAttention = args.includes('--attention');
const external = [
  '@tensorflow/tfjs',
  '@tensorflow/tfjs-core',
  '@tensorflow/tfjs-core/*',
  '@tensorflow/tfjs-layers',
  '@tensorflow/tfjs-backend-wasm',
  '@tensorflow/tfjs-node',
  'onnxruntime-node',
  'onnxruntime-node/*',
  'onnxruntime-web',
  'onnxruntime-web/*',
];
const bundle = (entry, outfile) =>
  esbuild.build({
    entryPoints: [entry],
    bundle: true,
    format: 'cjs',
    platform: 'node',
    target: 'es2019',
    outfile,
    external,
    logLevel: 'warning',
  });
if (!onlyGenerate) {
  await esbuild.build({
    entryPoints: ['node_modules/@tensorflow/tfjs-layers/dist/layers/nlp/multihead_attention.js'],
    bundle: true,
    format: 'cjs',
    platform: 'node',
    outfile: 'bench/.build/tfjs_layers_mha.cjs',
    external: ['@tensorflow/tfjs-core', '@tensorflow/tfjs-core/*'],
    logLevel: 'error',
  });
  await bundle('bench/bench.ts', 'bench/.build/bench.cjs');
  execFileSync(
    process.execPath,
    ['--max-old-space-size=8192', '--expose-gc', 'bench/.build/bench.cjs'],
    {
      stdio: 'inherit',
    },
  );
}
if (!onlyAttention) {
  await bundle('bench/generate_bench.ts', 'bench/.build/generate_bench.cjs');
  execFileSync(
    process.execPath,
    ['bench/.build/generate_bench.cjs', ...args.filter((a) => a === '--quick')],
    {stdio: 'inherit'},
  );
}
execFileSync(process.execPath, ['bench/table.mjs'], {stdio: 'inherit'});
