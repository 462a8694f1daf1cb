/**
 * A keras-hub preset's weights are held once while it loads: each weight is copied from its
 * weights file's dataset straight into its variable's memory (load_in_place.ts' `writeWeight`),
 * with no map of every weight's values between the file and the model (keras_hub_preset.ts).
 */
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {loadKerasHubPreset} from '../../src';
import type {KerasHubPreset} from '../../src';
import {Hdf5Reader} from '../../src/io/hdf5_datasets';

const DIR = path.join(__dirname, '..', 'fixtures', 'hub_presets');

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
