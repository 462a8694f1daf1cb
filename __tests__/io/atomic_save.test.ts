/**
 * Saving never leaves a mix or a broken model: a save killed at a random point leaves the old or
 * the new model, concurrent saves (one process or two) leave one of them whole, each JSON keeps
 * its own weights file, symlinks are replaced rather than written through, and impossible
 * targets fail before anything is written.
 */
import {spawn} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {fileSystem} from '../../src';
import {saveModelFiles} from '../../src/io/atomic_save';
import {locate} from '../../src/io/paths';
import {saveToMemory} from '../helpers/save';

const CHILD = path.join(__dirname, '..', 'helpers', 'save_child.js');
const UNITS = 700; // 700 x 700 + 700 floats: a ~2 MB weights file

/** A width per value, so a model.json of one save and the weights of another cannot agree. */
const widthOf = (value: number) => 480 + 10 * value;

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-save-'));
}

function constantModel(value: number, units = 4): tf.LayersModel {
  return tf.sequential({
    layers: [
      tf.layers.dense({
        inputShape: [units],
        units,
        kernelInitializer: tf.initializers.constant({value}),
        biasInitializer: tf.initializers.constant({value}),
      }),
    ],
  });
}

/** The value every weight of a saved constant model holds; throws if the weights are mixed. */
async function savedValue(target: string): Promise<number> {
  const model = await tf.loadLayersModel(fileSystem(target));
  const values = new Set(model.getWeights().flatMap((w) => Array.from(w.dataSync())));
  const units = model.getWeights()[1].shape[0];
  model.dispose();
  expect(values.size).toBe(1);
  const value = [...values][0];
  // in-process tests give each value its own width: the JSON must belong to the weights
  if (units !== UNITS && units !== 4) expect(units).toBe(widthOf(value));
  return value;
}

function runChild(args: string[]): {
  done: Promise<number | null>;
  kill: () => void;
  ready: Promise<void>;
} {
  const child = spawn(process.execPath, [CHILD, ...args], {stdio: ['ignore', 'pipe', 'pipe']});
  const ready = new Promise<void>((resolve) => child.stdout.once('data', () => resolve()));
  const done = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {done, ready, kill: () => child.kill('SIGKILL')};
}

describe('saving', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it('a save killed at a random point leaves the old or the new model (15 tries)', async () => {
    const dir = tmp();
    const first = runChild([dir, '1', '1', String(UNITS)]);
    expect(await first.done).toBe(0);
    for (let i = 0; i < 15; i++) {
      const value = i + 2;
      const child = runChild([dir, String(value), '50', String(UNITS)]);
      await child.ready;
      await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 120)));
      child.kill();
      await child.done;
      const loaded = await savedValue(dir);
      // the previous model (value - 1, or an earlier one if that save never completed) or this one
      expect(loaded).toBeLessThanOrEqual(value);
      expect(loaded).toBeGreaterThanOrEqual(1);
    }
    // a save left to finish gives the new model (the kill window itself is random; the exact
    // state between the two renames is tested deterministically in file_system_load.test.ts)
    const last = runChild([dir, '99', '1', String(UNITS)]);
    expect(await last.done).toBe(0);
    expect(await savedValue(dir)).toBe(99);
    // and clears what the killed saves left (temporary files, a lock)
    expect(fs.readdirSync(dir).sort()).toEqual(['model.json', 'weights.bin']);
    fs.rmSync(dir, {recursive: true});
  }, 120000);

  it('concurrent saves to one folder leave one model whole (one process, and two)', async () => {
    const dir = tmp();
    const models = [1, 2, 3].map((v) => constantModel(v, widthOf(v))); // ~1 MB of weights each
    for (let round = 0; round < 6; round++) {
      await Promise.all(models.map((m) => m.save(fileSystem(dir))));
      expect([1, 2, 3]).toContain(await savedValue(dir));
    }
    const a = runChild([dir, '7', '20', String(UNITS)]);
    const b = runChild([dir, '8', '20', String(UNITS)]);
    expect([await a.done, await b.done]).toEqual([0, 0]);
    expect([7, 8]).toContain(await savedValue(dir));
    expect(fs.readdirSync(dir).sort()).toEqual(['model.json', 'weights.bin']); // no temp left
    fs.rmSync(dir, {recursive: true});
  }, 60000);

  it('names the weights after the JSON: a.json and b.json in one folder keep their own', async () => {
    const dir = tmp();
    await constantModel(1).save(fileSystem(path.join(dir, 'a.json')));
    await constantModel(2).save(fileSystem(path.join(dir, 'b.json')));
    await constantModel(3).save(fileSystem(dir));
    expect(fs.readdirSync(dir).sort()).toEqual([
      'a.json',
      'a.weights.bin',
      'b.json',
      'b.weights.bin',
      'model.json',
      'weights.bin',
    ]);
    expect(await savedValue(path.join(dir, 'a.json'))).toBe(1);
    expect(await savedValue(path.join(dir, 'b.json'))).toBe(2);
    expect(await savedValue(dir)).toBe(3);
    fs.rmSync(dir, {recursive: true});
  });

  it('replaces a weights symlink instead of writing through it', async () => {
    const dir = tmp();
    const outside = path.join(tmp(), 'precious.bin');
    fs.writeFileSync(outside, 'keep me');
    fs.symlinkSync(outside, path.join(dir, 'weights.bin'));
    await constantModel(5).save(fileSystem(dir));
    expect(fs.readFileSync(outside, 'utf8')).toBe('keep me');
    expect(fs.lstatSync(path.join(dir, 'weights.bin')).isSymbolicLink()).toBe(false);
    expect(await savedValue(dir)).toBe(5);
    fs.rmSync(dir, {recursive: true});
    fs.rmSync(path.dirname(outside), {recursive: true});
  });

  it('refuses a JSON path that is a folder, and /proc, before writing anything', async () => {
    const dir = tmp();
    fs.mkdirSync(path.join(dir, 'model.json'));
    await expect(constantModel(1).save(fileSystem(dir))).rejects.toThrow(
      /cannot save to .*model.json: it is a folder/,
    );
    expect(fs.readdirSync(dir)).toEqual(['model.json']);
    const start = Date.now();
    await expect(constantModel(1).save(fileSystem('/proc/tfjs-attention/x'))).rejects.toThrow(
      /cannot make the folder \/proc\/tfjs-attention/,
    );
    expect(Date.now() - start).toBeLessThan(2000);
    fs.rmSync(dir, {recursive: true});
  });
});

/** The pid of a process that has exited. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  await new Promise((r) => child.on('exit', r));
  return child.pid as number;
}

describe('save locks left behind', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it('takes over an empty lock file (a kill between creating it and writing the pid)', async () => {
    const dir = tmp();
    const lockFile = path.join(dir, 'model.json.lock');
    fs.writeFileSync(lockFile, '');
    const old = new Date(Date.now() - 10000);
    fs.utimesSync(lockFile, old, old);
    const start = Date.now();
    await constantModel(4).save(fileSystem(dir));
    expect(Date.now() - start).toBeLessThan(5000);
    expect(await savedValue(dir)).toBe(4);
    expect(fs.existsSync(lockFile)).toBe(false);
    fs.rmSync(dir, {recursive: true});
  }, 10000);

  it("takes over a dead process's lock, and waits for a live one's", async () => {
    const dir = tmp();
    const lockFile = path.join(dir, 'model.json.lock');
    fs.writeFileSync(lockFile, String(await deadPid()));
    await constantModel(2).save(fileSystem(dir));
    expect(await savedValue(dir)).toBe(2);
    expect(fs.readdirSync(dir).sort()).toEqual(['model.json', 'weights.bin']);

    const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    fs.writeFileSync(lockFile, String(sleeper.pid));
    let finished = false;
    const saving = constantModel(3)
      .save(fileSystem(dir))
      .then(() => (finished = true));
    await new Promise((r) => setTimeout(r, 400));
    expect(finished).toBe(false);
    expect(await savedValue(dir)).toBe(2);
    fs.unlinkSync(lockFile); // the live owner releases it
    await saving;
    expect(await savedValue(dir)).toBe(3);
    sleeper.kill('SIGKILL');
    fs.rmSync(dir, {recursive: true});
  }, 15000);

  it("removes the temporary files of dead savers, and keeps a live saver's", async () => {
    const dir = tmp();
    const dead = await deadPid();
    const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    const leftovers = [
      `.weights.bin.${dead}-0123456789ab.tmp`,
      `.model.json.${dead}-0123456789ab.tmp`,
      `model.json.lock.${dead}-01234567.tmp`,
      // a stale lock a saver had moved aside when it was killed, before unlinking it
      `model.json.lock.${dead}-89abcdef.stale`,
    ];
    const kept = [
      `.weights.bin.${sleeper.pid}-0123456789ab.tmp`,
      `model.json.lock.${sleeper.pid}-89abcdef.stale`,
      'notes.tmp',
    ];
    for (const name of [...leftovers, ...kept]) fs.writeFileSync(path.join(dir, name), 'x');
    await constantModel(6).save(fileSystem(dir));
    expect(fs.readdirSync(dir).sort()).toEqual(['model.json', 'weights.bin', ...kept].sort());
    expect(await savedValue(dir)).toBe(6);
    sleeper.kill('SIGKILL');
    fs.rmSync(dir, {recursive: true});
  });
});

/** When process 1 started (ms since the epoch), read from /proc as a reference. */
function pid1StartMs(): number {
  const stat = fs.readFileSync('/proc/1/stat', 'utf8');
  const ticks = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  const btime = Number(/^btime (\d+)$/m.exec(fs.readFileSync('/proc/stat', 'utf8'))![1]);
  return btime * 1000 + ticks * 10;
}

/** Saves the constant model `value` to `dir` through the saver, with a short lock timeout. */
async function saveWithTimeout(dir: string, value: number, lockTimeoutMs: number): Promise<void> {
  const artifacts = await saveToMemory(constantModel(value));
  const json = (weightsSha256: string) =>
    JSON.stringify({
      modelTopology: artifacts.modelTopology,
      format: artifacts.format,
      weightsManifest: [{paths: ['weights.bin'], weights: artifacts.weightSpecs}],
      weightsSha256,
    });
  const data = new Uint8Array(artifacts.weightData as ArrayBuffer);
  await saveModelFiles(locate(dir), data, json, {lockTimeoutMs});
}

describe('save locks that cannot be read, reused pids, stray folders', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it('a folder at the lock path fails after the lock timeout, naming it, instead of spinning', async () => {
    const dir = tmp();
    const lockDir = path.join(dir, 'model.json.lock');
    fs.mkdirSync(lockDir);
    fs.writeFileSync(path.join(lockDir, 'keep'), 'x');
    const start = Date.now();
    await expect(saveWithTimeout(dir, 1, 300)).rejects.toThrow(
      /model.json.lock has been held by a folder \(not a lock file this package makes; remove it/,
    );
    const took = Date.now() - start;
    expect(took).toBeGreaterThanOrEqual(300);
    expect(took).toBeLessThan(3000);
    expect(fs.readFileSync(path.join(lockDir, 'keep'), 'utf8')).toBe('x'); // left alone
    expect(fs.existsSync(path.join(dir, 'model.json'))).toBe(false);
    fs.rmSync(lockDir, {recursive: true});
    await saveWithTimeout(dir, 2, 300); // once removed, saving works
    expect(await savedValue(dir)).toBe(2);
    fs.rmSync(dir, {recursive: true});
  }, 10000);

  it('takes over a dangling symlink lock, and a link to a live pid, without touching the target', async () => {
    const dir = tmp();
    const lockFile = path.join(dir, 'model.json.lock');
    const old = new Date(Date.now() - 10000);
    fs.symlinkSync(path.join(dir, 'nowhere'), lockFile);
    fs.lutimesSync(lockFile, old, old);
    let start = Date.now();
    await saveWithTimeout(dir, 3, 60000);
    expect(Date.now() - start).toBeLessThan(3000);
    expect(await savedValue(dir)).toBe(3);
    expect(fs.readdirSync(dir).sort()).toEqual(['model.json', 'weights.bin']);

    // a link to a file outside the folder that names a live process: not a lock of this package
    const sleeper = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    const outside = path.join(tmp(), 'pid');
    fs.writeFileSync(outside, String(sleeper.pid));
    fs.symlinkSync(outside, lockFile);
    fs.lutimesSync(lockFile, old, old);
    start = Date.now();
    await saveWithTimeout(dir, 4, 60000);
    expect(Date.now() - start).toBeLessThan(3000);
    expect(await savedValue(dir)).toBe(4);
    expect(fs.readFileSync(outside, 'utf8')).toBe(String(sleeper.pid));
    sleeper.kill('SIGKILL');
    fs.rmSync(dir, {recursive: true});
    fs.rmSync(path.dirname(outside), {recursive: true});
  }, 10000);

  it("takes over a lock naming this process's own pid that no save of it holds", async () => {
    const dir = tmp();
    const lockFile = path.join(dir, 'model.json.lock');
    fs.writeFileSync(lockFile, String(process.pid)); // fresh: only the pid says it is stale
    const start = Date.now();
    await constantModel(5).save(fileSystem(dir));
    expect(Date.now() - start).toBeLessThan(3000);
    expect(await savedValue(dir)).toBe(5);
    expect(fs.existsSync(lockFile)).toBe(false);
    fs.rmSync(dir, {recursive: true});
  }, 10000);

  it('takes over a lock of pid 1 written before pid 1 started (a container restart)', async () => {
    const dir = tmp();
    const lockFile = path.join(dir, 'model.json.lock');
    fs.writeFileSync(lockFile, '1');
    const before = new Date(pid1StartMs() - 3600 * 1000);
    fs.utimesSync(lockFile, before, before);
    const start = Date.now();
    await constantModel(6).save(fileSystem(dir));
    expect(Date.now() - start).toBeLessThan(3000);
    expect(await savedValue(dir)).toBe(6);
    expect(fs.existsSync(lockFile)).toBe(false);
    fs.rmSync(dir, {recursive: true});
  }, 10000);

  it('waits for a lock of pid 1 written after pid 1 started (it may be holding it)', async () => {
    const dir = tmp();
    fs.writeFileSync(path.join(dir, 'model.json.lock'), '1');
    await expect(saveWithTimeout(dir, 1, 300)).rejects.toThrow(
      /model.json.lock has been held by process 1 for 300 ms/,
    );
    fs.rmSync(dir, {recursive: true});
  }, 10000);

  it('saves past stray folders named like a leftover temporary file or weights.bin.prev', async () => {
    const dir = tmp();
    const dead = await deadPid();
    const outside = path.join(tmp(), 'precious.bin');
    fs.writeFileSync(outside, 'keep me');
    const strays = [
      `.weights.bin.${dead}-0123456789ab.tmp`,
      `.model.json.${dead}-0123456789ab.tmp`,
      `model.json.lock.${dead}-01234567.tmp`,
    ];
    for (const name of strays) {
      fs.mkdirSync(path.join(dir, name));
      fs.writeFileSync(path.join(dir, name, 'inside'), 'x');
    }
    fs.mkdirSync(path.join(dir, 'weights.bin.prev'));
    fs.symlinkSync(outside, path.join(dir, 'weights.bin.prev', 'link'));
    await constantModel(7).save(fileSystem(dir));
    await constantModel(8).save(fileSystem(dir)); // a second save replaces weights.bin too
    expect(await savedValue(dir)).toBe(8);
    const names = fs.readdirSync(dir).sort();
    const moved = names.filter((n) => /^weights\.bin\.prev\.[0-9a-f]{8}\.stray$/.test(n));
    expect(moved).toHaveLength(1);
    expect(names).toEqual(['model.json', 'weights.bin', ...strays, ...moved].sort());
    for (const name of strays) {
      expect(fs.readFileSync(path.join(dir, name, 'inside'), 'utf8')).toBe('x');
    }
    expect(fs.readlinkSync(path.join(dir, moved[0], 'link'))).toBe(outside);
    expect(fs.readFileSync(outside, 'utf8')).toBe('keep me');
    fs.rmSync(dir, {recursive: true});
    fs.rmSync(path.dirname(outside), {recursive: true});
  }, 10000);
});
