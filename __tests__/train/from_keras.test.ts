/**
 * The CLI's `--from-keras <file>` (`node dist/train.cjs`, built by jest's globalSetup): reads a
 * committed .keras file with progress while its weights are read, prints its summary, and saves
 * it as a tfjs model that predicts what Keras predicted (fixtures/keras_files/functional.io.json);
 * training options are refused with it. readingProgress, the progress it prints: lines at each
 * quarter, or one bar redrawn on a terminal.
 */
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {fileSystem} from '../../src';
import {parseFromKeras} from '../../src/train/from_keras';
import {readingProgress} from '../../src/train/progress';
import {UsageError} from '../../src/train/options';

const root = path.resolve(__dirname, '..', '..');
const fixture = path.join(root, 'fixtures', 'keras_files');

function run(args: string[]) {
  const r = spawnSync(process.execPath, ['dist/train.cjs', ...args], {cwd: root, encoding: 'utf8'});
  return {code: r.status, stdout: r.stdout, stderr: r.stderr};
}

function sink(isTTY: boolean) {
  const written: string[] = [];
  return {isTTY, columns: 100, write: (s: string) => written.push(s), written};
}

describe('readingProgress', () => {
  it('prints a line at each quarter reached, once, off a terminal', () => {
    const out = sink(false);
    const progress = readingProgress(out);
    for (const f of [0, 0.1, 0.3, 0.3, 0.6, 0.8, 0.99, 1, 1]) progress(f);
    expect(out.written).toEqual([
      'reading weights: 0%\n',
      'reading weights: 25%\n',
      'reading weights: 50%\n',
      'reading weights: 75%\n',
      'reading weights: 100%\n',
    ]);
  });

  it('redraws one bar on a terminal and ends it with a newline at 100%', () => {
    const out = sink(true);
    const progress = readingProgress(out);
    for (const f of [0, 0.5, 1, 1]) progress(f);
    expect(out.written).toEqual([
      `\rreading weights [${'.'.repeat(30)}] 0%`,
      `\rreading weights [${'='.repeat(15)}${'.'.repeat(15)}] 50%`,
      `\rreading weights [${'='.repeat(30)}] 100%`,
      '\n',
    ]);
  });
});

describe('--from-keras', () => {
  it('takes --out and --backend only, and is not given when training', () => {
    expect(parseFromKeras(['--epochs', '2'])).toBeNull();
    expect(parseFromKeras(['--from-keras', 'm.keras', '--out=o', '--backend', 'cpu'])).toEqual({
      file: 'm.keras',
      out: 'o',
      backend: 'cpu',
    });
    expect(() => parseFromKeras(['--from-keras', 'm.keras', '--epochs', '2'])).toThrow(UsageError);
    expect(() => parseFromKeras(['--from-keras', 'm.keras', '--epochs', '2'])).toThrow(
      "--from-keras takes only --out and --backend; received '--epochs'",
    );
    expect(() => parseFromKeras(['--from-keras'])).toThrow('--from-keras needs a value');
  });

  it('reads a .keras file with progress, prints its summary, saves a tfjs model that predicts as Keras', async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-from-keras-'));
    try {
      const r = run([
        '--from-keras',
        path.join(fixture, 'functional.keras'),
        '--out',
        out,
        '--backend',
        'cpu',
      ]);
      expect(r.stderr).not.toMatch(/error|failed/);
      expect(r.code).toBe(0);
      const lines = r.stdout.split('\n');
      const progress = lines.filter((l) => l.startsWith('reading weights'));
      expect(progress).toEqual([0, 25, 50, 75, 100].map((p) => `reading weights: ${p}%`));
      // before the summary: the weights are read first
      expect(lines.indexOf('reading weights: 100%')).toBeLessThan(
        lines.findIndex((l) => l.startsWith('Total params')),
      );
      // MultiHeadAttention(2 heads, key_dim 4) on width 8: q, k, v 3 x (8 x 8 + 8), output 8 x 8
      // + 8; LayerNormalization 2 x 8; Dense(3) 8 x 3 + 3
      expect(r.stdout).toContain(`Total params: ${3 * (64 + 8) + (64 + 8) + 16 + 27}`);
      const saved = path.join(out, 'functional');
      expect(r.stdout).toContain(`saved ${path.join(saved, 'model.json')}`);

      const io = JSON.parse(fs.readFileSync(path.join(fixture, 'functional.io.json'), 'utf8'));
      await tf.setBackend('cpu');
      const model = await tf.loadLayersModel(fileSystem(saved));
      const [x] = io.inputs;
      const y = model.predict(tf.tensor(x.data, x.shape, x.dtype)) as tf.Tensor;
      expect(y.shape).toEqual(io.outputs[0].shape);
      const got = y.dataSync();
      const want: number[] = io.outputs[0].data;
      expect(Math.max(...want.map((v, i) => Math.abs(v - got[i])))).toBeLessThan(1e-4);
      y.dispose();
      model.dispose();
    } finally {
      fs.rmSync(out, {recursive: true, force: true});
    }
  });

  it('--from-keras with an empty value is a usage error', () => {
    for (const argv of [['--from-keras='], ['--from-keras=', '--out', 'models']]) {
      expect(() => parseFromKeras(argv)).toThrow(UsageError);
      expect(() => parseFromKeras(argv)).toThrow(/^--from-keras needs a value$/);
    }
  });

  it('refuses training options with it (exit 2)', () => {
    const r = run(['--from-keras', path.join(fixture, 'functional.keras'), '--epochs', '1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--from-keras takes only --out and --backend/);
  });
});
