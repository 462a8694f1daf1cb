/**
 * The training run behind `npm run train`: train a task's model, save it with `fileSystem`, load
 * it back, re-evaluate it on fresh data and write attention heatmaps next to it.
 */
import * as fs from 'fs';
import * as path from 'path';

import '../layers/register';
import {fileSystem} from '../io/file_system';
import {checkWritable} from '../io/paths';
import type {StepReport} from '../generate/step_report';
import {stepReportText} from '../generate/step_report_text';
import {useFastTileGradient} from '../kernels/tile_gradient';
import {attentionHeatmapSvg} from '../viz/heatmap';
import {writeAttentionHeatmapPng} from '../viz/heatmap_png';
import {selectBackend} from './backend';
import {TrainOptions, UsageError} from './options';
import {Progress, ProgressSink} from './progress';
import {mulberry32, withSeededMathRandom} from './random';
import {additionTask} from './tasks/addition';
import {lookupTask} from './tasks/lookup';
import {reverseTask} from './tasks/reverse';
import {Task, TF} from './tasks/task';

export const TASKS: Record<string, Task> = {
  reverse: reverseTask,
  lookup: lookupTask,
  addition: additionTask,
};

export interface TrainResult {
  task: string;
  backend: string;
  dir: string;
  trainedMetric: number;
  reloadedMetric: number;
  seconds: number;
}

const VALIDATION_SIZE = 500;
const FRESH_SIZE = 1000;

export async function train(
  tf: TF,
  options: TrainOptions,
  out: ProgressSink,
): Promise<TrainResult> {
  const task = TASKS[options.task];
  const backend = await selectBackend(tf, options.backend);
  const epochs = options.epochs ?? task.defaultEpochs;
  const batchSize = options.batchSize ?? task.defaultBatchSize;
  const trainSize = options.trainSize ?? task.defaultTrainSize;
  const dir = path.resolve(options.out, task.name);
  // before any training: a folder that cannot be written fails now, not after the run
  await checkWritable(dir).catch((e: Error) => {
    throw new UsageError(`--out ${options.out}: ${e.message.replace(/^fileSystem: /, '')}`);
  });
  out.write(
    `task ${task.name}: ${task.description}\n` +
      `backend ${backend}, seed ${options.seed}, ${epochs} epochs of ${trainSize} samples, batch ${batchSize}\n`,
  );
  const start = Date.now();
  const rng = mulberry32(options.seed);
  const trainData = task.generate(tf, trainSize, rng);
  const validation = task.generate(tf, options.evalSize ?? VALIDATION_SIZE, rng, 'validation');

  const restoreTileGradient = useFastTileGradient();
  const {model, trainedMetric} = await withSeededMathRandom(options.seed, async () => {
    const m = task.buildModel(tf);
    const optimizer = tf.train.adam(task.learningRate);
    m.compile({
      optimizer,
      loss: task.loss?.(tf) ?? 'sparseCategoricalCrossentropy',
      metrics: task.metrics?.(tf) ?? ['acc'],
    });
    const batches = Math.ceil(trainSize / batchSize);
    const progress = new Progress(out, epochs, batches);
    const schedule = task.learningRateSchedule;
    let metric = 0;
    let currentEpoch = 0;
    await m.fit(trainData.inputs, trainData.targets, {
      epochs,
      batchSize,
      shuffle: true,
      verbose: 0,
      callbacks: {
        onEpochBegin: async () => progress.startEpoch(),
        onBatchBegin: async (batch) => {
          if (schedule == null) return;
          // tfjs' Adam reads its learning rate at every step
          (optimizer as unknown as {learningRate: number}).learningRate =
            task.learningRate * schedule((currentEpoch * batches + batch) / (epochs * batches));
        },
        onBatchEnd: async (batch, logs) =>
          progress.batch(currentEpoch, batch, (logs ?? {}) as Record<string, number>),
        onEpochEnd: async (epoch, logs) => {
          metric = await task.accuracy(tf, m, validation);
          progress.endEpoch(epoch, (logs ?? {}) as Record<string, number>, task.metricName, metric);
          currentEpoch = epoch + 1;
        },
      },
    });
    return {model: m, trainedMetric: metric};
  }).finally(restoreTileGradient);
  const seconds = (Date.now() - start) / 1000;

  model.setUserDefinedMetadata({...task.metadata});
  await model.save(fileSystem(dir));
  out.write(`saved ${path.relative(process.cwd(), dir) || dir}/model.json and weights.bin\n`);

  const loaded = await tf.loadLayersModel(fileSystem(dir));
  const freshSize = options.evalSize ?? FRESH_SIZE;
  const fresh = task.generate(tf, freshSize, mulberry32(options.seed + 1000003), 'fresh');
  // a task scored by generate: which step its greedy decoding ran (and why not the compiled one)
  let step: StepReport | null = null;
  const reloadedMetric = await task.accuracy(tf, loaded, fresh, (r) => {
    step = r;
  });
  const att = await task.attention(tf, loaded, fresh, 0);
  fs.writeFileSync(
    path.join(dir, 'attention.svg'),
    attentionHeatmapSvg(att.weights, {
      xLabels: att.xLabels,
      yLabels: att.yLabels,
      title: att.title,
      titles: att.titles,
    }),
  );
  writeAttentionHeatmapPng(path.join(dir, 'attention.png'), att.weights);

  out.write(
    `${task.metricName}: ${(100 * trainedMetric).toFixed(2)}% after training (validation), ` +
      `${(100 * reloadedMetric).toFixed(2)}% for the reloaded model on ${freshSize} fresh samples\n` +
      (step == null ? '' : `generation: ${stepReportText(step)}\n`) +
      `training took ${seconds.toFixed(1)}s; heatmaps in ${path.join(path.relative(process.cwd(), dir) || dir, 'attention.svg')} and attention.png\n`,
  );
  tf.dispose([
    ...trainData.inputs,
    trainData.targets,
    ...validation.inputs,
    validation.targets,
    ...fresh.inputs,
    fresh.targets,
  ]);
  model.dispose();
  loaded.dispose();
  return {task: task.name, backend, dir, trainedMetric, reloadedMetric, seconds};
}
