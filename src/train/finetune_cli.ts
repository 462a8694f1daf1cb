/**
 * `tfjs-attention-finetune`: LoRA fine-tuning of a keras-hub preset on a text file, top to
 * bottom: the backend, the preset, a sample before, the run (a progress bar, checkpoints), a
 * sample after, then the adapters, the merged preset and the loss curve (see FINETUNE_USAGE).
 */
import * as fs from 'fs';
import * as path from 'path';

// every layer class and keras-hub family registered, as importing the package does
import '../layers/register';
import '../hub_models/register_layers';
import {finetune} from '../finetune/finetune';
import {generateText} from '../generate/generate_text';
import {loadKerasHubPreset, KerasHubPreset} from '../interop/keras_hub_preset';
import {kerasHubWeightsFile} from '../interop/keras_hub_weights_file';
import {saveLoraWeights} from '../interop/lora_weights_file';
import {lossCurvePng} from '../viz/loss_curve_png';
import {selectBackend} from './backend';
import {FINETUNE_USAGE, FinetuneCliOptions, parseFinetuneOptions} from './finetune_options';
import {UsageError} from './options';
import type {ProgressSink} from './progress';
import type {TF} from './tasks/task';

const NAME = 'tfjs-attention-finetune';

/** `m:ss` of milliseconds. */
function clock(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}

/** The first words of `text` (the default sample prompt). */
const firstWords = (text: string) => text.trim().split(/\s+/).slice(0, 4).join(' ');

async function sample(
  preset: KerasHubPreset,
  prompt: string,
  maxLength: number | undefined,
): Promise<string> {
  const [text] = await generateText(preset, prompt, maxLength == null ? {} : {maxLength});
  return text;
}

/** Runs the fine-tuning job; resolves to the exit code. */
export async function runFinetune(tf: TF, o: FinetuneCliOptions, out: ProgressSink): Promise<void> {
  const text = await fs.promises.readFile(o.text, 'utf8').catch((e: NodeJS.ErrnoException) => {
    throw new UsageError(`cannot read --text ${o.text} (${e.code ?? e.message})`);
  });
  if (!fs.existsSync(path.join(o.preset, 'config.json'))) {
    throw new UsageError(`--preset ${o.preset} is not a keras-hub preset folder (no config.json)`);
  }
  const backend = await selectBackend(tf, o.backend);
  out.write(`backend: ${backend}\n`);
  const preset = await loadKerasHubPreset(o.preset);
  try {
    if (preset.tokenizer == null || preset.preprocessor == null) {
      throw new UsageError(`--preset ${o.preset} has no tokenizer or preprocessor to train with`);
    }
    const prompt = o.sample ?? firstWords(text);
    out.write(`sample before: ${JSON.stringify(await sample(preset, prompt, o.maxLength))}\n`);
    fs.mkdirSync(path.join(o.out, 'checkpoints'), {recursive: true});
    const tty = Boolean(out.isTTY);
    let lastTenth = -1;
    const result = await finetune(preset, text, {
      rank: o.rank,
      alpha: o.alpha,
      steps: o.steps,
      epochs: o.epochs,
      batchSize: o.batchSize,
      sequenceLength: o.sequenceLength,
      learningRate: o.learningRate,
      schedule: o.schedule,
      warmupSteps: o.warmupSteps,
      optimizer: o.optimizer,
      weightDecay: o.weightDecay,
      globalClipnorm: o.clipnorm,
      seed: o.seed,
      onProgress: async (p) => {
        const width = 24;
        const filled = Math.round((p.step / p.steps) * width);
        const line =
          `step ${p.step}/${p.steps} [${'='.repeat(filled)}${'.'.repeat(width - filled)}] ` +
          `loss ${p.loss.toFixed(4)} · ${Math.round(p.tokensPerSecond)} tokens/s · ` +
          `${clock(p.remainingMs)} left`;
        if (tty) out.write(`\r${line}${p.step === p.steps ? '\n' : ''}`);
        else if (Math.floor((p.step / p.steps) * 10) > lastTenth || p.step === p.steps) {
          lastTenth = Math.floor((p.step / p.steps) * 10);
          out.write(`${line}\n`);
        }
        if (o.checkpointEvery > 0 && p.step % o.checkpointEvery === 0) {
          const file = path.join(o.out, 'checkpoints', `step-${p.step}.lora.h5`);
          fs.writeFileSync(file, await saveLoraWeights(preset.model));
        }
      },
    });
    out.write(`sample after: ${JSON.stringify(await sample(preset, prompt, o.maxLength))}\n`);
    fs.writeFileSync(path.join(o.out, 'adapters.lora.h5'), await saveLoraWeights(preset.model));
    const merged = path.join(o.out, 'preset');
    fs.rmSync(merged, {recursive: true, force: true});
    fs.cpSync(o.preset, merged, {recursive: true});
    fs.writeFileSync(
      path.join(merged, 'model.weights.h5'),
      await kerasHubWeightsFile(preset.model),
    );
    fs.writeFileSync(path.join(o.out, 'losses.json'), JSON.stringify(result.losses));
    fs.writeFileSync(path.join(o.out, 'loss.png'), lossCurvePng(result.losses));
    const first = result.losses[0];
    const last = result.losses[result.losses.length - 1];
    out.write(
      `${result.losses.length} steps in ${clock(result.ms)}, loss ${first.toFixed(4)} -> ` +
        `${last.toFixed(4)}, ${result.tokens} tokens; wrote ${o.out}/adapters.lora.h5, ` +
        `${o.out}/preset/, ${o.out}/loss.png\n`,
    );
  } finally {
    preset.dispose();
  }
}

export async function main(argv: string[]): Promise<number> {
  try {
    const options = parseFinetuneOptions(argv);
    if (options.help) {
      process.stdout.write(`${FINETUNE_USAGE}\n`);
      return 0;
    }
    let tf: TF;
    try {
      // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded after the options are valid
      tf = require('@tensorflow/tfjs') as TF;
    } catch {
      process.stderr.write(
        `${NAME}: error: fine-tuning needs @tensorflow/tfjs; install it next to tfjs-attention: ` +
          'npm install @tensorflow/tfjs @tensorflow/tfjs-backend-wasm\n',
      );
      return 2;
    }
    await runFinetune(tf, options, process.stdout);
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`${NAME}: error: ${e.message}\nRun '${NAME} --help' for the options.\n`);
      return 2;
    }
    process.stderr.write(`${NAME}: failed: ${(e as Error).message}\n`);
    if (process.env.DEBUG) process.stderr.write(`${(e as Error).stack}\n`);
    return 1;
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then((code) => {
    process.exitCode = code;
  });
}
