/**
 * `npm run bench -- --generate`: greedy generation, this package against transformers.js on the
 * same weights (bench/.models/<model>/: GPT-2 made by fixtures/gpt2_bench.py, the Llama with
 * SmolLM2-135M's shape and the Qwen 2.5 with Qwen2.5-0.5B's made by fixtures/family_bench.py), each
 * contender in its own process (bench/generate_ours_child.ts, bench/generate_transformers_child.mjs),
 * rounds interleaved (round r runs every contender once), medians with min / max over rounds.
 *
 * Options: `--quick` (1 round, the small size only), `--rounds=N` (default 3),
 * `--models=small,gpt2-small,smollm2-135m` (default every model of MODEL_NAMES; a model whose
 * files are missing is skipped with a note), `--cpu` (tfjs cpu rows at every size, not only
 * GPT-2's small one), `--contenders=ours-wasm-float32,ours-wasm-int8` (only these rows; such a
 * partial run writes bench/.build/generate_vs_transformers.partial.json and leaves the committed
 * results as they are). Writes bench/generate_vs_transformers.json, keeping the models this run
 * did not measure from the file as it was (each model says its own date and commit);
 * bench/table.mjs puts its tables in bench/README.md. Each of our rows says whether its timed
 * generation ran the compiled step (`compileRefusal` null) and an alarm is raised when it did not;
 * each float32 row of ours is checked against the issue's bounds (TARGETS).
 */
import {execFileSync, spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {
  ChildResult,
  Contender,
  contenders,
  markdownTable,
  mismatchLines,
  Row,
  summarize,
  targetLines,
} from './generate_summary';

const args = process.argv.slice(2);
const flag = (name: string): string | undefined =>
  args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const QUICK = args.includes('--quick');
const ROUNDS = QUICK ? 1 : Number(flag('rounds') ?? 3);
/** Every model the bench knows, in the order of the tables. */
const MODEL_NAMES = ['small', 'gpt2-small', 'smollm2-135m', 'qwen2.5-0.5b'];
const SIZES = (flag('models') ?? (QUICK ? 'small' : MODEL_NAMES.join(','))).split(',');
const CPU_EVERYWHERE = args.includes('--cpu');
const MODELS = path.join('bench', '.models');
const ONLY = flag('contenders')?.split(',') ?? null;
const OUT = ONLY
  ? path.join('bench', '.build', 'generate_vs_transformers.partial.json')
  : path.join('bench', 'generate_vs_transformers.json');

interface Meta {
  size: string;
  /** `llama`, `qwen` (fixtures/family_bench.py); absent for GPT-2. */
  family?: string;
  kv_heads?: number;
  layers: number;
  width: number;
  heads: number;
  vocab: number;
  parameters: number;
  weight_bytes: number;
  prompt: number[];
  new_tokens: number;
  torch_greedy_ids: number[];
  torch_min_top2_gap: number;
  max_abs_logits: Record<string, number>;
  versions: Record<string, string>;
}

const notes: string[] = [];
const alarms: string[] = [];
const targets: string[] = [];
/** The script that makes a model's files. */
const maker = (size: string): string =>
  ['small', 'gpt2-small'].includes(size) ? 'fixtures/gpt2_bench.py' : 'fixtures/family_bench.py';

function tfjsNodeInstalled(): boolean {
  try {
    require.resolve('@tensorflow/tfjs-node');
    return true;
  } catch {
    return false;
  }
}

/** One child: its RESULT line, `{na}` when it reported one, or a failure. */
function runChild(size: string, c: Contender): ChildResult | {na: string} {
  const env = {
    ...process.env,
    TF_NUM_INTRAOP_THREADS: '1',
    TF_NUM_INTEROP_THREADS: '1',
    OMP_NUM_THREADS: '1',
    TF_CPP_MIN_LOG_LEVEL: '2',
  };
  const argv =
    c.kind === 'ours'
      ? [
          '--max-old-space-size=8192',
          path.join('bench', '.build', 'generate_ours_child.cjs'),
          size,
          c.runtime,
          c.dtype,
        ]
      : [
          '--max-old-space-size=8192',
          path.join('bench', 'generate_transformers_child.mjs'),
          size,
          c.runtime,
          c.dtype === 'int8' ? 'q8' : c.dtype === 'int4' ? 'q4' : 'fp32',
        ];
  const r = spawnSync(process.execPath, argv, {
    env,
    encoding: 'utf8',
    maxBuffer: 64 * 2 ** 20,
    timeout: 30 * 60 * 1000,
  });
  const line = (r.stdout ?? '').split('\n').find((l) => l.startsWith('RESULT '));
  if (r.status !== 0 || line == null) {
    const why = `${(r.stderr ?? '').trim().split('\n').slice(-3).join(' / ')}`.slice(0, 300);
    const msg = `failed (exit ${r.status ?? r.signal}): ${why}`;
    alarms.push(`${size}: ${c.label}: ${msg}`);
    console.error(`!! ${size} ${c.id}: ${msg}`);
    return {na: 'failed: see notes'};
  }
  return JSON.parse(line.slice('RESULT '.length)) as ChildResult | {na: string};
}

function benchSize(size: string): object | null {
  const dir = path.join(MODELS, size);
  if (!fs.existsSync(path.join(dir, 'meta.json')) || !fs.existsSync(path.join(dir, 'tjs'))) {
    notes.push(
      `${size}: skipped, no models in ${dir} (make them with /work/venv-torch/bin/python ${maker(size)} ${size})`,
    );
    return null;
  }
  const meta = JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8')) as Meta;
  const cpu = size === 'small' || CPU_EVERYWHERE;
  const list = contenders({cpu, tensorflow: tfjsNodeInstalled()}).filter(
    (c) => ONLY == null || ONLY.includes(c.id),
  );
  const results: Record<string, ChildResult[]> = {};
  const na: Record<string, string> = {};
  const started = Date.now();
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of list) {
      if (na[c.id] != null) continue;
      const r = runChild(size, c);
      if ('na' in r) {
        na[c.id] = r.na.startsWith('failed') ? r.na : `n/a: ${r.na}`;
        console.log(`${size} round ${round + 1} ${c.id}: ${na[c.id]}`);
        continue;
      }
      (results[c.id] ??= []).push(r);
      const refusal = (r as {compileRefusal?: string | null}).compileRefusal;
      if (c.kind === 'ours' && refusal != null) {
        const line = `${size}: ${c.label}: the eager stepper ran, not the compiled step: ${refusal}`;
        if (!alarms.includes(line)) alarms.push(line);
        console.error(`!! ${line}`);
      }
      const gaps = [...r.gapsMs].sort((a, b) => a - b);
      console.log(
        `${size} round ${round + 1} ${c.id.padEnd(22)} ttft ${r.ttftMs.toFixed(1).padStart(7)} ms  ` +
          `${gaps[gaps.length >> 1].toFixed(2).padStart(7)} ms/token  rss ${(r.maxRssBytes / 1e9).toFixed(2)} GB` +
          (r.maxAbsLogitsVsKeras != null
            ? `  |logits - Keras| ${r.maxAbsLogitsVsKeras.toExponential(1)}`
            : ''),
      );
    }
  }
  const rows: Row[] = summarize(
    list,
    results,
    na,
    meta.torch_greedy_ids,
    meta.prompt.length,
    meta.weight_bytes,
  );
  for (const line of mismatchLines(size, rows)) {
    alarms.push(line);
    console.error(`!! TOKEN MISMATCH: ${line}`);
  }
  for (const line of targetLines(size, rows)) {
    targets.push(line);
    console.log(`target: ${line}`);
  }
  for (const r of rows) {
    if (r.maxAbsLogitsVsKeras != null && r.maxAbsLogitsVsKeras > 1e-4) {
      const line = `${size}: ${r.contender.label}: logits differ from Keras' by ${r.maxAbsLogitsVsKeras.toExponential(2)} (> 1e-4)`;
      alarms.push(line);
      console.error(`!! ${line}`);
    }
  }
  const versions = Object.fromEntries(
    list.map((c) => [c.id, results[c.id]?.[0]?.runtimeVersion ?? null]),
  );
  return {
    size,
    date: new Date().toISOString(),
    commit: commitOf(),
    model: {
      family: meta.family ?? 'gpt2',
      layers: meta.layers,
      width: meta.width,
      heads: meta.heads,
      kvHeads: meta.kv_heads ?? meta.heads,
      vocab: meta.vocab,
      parameters: meta.parameters,
      weightBytes: meta.weight_bytes,
      promptTokens: meta.prompt.length,
      newTokens: meta.new_tokens,
      torchMinTop2Gap: meta.torch_min_top2_gap,
      maxAbsLogits: meta.max_abs_logits,
      pythonVersions: meta.versions,
    },
    cpuNote: cpu
      ? null
      : 'no tfjs cpu rows at this size: models this size take minutes per generation on tfjs cpu (`--cpu` adds them)',
    targets: targetLines(size, rows),
    seconds: (Date.now() - started) / 1000,
    versions,
    rows: rows.map((r) => ({...r, id: r.contender.id})),
    results,
    table: markdownTable(rows),
  };
}

/** The checkout's commit, `(with uncommitted changes)` when tracked files differ from it. */
function commitOf(): string {
  let commit = 'unknown';
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {encoding: 'utf8'}).trim();
    const dirty = execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], {
      encoding: 'utf8',
    }).trim();
    if (dirty) commit += ' (with uncommitted changes)';
  } catch {
    // not a git checkout
  }
  return commit;
}

/** The models of the results file as it was that this run did not measure (kept, in MODEL_NAMES' order). */
function keptSizes(measured: readonly {size: string}[]): {size: string}[] {
  if (ONLY != null || !fs.existsSync(OUT)) return [];
  const old = JSON.parse(fs.readFileSync(OUT, 'utf8')) as {sizes?: {size: string}[]};
  return (old.sizes ?? []).filter((s) => !measured.some((m) => m.size === s.size));
}

function main(): void {
  if (!tfjsNodeInstalled()) {
    notes.push(
      'tfjs-node rows skipped: @tensorflow/tfjs-node is not installed (scripts/tfjs-node-from-wheel.sh builds it)',
    );
  }
  const t0 = Date.now();
  const loadBefore = os.loadavg()[0];
  const measured = SIZES.map(benchSize).filter((s) => s != null) as {size: string}[];
  const order = (s: {size: string}): number =>
    MODEL_NAMES.includes(s.size) ? MODEL_NAMES.indexOf(s.size) : MODEL_NAMES.length;
  const sizes = [...keptSizes(measured), ...measured].sort((a, b) => order(a) - order(b));
  const commit = commitOf();
  const out = {
    date: new Date().toISOString(),
    commit,
    node: process.version,
    machine: `${os.cpus()[0]?.model ?? 'cpu'}, ${os.cpus().length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${process.platform} ${process.arch}`,
    rounds: ROUNDS,
    quick: QUICK,
    // the 1-minute load average of the machine (other processes share its cores)
    loadAverage: {before: loadBefore, after: os.loadavg()[0]},
    seconds: (Date.now() - t0) / 1000,
    measured: measured.map((s) => s.size),
    notes,
    alarms,
    targets,
    sizes,
  };
  fs.writeFileSync(OUT, JSON.stringify(out, null, 1) + '\n');
  console.log(`wrote ${OUT}`);
  for (const n of notes) console.log(`note: ${n}`);
  for (const t of targets) console.log(`target: ${t}`);
  if (alarms.length) {
    console.error(`!! ${alarms.length} problem(s):`);
    for (const a of alarms) console.error(`!!   ${a}`);
  }
}

main();
