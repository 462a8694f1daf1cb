/** The training script as a user runs it: `node dist/train.cjs` (built by jest's globalSetup). */
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {PNG} from 'pngjs';

import {parseOptions, UsageError} from '../../src/train/options';
import {Progress} from '../../src/train/progress';

const root = path.resolve(__dirname, '..', '..');

function run(args: string[]) {
  const r = spawnSync(process.execPath, ['dist/train.cjs', ...args], {cwd: root, encoding: 'utf8'});
  return {code: r.status, stdout: r.stdout, stderr: r.stderr};
}

function tfjsNodeLoads(): boolean {
  try {
    require.resolve('@tensorflow/tfjs-node');
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    require('@tensorflow/tfjs-node');
    return true;
  } catch {
    return false;
  }
}

describe('training script options', () => {
  it('parses every option and keeps the defaults otherwise', () => {
    expect(parseOptions([])).toEqual({
      task: 'reverse',
      epochs: null,
      batchSize: null,
      trainSize: null,
      evalSize: null,
      backend: null,
      seed: 42,
      out: 'models',
      help: false,
    });
    expect(
      parseOptions([
        '--task',
        'lookup',
        '--epochs=3',
        '--batch-size',
        '16',
        '--train-size',
        '100',
        '--eval-size',
        '20',
        '--backend',
        'cpu',
        '--seed',
        '7',
        '--out',
        'x',
      ]),
    ).toEqual({
      task: 'lookup',
      epochs: 3,
      batchSize: 16,
      trainSize: 100,
      evalSize: 20,
      backend: 'cpu',
      seed: 7,
      out: 'x',
      help: false,
    });
  });

  it.each([
    [['--epochs', 'two'], /--epochs expects a whole number, received 'two'/],
    [['--epochs', '0'], /--epochs must be between 1 and 10000, received 0/],
    [['--eval-size', '0'], /--eval-size must be between 1 and 1000000, received 0/],
    [['--task', 'sort'], /unknown task 'sort'; expected one of: reverse, lookup, addition/],
    [['--backend', 'webgpu'], /unknown backend 'webgpu'/],
    [['--lr', '1'], /unknown option '--lr'/],
    [['--seed'], /--seed needs a value/],
    [['extra'], /unexpected argument 'extra'/],
  ])('refuses %j', (args, message) => {
    expect(() => parseOptions(args as string[])).toThrow(UsageError);
    expect(() => parseOptions(args as string[])).toThrow(message as RegExp);
  });

  it('answers bad options with a message and exit code 2, never a stack trace', () => {
    const r = run(['--epochs', '-3']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /^tfjs-attention-train: error: --epochs expects a whole number, received '-3'/,
    );
    expect(r.stderr).toMatch(/--help/);
    expect(r.stderr).not.toMatch(/\n\s+at /);
    const help = run(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/Usage: tfjs-attention-train/);
    expect(help.stdout).toMatch(/--task <name> +reverse \| lookup \| addition/);
  });

  it('checks that --out can be written before it trains (exit 2, at once)', () => {
    const file = path.join(os.tmpdir(), `tfjs-attention-not-a-folder-${process.pid}`);
    fs.writeFileSync(file, '');
    for (const [out, why] of [
      ['/proc/tfjs-attention/out', /cannot make the folder \/proc\/tfjs-attention/],
      [file, /is not a folder/],
    ] as Array<[string, RegExp]>) {
      const start = Date.now();
      const r = run(['--backend', 'cpu', '--out', out]);
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/^tfjs-attention-train: error: --out /);
      expect(r.stderr).toMatch(why);
      expect(r.stdout).not.toMatch(/epoch/);
      expect(Date.now() - start).toBeLessThan(15000);
    }
    fs.rmSync(file);
  });

  it('says what failed when tfjs-node is asked for but does not load', () => {
    if (tfjsNodeLoads()) {
      expect(
        run(['--backend', 'tensorflow', '--epochs', '1', '--train-size', '8', '--out', os.tmpdir()])
          .code,
      ).toBe(0);
      return;
    }
    const r = run(['--backend', 'tensorflow']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /--backend tensorflow needs @tensorflow\/tfjs-node, which did not load/,
    );
  });
});

describe('the bin without @tensorflow/tfjs', () => {
  it('says what to install (exit 2), instead of a module-not-found stack', () => {
    const r = spawnSync(
      process.execPath,
      [
        '-r',
        path.join(__dirname, '..', 'helpers', 'without_tfjs.js'),
        'dist/train.cjs',
        '--epochs',
        '1',
      ],
      {cwd: root, encoding: 'utf8'},
    );
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(
      'the training script needs @tensorflow/tfjs, which is not installed',
    );
    expect(r.stderr).toContain('npm install @tensorflow/tfjs @tensorflow/tfjs-backend-wasm');
    expect(r.stderr).not.toMatch(/at Module|Error:/);
  });
});

describe('progress output', () => {
  it('draws a bar on a terminal and plain lines otherwise', () => {
    const tty: string[] = [];
    const p = new Progress({isTTY: true, columns: 100, write: (s) => tty.push(s)}, 2, 10);
    p.startEpoch();
    p.batch(0, 4, {loss: 0.5, acc: 0.75});
    p.endEpoch(0, {loss: 0.4, acc: 0.8}, 'token accuracy', 0.9);
    expect(tty[0]).toMatch(/^\rEpoch 1\/2 \[=+>\.+\] 5\/10 loss 0\.5000 acc 0\.7500/);
    expect(tty[1]).toMatch(
      /epoch 1\/2: loss 0\.4000, acc 0\.8000, validation token accuracy 90\.00%/,
    );
    const plain: string[] = [];
    const q = new Progress({isTTY: false, write: (s) => plain.push(s)}, 1, 8);
    q.startEpoch();
    for (let b = 0; b < 8; b++) q.batch(0, b, {loss: 1});
    q.endEpoch(0, {loss: 1}, 'm', 1);
    expect(plain.every((s) => !s.includes('\r') && s.endsWith('\n'))).toBe(true);
    expect(plain.length).toBe(4); // three quarter marks and the epoch line
  });
});

describe('training runs', () => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-train-'));
  afterAll(() => fs.rmSync(out, {recursive: true, force: true}));

  it('trains, saves, reloads, re-evaluates and writes heatmaps (reverse, small)', () => {
    const r = run([
      '--epochs',
      '1',
      '--train-size',
      '128',
      '--eval-size',
      '40',
      '--backend',
      'wasm',
      '--out',
      path.join(out, 'a'),
    ]);
    expect(r.stderr).not.toMatch(/failed/);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/backend wasm, seed 42, 1 epochs of 128 samples, batch 64/);
    expect(r.stdout).toMatch(
      /epoch 1\/1: loss [\d.]+, acc [\d.]+, validation token accuracy [\d.]+%/,
    );
    expect(r.stdout).toMatch(
      /token accuracy: [\d.]+% after training \(validation\), [\d.]+% for the reloaded model on 40 fresh samples/,
    );
    const dir = path.join(out, 'a', 'reverse');
    expect(fs.readdirSync(dir).sort()).toEqual([
      'attention.png',
      'attention.svg',
      'model.json',
      'weights.bin',
    ]);
    const meta = JSON.parse(
      fs.readFileSync(path.join(dir, 'model.json'), 'utf8'),
    ).userDefinedMetadata;
    expect(meta).toEqual({task: 'reverse', vocabSize: 12, maxLen: 10, padId: 0, minLen: 1});
    const png = PNG.sync.read(fs.readFileSync(path.join(dir, 'attention.png')));
    // one row of per-head [10 x 10] maps, 16-pixel cells, 8-pixel gaps around and between them
    const mha2 = JSON.parse(
      fs.readFileSync(path.join(dir, 'model.json'), 'utf8'),
    ).modelTopology.config.layers.find((l: {name: string}) => l.name === 'mha2');
    const heads = mha2.config.num_heads as number;
    expect([png.width, png.height]).toEqual([heads * 10 * 16 + (heads + 1) * 8, 10 * 16 + 2 * 8]);
    // drawn: some cells are coloured (not white), and the background stays white
    let coloured = 0;
    for (let i = 0; i < png.data.length; i += 4) {
      if (png.data[i] !== 255 || png.data[i + 1] !== 255 || png.data[i + 2] !== 255) coloured++;
    }
    expect(coloured).toBeGreaterThan(16 * 16);
    expect(Array.from(png.data.subarray(0, 4))).toEqual([255, 255, 255, 255]);
    expect(fs.readFileSync(path.join(dir, 'attention.svg'), 'utf8')).toMatch(/^<svg/);
  });

  it('gives the same model for the same seed and backend, another for another seed', () => {
    const args = (seed: string, sub: string) => [
      '--epochs',
      '1',
      '--train-size',
      '64',
      '--eval-size',
      '8',
      '--backend',
      'wasm',
      '--seed',
      seed,
      '--out',
      path.join(out, sub),
    ];
    expect(run(args('5', 'b')).code).toBe(0);
    expect(run(args('5', 'c')).code).toBe(0);
    expect(run(args('6', 'd')).code).toBe(0);
    const bytes = (sub: string) => fs.readFileSync(path.join(out, sub, 'reverse', 'weights.bin'));
    expect(bytes('b').equals(bytes('c'))).toBe(true);
    expect(bytes('b').equals(bytes('d'))).toBe(false);
  });

  it('trains the lookup task (AdditiveAttention) to >= 99% with its defaults', () => {
    const r = run([
      '--task',
      'lookup',
      '--backend',
      'wasm',
      '--eval-size',
      '300',
      '--out',
      path.join(out, 'e'),
    ]);
    expect(r.code).toBe(0);
    const m =
      /position accuracy: ([\d.]+)% after training \(validation\), ([\d.]+)% for the reloaded model/.exec(
        r.stdout,
      );
    expect(m).not.toBeNull();
    expect(Number(m![2])).toBeGreaterThanOrEqual(99);
    // its defaults on wasm are how models/lookup was trained: the same bytes (--eval-size does
    // not change training)
    for (const file of ['model.json', 'weights.bin']) {
      const made = fs.readFileSync(path.join(out, 'e', 'lookup', file));
      expect(made.equals(fs.readFileSync(path.join(root, 'models', 'lookup', file)))).toBe(true);
    }
  });

  it('npm run train on wasm reproduces the committed models/reverse byte for byte', () => {
    // as the README's `npm run train` runs where tfjs-node is not installed (--eval-size does not
    // change training; a smaller one only saves time)
    const r = run(['--backend', 'wasm', '--eval-size', '16', '--out', path.join(out, 'f')]);
    expect(r.code).toBe(0);
    for (const file of ['model.json', 'weights.bin']) {
      const made = fs.readFileSync(path.join(out, 'f', 'reverse', file));
      expect(made.equals(fs.readFileSync(path.join(root, 'models', 'reverse', file)))).toBe(true);
    }
  });

  it('trains the addition task (a causal decoder scored by greedy generation), the same for a seed', () => {
    const args = (sub: string) => [
      '--task',
      'addition',
      '--epochs',
      '1',
      '--train-size',
      '64',
      '--eval-size',
      '16',
      '--backend',
      'wasm',
      '--out',
      path.join(out, sub),
    ];
    const r = run(args('f'));
    expect(r.stderr).not.toMatch(/failed/);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/epoch 1\/1: loss [\d.]+, acc [\d.]+, validation exact match [\d.]+%/);
    expect(r.stdout).toMatch(
      /exact match: [\d.]+% after training \(validation\), [\d.]+% for the reloaded model on 16 fresh samples/,
    );
    // which step its greedy decoding ran (generate's onCompile report)
    expect(r.stdout).toMatch(
      /\ngeneration: compiled step: \d+ ops on WebAssembly SIMD kernels, weights read in place on tfjs-wasm's heap\n/,
    );
    const dir = path.join(out, 'f', 'addition');
    expect(fs.readdirSync(dir).sort()).toEqual([
      'attention.png',
      'attention.svg',
      'model.json',
      'weights.bin',
    ]);
    const model = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
    expect(model.userDefinedMetadata).toMatchObject({task: 'addition', maxLen: 13, endId: 13});
    const classes = model.modelTopology.config.layers.map(
      (l: {class_name: string}) => l.class_name,
    );
    expect(classes.filter((c: string) => c === 'TransformerDecoder').length).toBe(2);
    expect(fs.readFileSync(path.join(dir, 'attention.svg'), 'utf8')).toMatch(/^<svg/);
    expect(run(args('g')).code).toBe(0);
    const bytes = (sub: string) => fs.readFileSync(path.join(out, sub, 'addition', 'weights.bin'));
    expect(bytes('f').equals(bytes('g'))).toBe(true);
  });
});
