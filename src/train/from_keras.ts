/**
 * `tfjs-attention-train --from-keras <file>`: reads a Keras model (a `.keras` file, a tf-keras 2
 * `.h5` model, or a Keras 3 folder of `config.json` + weights) with a progress bar while its
 * weights are read, prints its summary, and saves it as a tfjs layers model
 * (`<out>/<name>/model.json` + `weights.bin`); no training.
 */
import * as path from 'path';

import '../layers/register';
import {loadKerasModel} from '../interop/load_keras_model';
import {fileSystem} from '../io/file_system';
import {checkWritable} from '../io/paths';
import {selectBackend} from './backend';
import {UsageError} from './options';
import {readingProgress, ProgressSink} from './progress';
import {TF} from './tasks/task';

export interface FromKerasOptions {
  file: string;
  out: string;
  backend: string | null;
}

const ALLOWED = ['from-keras', 'out', 'backend'];

/** The options of `--from-keras`, or null when `--from-keras` is not given (training). */
export function parseFromKeras(argv: string[]): FromKerasOptions | null {
  if (!argv.some((a) => a === '--from-keras' || a.startsWith('--from-keras='))) return null;
  const values: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (m == null) throw new UsageError(`unexpected argument '${argv[i]}'`);
    if (!ALLOWED.includes(m[1])) {
      throw new UsageError(
        `--from-keras takes only --out and --backend; received '--${m[1]}' (a training option)`,
      );
    }
    let value = m[2];
    if (value === undefined) {
      value = argv[i + 1];
      if (value === undefined || value.startsWith('--')) {
        throw new UsageError(`--${m[1]} needs a value`);
      }
      i++;
    }
    if (value === '') throw new UsageError(`--${m[1]} needs a value`);
    values[m[1]] = value;
  }
  return {file: values['from-keras'], out: values.out ?? 'models', backend: values.backend ?? null};
}

/** The folder name of the saved model: the file's name without its extension. */
function modelName(file: string): string {
  const base = path.basename(path.resolve(file));
  return base.replace(/\.(keras|h5|hdf5)$/i, '') || 'model';
}

export async function fromKeras(
  tf: TF,
  options: FromKerasOptions,
  out: ProgressSink,
): Promise<void> {
  const backend = await selectBackend(tf, options.backend);
  const dir = path.resolve(options.out, modelName(options.file));
  await checkWritable(dir).catch((e: Error) => {
    throw new UsageError(`--out ${options.out}: ${e.message.replace(/^fileSystem: /, '')}`);
  });
  out.write(`reading ${options.file} (backend ${backend})\n`);
  const model = await loadKerasModel(options.file, {onProgress: readingProgress(out)});
  try {
    model.summary(undefined, undefined, (line: string) => out.write(`${line}\n`));
    await model.save(fileSystem(dir));
    out.write(`saved ${path.join(dir, 'model.json')} and its weights.bin (tfjs layers format)\n`);
  } finally {
    model.dispose();
  }
}
