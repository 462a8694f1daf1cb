/**
 * A keras-hub preset's weights are held once while it loads: each weight is copied from its
 * weights file's dataset straight into its variable's memory (load_in_place.ts' `writeWeight`),
 * with no map of every weight's values between the file and the model (keras_hub_preset.ts). From
 * a folder the weights file is read by range (hdf5_sparse_image.ts), never whole, and closed.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {loadKerasHubPreset} from '../../src';
import type {KerasHubPreset} from '../../src';
import {Hdf5Reader} from '../../src/io/hdf5_datasets';

const DIR = path.join(__dirname, '..', 'fixtures', 'hub_presets');
/** Node's fs module object itself (a namespace import's properties cannot be spied on). */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const nodeFs = require('fs') as typeof fs;

/** The cpu backend's typed array of a variable (the memory its weight lives in). */
function cpuValues(t: tf.Tensor): ArrayBufferLike {
  const data = (tf.backend() as unknown as {data: {get(id: object): {values: Float32Array}}}).data;
  return data.get(t.dataId).values.buffer;
}

describe('loadKerasHubPreset: weights held once', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it.each(['gpt2', 'llama3', 'bert', 'gpt2.keras'])(
    '%s: every weight is copied from its dataset into its own variable, no other buffer',
    async (name) => {
      const copies: Array<{buffer: ArrayBufferLike; bytes: number}> = [];
      const original = Hdf5Reader.prototype.copy;
      const copy = jest.spyOn(Hdf5Reader.prototype, 'copy');
      copy.mockImplementation(function (this: Hdf5Reader, ds, out, at) {
        copies.push({buffer: out.buffer, bytes: ds.bytes});
        original.call(this, ds, out, at);
      });
      let preset: KerasHubPreset;
      try {
        preset = await loadKerasHubPreset(path.join(DIR, name));
      } finally {
        copy.mockRestore();
      }
      const model = preset.model;
      const memory = new Set(model.weights.map((w) => cpuValues(w.read())));
      const held = model.weights.reduce((n, w) => n + w.read().size * 4, 0);
      const outside = copies.filter((c) => !memory.has(c.buffer)).reduce((n, c) => n + c.bytes, 0);
      const inside = copies.filter((c) => memory.has(c.buffer)).reduce((n, c) => n + c.bytes, 0);
      // old loaders copied every weight into a map of values first: `outside` was all of them
      expect({outside, inside}).toEqual({outside: 0, inside: held});
      preset.dispose();
    },
  );
});

/** The file descriptors `fs.openSync` opens and `fs.closeSync` closes until `restore()`. */
function watchOpenClose() {
  const opened: number[] = [];
  const closed: number[] = [];
  const openSync = nodeFs.openSync;
  const closeSync = nodeFs.closeSync;
  const spyOpen = jest.spyOn(nodeFs, 'openSync').mockImplementation(((...a: unknown[]) => {
    const fd = (openSync as (...x: unknown[]) => number)(...a);
    opened.push(fd);
    return fd;
  }) as typeof fs.openSync);
  const spyClose = jest.spyOn(nodeFs, 'closeSync').mockImplementation((fd: number) => {
    closed.push(fd);
    closeSync(fd);
  });
  return {
    opened,
    closed,
    restore() {
      spyOpen.mockRestore();
      spyClose.mockRestore();
    },
  };
}

describe('loadKerasHubPreset from a folder: the weights file read by range, never whole', () => {
  beforeAll(() => tf.setBackend('cpu'));

  it.each(['llama3', 'gpt2'])(
    '%s: model.weights.h5 opened, read by range and closed; not read whole',
    async (name) => {
      const before = tf.memory().numTensors;
      const wholeReads: string[] = [];
      const readFile = fs.promises.readFile;
      const spyRead = jest.spyOn(fs.promises, 'readFile');
      spyRead.mockImplementation(((file: fs.PathLike, ...rest: unknown[]) => {
        wholeReads.push(String(file));
        return (readFile as (...a: unknown[]) => Promise<Buffer>)(file, ...rest);
      }) as typeof fs.promises.readFile);
      const files = watchOpenClose();
      let preset: KerasHubPreset;
      try {
        preset = await loadKerasHubPreset(path.join(DIR, name));
      } finally {
        spyRead.mockRestore();
        files.restore();
      }
      expect(wholeReads.filter((f) => f.endsWith('.weights.h5'))).toEqual([]);
      expect(files.opened.length).toBeGreaterThanOrEqual(1);
      expect(files.closed.sort()).toEqual(files.opened.sort());
      expect(preset.model.weights.length).toBeGreaterThan(0);
      preset.dispose();
      expect(tf.memory().numTensors).toBe(before);
    },
  );

  it('a preset that fails after its weights file is opened still closes it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'preset-closed-'));
    try {
      for (const f of fs.readdirSync(path.join(DIR, 'llama3'))) {
        const from = path.join(DIR, 'llama3', f);
        if (fs.statSync(from).isFile()) fs.copyFileSync(from, path.join(dir, f));
      }
      // a config implying far more weights than the file declares: refused after it is opened
      const config = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8'));
      config.config.num_layers = 500;
      fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
      const files = watchOpenClose();
      const tensors = tf.memory().numTensors;
      try {
        await expect(loadKerasHubPreset(dir)).rejects.toThrow(/implies at least/);
        expect(tf.memory().numTensors).toBe(tensors);
      } finally {
        files.restore();
      }
      expect(files.opened.length).toBe(1);
      expect(files.closed).toEqual(files.opened);
    } finally {
      fs.rmSync(dir, {recursive: true, force: true});
    }
  });
});
