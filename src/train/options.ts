/** Command-line options of the training script. */
export interface TrainOptions {
  task: string;
  epochs: number | null;
  batchSize: number | null;
  trainSize: number | null;
  /** Validation and fresh evaluation samples; null: 500 and 1000. */
  evalSize: number | null;
  backend: string | null;
  seed: number;
  out: string;
  help: boolean;
}

export const TASK_NAMES = ['reverse', 'lookup', 'addition'];
export const BACKEND_NAMES = ['tensorflow', 'wasm', 'cpu'];

export const USAGE = `Usage: tfjs-attention-train [options]

Trains an attention model on a built-in synthetic task, saves it to <out>/<task>/, loads it back,
re-evaluates it on fresh data and writes attention heatmaps (attention.svg, attention.png).

Options:
  --task <name>        ${TASK_NAMES.join(' | ')} (default: reverse)
  --epochs <n>         training epochs (default: per task)
  --batch-size <n>     batch size (default: 64)
  --train-size <n>     training samples (default: per task)
  --eval-size <n>      samples to validate on and to re-evaluate the reloaded model on
                       (default: 500 and 1000; training does not depend on it)
  --backend <name>     ${BACKEND_NAMES.join(' | ')} (default: tensorflow when tfjs-node loads, else wasm, else cpu)
  --seed <n>           random seed; the same seed and backend give the same model (default: 42)
  --out <dir>          output folder (default: models)
  -h, --help           show this help

  --from-keras <file>  instead of training: read a Keras model (.keras, tf-keras 2 .h5, or a Keras 3
                       folder), showing progress while its weights are read, print its summary and
                       save it as a tfjs model to <out>/<file name>/ (takes --out and --backend)`;

/** A usage error: the message is for the user, no stack trace. */
export class UsageError extends Error {}

function positiveInt(name: string, value: string, min = 1, max = 1e9): number {
  if (!/^\d+$/.test(value)) {
    throw new UsageError(`--${name} expects a whole number, received '${value}'`);
  }
  const n = Number(value);
  if (n < min || n > max) {
    throw new UsageError(`--${name} must be between ${min} and ${max}, received ${n}`);
  }
  return n;
}

export function parseOptions(argv: string[]): TrainOptions {
  const o: TrainOptions = {
    task: 'reverse',
    epochs: null,
    batchSize: null,
    trainSize: null,
    evalSize: null,
    backend: null,
    seed: 42,
    out: 'models',
    help: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '-h' || arg === '--help') {
      o.help = true;
      continue;
    }
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    if (m == null) {
      throw new UsageError(`unexpected argument '${arg}'`);
    }
    const name = m[1];
    const known = [
      'task',
      'epochs',
      'batch-size',
      'train-size',
      'eval-size',
      'backend',
      'seed',
      'out',
    ];
    if (!known.includes(name)) {
      throw new UsageError(`unknown option '--${name}'`);
    }
    let value = m[2];
    if (value === undefined) {
      value = argv[i + 1];
      if (value === undefined || value.startsWith('--')) {
        throw new UsageError(`--${name} needs a value`);
      }
      i++;
    }
    switch (name) {
      case 'task':
        if (!TASK_NAMES.includes(value)) {
          throw new UsageError(
            `unknown task '${value}'; expected one of: ${TASK_NAMES.join(', ')}`,
          );
        }
        o.task = value;
        break;
      case 'backend':
        if (!BACKEND_NAMES.includes(value)) {
          throw new UsageError(
            `unknown backend '${value}'; expected one of: ${BACKEND_NAMES.join(', ')}`,
          );
        }
        o.backend = value;
        break;
      case 'epochs':
        o.epochs = positiveInt(name, value, 1, 10000);
        break;
      case 'batch-size':
        o.batchSize = positiveInt(name, value, 1, 65536);
        break;
      case 'train-size':
        o.trainSize = positiveInt(name, value, 1, 10000000);
        break;
      case 'eval-size':
        o.evalSize = positiveInt(name, value, 1, 1000000);
        break;
      case 'seed':
        o.seed = positiveInt(name, value, 0, 2 ** 31 - 1);
        break;
      case 'out':
        if (value.length === 0) throw new UsageError('--out needs a folder');
        o.out = value;
        break;
    }
  }
  return o;
}
