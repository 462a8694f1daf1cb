// npm run bench -- --finetune: LoRA fine-tuning steps at GPT-2 small's shape (rank 8 on query /
// value, sequence 128, batch 4, Keras' Adam at 2e-5, one thread), the same weights and batch for
// every contender, interleaved round by round, each in a child process of its own:
// - ours on tfjs-wasm and tfjs-node (bench/finetune_ours_child.ts; tfjs' cpu backend is left
//   out: a step takes minutes);
// - keras-hub (TensorFlow backend, CPU) and PyTorch + peft (bench/finetune_python.py, which also
//   makes the preset and the batch: run `python bench/finetune_python.py prepare` first).
// Writes bench/finetune_results.json: per contender the median ms of each round's timed steps,
// the peak RSS, the first and last loss, or the error it failed with.
//   node bench/finetune_bench.mjs [--rounds=N] [--steps=N] [--python=/path/to/python]
import {spawnSync} from 'node:child_process';
import * as fs from 'node:fs';

const args = process.argv.slice(2);
const flag = (name, fallback) =>
  args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const rounds = Number(flag('rounds', 1));
const steps = Number(flag('steps', 3));
const python = flag('python', '/work/venv-torch/bin/python');
const single = {
  OMP_NUM_THREADS: '1',
  TF_NUM_INTRAOP_THREADS: '1',
  TF_NUM_INTEROP_THREADS: '1',
  MKL_NUM_THREADS: '1',
};
const contenders = [
  {
    name: 'ours, tfjs-wasm',
    cmd: process.execPath,
    argv: [
      '--max-old-space-size=8192',
      'bench/.build/finetune_ours_child.cjs',
      'wasm',
      String(steps),
    ],
  },
  {
    name: 'ours, tfjs-node',
    cmd: process.execPath,
    argv: [
      '--max-old-space-size=8192',
      'bench/.build/finetune_ours_child.cjs',
      'tensorflow',
      String(steps),
    ],
  },
  {
    name: 'keras-hub (TensorFlow, CPU)',
    cmd: python,
    argv: ['bench/finetune_python.py', 'keras', '--steps', String(steps)],
  },
  {
    name: 'PyTorch + peft',
    cmd: python,
    argv: ['bench/finetune_python.py', 'torch', '--steps', String(steps)],
  },
];
if (!fs.existsSync('bench/.models/gpt2-small/finetune/batch.json')) {
  console.error('finetune bench: run `python bench/finetune_python.py prepare` first');
  process.exit(2);
}
const results = Object.fromEntries(contenders.map((c) => [c.name, []]));
for (let r = 0; r < rounds; r++) {
  for (const c of contenders) {
    const t0 = Date.now();
    const run = spawnSync(c.cmd, c.argv, {
      encoding: 'utf8',
      env: {...process.env, ...single},
      timeout: 900000,
    });
    const line = run.stdout
      .trim()
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .pop();
    const out =
      line != null && run.status === 0
        ? JSON.parse(line)
        : {
            error:
              (run.stderr || '')
                .split('\n')
                .filter((l) => /Error|Aborted|error/.test(l))
                .slice(0, 2)
                .join(' | ') || `exit ${run.status}`,
          };
    out.wall_s = Math.round((Date.now() - t0) / 1000);
    results[c.name].push(out);
    console.log(
      `round ${r + 1}, ${c.name}: ${out.error ?? `${out.median_ms} ms / step, peak ${(out.peak_rss_bytes / 2 ** 30).toFixed(2)} GiB, loss ${out.loss_first?.toFixed(6)} -> ${out.loss_last?.toFixed(6)}`}`,
    );
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? null : s[Math.floor(s.length / 2)];
};
const summary = Object.fromEntries(
  Object.entries(results).map(([name, runs]) => {
    const ok = runs.filter((x) => x.error == null);
    return [
      name,
      {
        median_ms: median(ok.map((x) => x.median_ms)),
        peak_rss_bytes: median(ok.map((x) => x.peak_rss_bytes)),
        errors: runs.filter((x) => x.error != null).map((x) => x.error),
        runs,
      },
    ];
  }),
);
const torch = summary['PyTorch + peft'].median_ms;
for (const [name, s] of Object.entries(summary)) {
  console.log(
    `${name.padEnd(30)} ${s.median_ms == null ? 'failed: ' + s.errors[0] : `${s.median_ms} ms / step, ${torch ? (s.median_ms / torch).toFixed(2) + 'x PyTorch + peft' : ''}, peak ${(s.peak_rss_bytes / 2 ** 30).toFixed(2)} GiB`}`,
  );
}
fs.writeFileSync(
  'bench/finetune_results.json',
  JSON.stringify({date: new Date().toISOString(), rounds, steps, summary}, null, 1) + '\n',
);
