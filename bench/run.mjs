// npm run bench: bundles the benchmarks (and tfjs-layers' unexported MultiHeadAttention, whose ESM
// files plain Node cannot load) with esbuild, runs them, then writes the tables in
// bench/README.md. `npm run bench -- --generate` runs the generation benchmark against
// transformers.js alone (bench/generate_vs_transformers.ts; its models come from
// fixtures/gpt2_bench.py and fixtures/family_bench.py), `--generate-cache` the key / value cache
// benchmark alone (bench/generate_bench.ts), `--attention` the attention benchmark alone; `--quick`
// makes the generation benchmark run 1 round at GPT-2's small size, the cache benchmark time one
// run per mode and the attention benchmark 3 runs per contender; `--rounds=N`,
// `--models=small,gpt2-small,smollm2-135m` and `--cpu` (tfjs cpu rows at every size) set the
// generation benchmark's rounds, models and rows. `--sizes=medium,long`, `--backends=wasm` and
// `--runs=N` narrow the attention benchmark (the same as BENCH_SIZES, BENCH_BACKENDS, BENCH_RUNS).
import {execFileSync} from 'node:child_process';

import * as esbuild from 'esbuild';

const args = process.argv.slice(2);
const onlyGenerate = args.includes('--generate');
const onlyCache = args.includes('--generate-cache');
const onlyAttention = args.includes('--attention');
const onlyFinetune = args.includes('--finetune');
const only = onlyGenerate || onlyCache || onlyAttention || onlyFinetune;
const quick = args.includes('--quick');
const flag = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const env = {...process.env};
for (const [name, key] of [
  ['sizes', 'BENCH_SIZES'],
  ['backends', 'BENCH_BACKENDS'],
  ['runs', 'BENCH_RUNS'],
]) {
  if (flag(name) != null) env[key] = flag(name);
}
if (quick && env.BENCH_RUNS == null) env.BENCH_RUNS = '3';
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
if (!only || onlyAttention) {
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
    {stdio: 'inherit', env},
  );
}
if (!only || onlyCache) {
  await bundle('bench/generate_bench.ts', 'bench/.build/generate_bench.cjs');
  execFileSync(
    process.execPath,
    ['bench/.build/generate_bench.cjs', ...(quick ? ['--quick'] : [])],
    {stdio: 'inherit'},
  );
}
if (!only || onlyGenerate) {
  await bundle('bench/generate_ours_child.ts', 'bench/.build/generate_ours_child.cjs');
  await bundle('bench/generate_vs_transformers.ts', 'bench/.build/generate_vs_transformers.cjs');
  const pass = args.filter(
    (a) => a === '--quick' || a === '--cpu' || /^--(rounds|models|contenders)=/.test(a),
  );
  execFileSync(process.execPath, ['bench/.build/generate_vs_transformers.cjs', ...pass], {
    stdio: 'inherit',
  });
}
if (onlyFinetune) {
  await bundle('bench/finetune_ours_child.ts', 'bench/.build/finetune_ours_child.cjs');
  const pass = args.filter((a) => /^--(rounds|steps|python)=/.test(a));
  execFileSync(process.execPath, ['bench/finetune_bench.mjs', ...pass], {stdio: 'inherit'});
  process.exit(0);
}
execFileSync(process.execPath, ['bench/table.mjs'], {stdio: 'inherit'});
