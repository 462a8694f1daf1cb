/**
 * One contender of `npm run bench -- --finetune`, this package: LoRA fine-tuning steps at GPT-2
 * small's shape (rank 8 on query / value, keras-hub's targets; Keras' Adam at 2e-5; one batch of
 * 4 x 128 tokens) on the preset and batch bench/finetune_python.py `prepare` wrote. Prints one
 * JSON line: the ms of each timed step (after 2 warm-up steps), their median, the peak RSS, the
 * first and last loss.
 *
 *   node bench/.build/finetune_ours_child.cjs <wasm|cpu|tensorflow> <steps>
 */
import * as fs from 'fs';

import * as tf from '@tensorflow/tfjs';

import {enableLora, KerasAdam, loadKerasHubPreset} from '../src';
import {trainStep, type CausalLmBatch} from '../src/finetune/train_step';

const DIR = 'bench/.models/gpt2-small/finetune';

function peakRss(): number {
  const status = fs.readFileSync('/proc/self/status', 'utf8');
  const kb = /VmHWM:\s+(\d+) kB/.exec(status);
  return kb == null ? process.memoryUsage().rss : Number(kb[1]) * 1024;
}

async function main(): Promise<void> {
  const [backend, stepsArg, rowsArg] = process.argv.slice(2);
  const rows = Number(rowsArg ?? 4);
  if (backend === 'wasm') await import('@tensorflow/tfjs-backend-wasm');
  if (backend === 'tensorflow') {
    // optional (not a dependency: no types to import), loaded by name where it is installed
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('@tensorflow/tfjs-node');
  }
  if (!(await tf.setBackend(backend))) throw new Error(`backend ${backend} failed`);
  await tf.ready();
  const steps = Number(stepsArg ?? 5);
  const raw = JSON.parse(fs.readFileSync(`${DIR}/batch.json`, 'utf8')) as {
    token_ids: number[][];
    padding_mask: number[][];
    y: number[][];
    sample_weight: number[][];
  };
  const batch: CausalLmBatch = {
    tokenIds: raw.token_ids.slice(0, rows),
    paddingMask: raw.padding_mask.slice(0, rows),
    y: raw.y.slice(0, rows),
    sampleWeight: raw.sample_weight.slice(0, rows),
  };
  const preset = await loadKerasHubPreset(`${DIR}/keras_preset`);
  enableLora(preset.model, 8);
  const trainable = preset.model.trainableWeights.reduce(
    (n, w) => n + (w.shape as number[]).reduce((a, b) => a * b, 1),
    0,
  );
  const optimizer = new KerasAdam({learningRate: 2e-5});
  const losses: number[] = [];
  const ms: number[] = [];
  for (let i = 0; i < steps + 2; i++) {
    const t0 = performance.now();
    losses.push(trainStep(preset.model, batch, optimizer));
    if (i >= 2) ms.push(performance.now() - t0);
  }
  const sorted = [...ms].sort((a, b) => a - b);
  process.stdout.write(
    JSON.stringify({
      contender: `ours-${backend}`,
      ms_per_step: ms.map((m) => Math.round(m)),
      median_ms: Math.round(sorted[Math.floor(sorted.length / 2)]),
      peak_rss_bytes: peakRss(),
      loss_first: losses[0],
      loss_last: losses[losses.length - 1],
      trainable_params: trainable,
    }) + '\n',
  );
  optimizer.dispose();
  preset.dispose();
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack}\n`);
  process.exitCode = 1;
});
