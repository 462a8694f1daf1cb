/** tfjs-attention-finetune's options: defaults, every option read, and refusals that say why. */
import {FINETUNE_USAGE, parseFinetuneOptions} from '../../src/train/finetune_options';
import {UsageError} from '../../src/train/options';

const base = ['--preset', 'p', '--text', 't.txt'];

describe('parseFinetuneOptions', () => {
  it("takes keras-hub's defaults (rank 8, Adam at 2e-5, batch 4) when only the required are given", () => {
    const o = parseFinetuneOptions(base);
    expect(o).toMatchObject({
      preset: 'p',
      text: 't.txt',
      rank: 8,
      batchSize: 4,
      learningRate: 2e-5,
      schedule: 'constant',
      optimizer: 'adam',
      warmupSteps: 0,
      seed: 0,
      checkpointEvery: 0,
      out: 'finetuned',
      backend: null,
    });
    expect(o.steps).toBeUndefined();
    expect(o.maxLength).toBeUndefined(); // generateText's default: the preprocessor's length
  });

  it('reads every option the usage lists, as --key value and --key=value', () => {
    const o = parseFinetuneOptions([
      ...base,
      '--rank=4',
      '--alpha',
      '8',
      '--steps',
      '20',
      '--batch-size',
      '2',
      '--sequence-length',
      '32',
      '--learning-rate',
      '1e-3',
      '--schedule',
      'cosine',
      '--warmup-steps',
      '2',
      '--optimizer',
      'adamw',
      '--weight-decay',
      '0.01',
      '--clipnorm',
      '1',
      '--seed',
      '3',
      '--sample',
      'The fox',
      '--max-length',
      '24',
      '--checkpoint-every',
      '10',
      '--out',
      'o',
      '--backend',
      'wasm',
    ]);
    expect(o).toMatchObject({
      rank: 4,
      alpha: 8,
      steps: 20,
      batchSize: 2,
      sequenceLength: 32,
      learningRate: 1e-3,
      schedule: 'cosine',
      warmupSteps: 2,
      optimizer: 'adamw',
      weightDecay: 0.01,
      clipnorm: 1,
      seed: 3,
      sample: 'The fox',
      maxLength: 24,
      checkpointEvery: 10,
      out: 'o',
      backend: 'wasm',
    });
    for (const flag of ['--rank', '--epochs', '--optimizer', '--checkpoint-every', '--clipnorm']) {
      expect(FINETUNE_USAGE).toContain(flag);
    }
  });

  it.each([
    [['--text', 't'], '--preset is required'],
    [[...base, '--rank', '0'], "--rank expects an integer >= 1, received '0'"],
    [[...base, '--rank', '1.5'], "--rank expects an integer >= 1, received '1.5'"],
    [
      [...base, '--learning-rate', 'fast'],
      "--learning-rate expects a number >= 0, received 'fast'",
    ],
    [[...base, '--optimizer', 'sgd'], "--optimizer expects one of adam, adamw, received 'sgd'"],
    [[...base, '--lr', '1'], 'unknown option --lr'],
    [[...base, '--steps'], '--steps needs a value'],
    [[...base, '--seed', '1', '--seed', '2'], '--seed is given twice'],
    [[...base, 'extra'], "unexpected argument 'extra'"],
  ])('refuses %j: %s', (argv, message) => {
    expect(() => parseFinetuneOptions(argv)).toThrow(UsageError);
    expect(() => parseFinetuneOptions(argv)).toThrow(message);
  });
});
