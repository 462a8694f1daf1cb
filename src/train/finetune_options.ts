/** The options of `tfjs-attention-finetune` (see FINETUNE_USAGE), parsed and checked. */
import {UsageError} from './options';

export const FINETUNE_USAGE = `Usage: tfjs-attention-finetune --preset DIR --text FILE [options]

Fine-tunes a keras-hub causal LM preset (a save_to_preset folder) on a text file with LoRA, as
keras-hub does it (backbone.enable_lora, CausalLM's loss, Keras' Adam), and writes to --out:
  adapters.lora.h5        the adapters (keras-hub's backbone.load_lora_weights reads them)
  preset/                 the preset with the adapters merged (keras-hub's from_preset loads it)
  loss.png, losses.json   the loss of each step
  checkpoints/            step-N.lora.h5 every --checkpoint-every steps
It prints a sample generation before and after.

  --preset DIR            keras-hub preset folder (required)
  --text FILE             UTF-8 text; paragraphs (blank-line separated) become examples (required)
  --rank N                LoRA rank (default 8)
  --alpha X               LoRA alpha (default: the rank, as keras-hub)
  --steps N               optimizer steps (default: --epochs passes over the examples)
  --epochs N              passes over the examples when --steps is not given (default 1)
  --batch-size N          examples per step (default 4)
  --sequence-length N     tokens per example (default: the preset's preprocessor's)
  --learning-rate X       peak learning rate (default 2e-5, keras-hub's)
  --schedule NAME         constant | linear | cosine (default constant)
  --warmup-steps N        linear warm-up steps (default 0)
  --optimizer NAME        adam | adamw (default adam)
  --weight-decay X        AdamW's weight decay (default 0.004)
  --clipnorm X            clip the gradients' global norm to X (Keras' global_clipnorm)
  --seed N                seeds LoRA's A and the example order (default 0)
  --sample TEXT           the prompt of the sample generations (default: the text's first words)
  --max-length N          tokens of each sample, prompt included (default: the preprocessor's length)
  --checkpoint-every N    write checkpoints/step-N.lora.h5 every N steps (default 0: none)
  --out DIR               where to write (default finetuned)
  --backend NAME          tensorflow | wasm | cpu (default: tfjs-node when it loads, else wasm)
  -h, --help              this help`;

export interface FinetuneCliOptions {
  help: boolean;
  preset: string;
  text: string;
  rank: number;
  alpha?: number;
  steps?: number;
  epochs?: number;
  batchSize: number;
  sequenceLength?: number;
  learningRate: number;
  schedule: 'constant' | 'linear' | 'cosine';
  warmupSteps: number;
  optimizer: 'adam' | 'adamw';
  weightDecay?: number;
  clipnorm?: number;
  seed: number;
  sample?: string;
  maxLength?: number;
  checkpointEvery: number;
  out: string;
  backend: string | null;
}

const INTEGER = [
  'rank',
  'steps',
  'epochs',
  'batch-size',
  'sequence-length',
  'warmup-steps',
  'seed',
  'max-length',
  'checkpoint-every',
];
const NUMBER = ['alpha', 'learning-rate', 'weight-decay', 'clipnorm'];
const TEXT = ['preset', 'text', 'schedule', 'optimizer', 'sample', 'out', 'backend'];
const CHOICES: Record<string, string[]> = {
  schedule: ['constant', 'linear', 'cosine'],
  optimizer: ['adam', 'adamw'],
  backend: ['tensorflow', 'wasm', 'cpu'],
};

/** `argv` (without node and the script) as options; a UsageError says what is wrong. */
export function parseFinetuneOptions(argv: string[]): FinetuneCliOptions {
  if (argv.includes('-h') || argv.includes('--help')) {
    return {help: true} as FinetuneCliOptions;
  }
  const values = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]);
    if (m == null) throw new UsageError(`unexpected argument '${argv[i]}'`);
    const key = m[1];
    if (![...INTEGER, ...NUMBER, ...TEXT].includes(key)) {
      throw new UsageError(`unknown option --${key}`);
    }
    let value = m[2];
    if (value === undefined) {
      value = argv[++i];
      if (value === undefined || value.startsWith('--'))
        throw new UsageError(`--${key} needs a value`);
    }
    if (values.has(key)) throw new UsageError(`--${key} is given twice`);
    values.set(key, value);
  }
  const int = (key: string, min: number): number | undefined => {
    const v = values.get(key);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (!/^-?\d+$/.test(v) || n < min) {
      throw new UsageError(`--${key} expects an integer >= ${min}, received '${v}'`);
    }
    return n;
  };
  const num = (key: string): number | undefined => {
    const v = values.get(key);
    if (v === undefined) return undefined;
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < 0) {
      throw new UsageError(`--${key} expects a number >= 0, received '${v}'`);
    }
    return n;
  };
  for (const [key, allowed] of Object.entries(CHOICES)) {
    const v = values.get(key);
    if (v !== undefined && !allowed.includes(v)) {
      throw new UsageError(`--${key} expects one of ${allowed.join(', ')}, received '${v}'`);
    }
  }
  for (const required of ['preset', 'text']) {
    if (!values.has(required)) throw new UsageError(`--${required} is required`);
  }
  const learningRate = num('learning-rate') ?? 2e-5;
  if (learningRate <= 0) throw new UsageError(`--learning-rate expects a number > 0, received 0`);
  return {
    help: false,
    preset: values.get('preset') as string,
    text: values.get('text') as string,
    rank: int('rank', 1) ?? 8,
    alpha: num('alpha'),
    steps: int('steps', 1),
    epochs: int('epochs', 1),
    batchSize: int('batch-size', 1) ?? 4,
    sequenceLength: int('sequence-length', 2),
    learningRate,
    schedule: (values.get('schedule') ?? 'constant') as FinetuneCliOptions['schedule'],
    warmupSteps: int('warmup-steps', 0) ?? 0,
    optimizer: (values.get('optimizer') ?? 'adam') as FinetuneCliOptions['optimizer'],
    weightDecay: num('weight-decay'),
    clipnorm: num('clipnorm'),
    seed: int('seed', 0) ?? 0,
    sample: values.get('sample'),
    maxLength: int('max-length', 2),
    checkpointEvery: int('checkpoint-every', 0) ?? 0,
    out: values.get('out') ?? 'finetuned',
    backend: values.get('backend') ?? null,
  };
}
