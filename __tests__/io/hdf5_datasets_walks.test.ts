/**
 * `Hdf5Reader` walks each group once (src/io/hdf5_datasets.ts): jsfive makes a new object, its
 * header and links parsed again, at each `Group.get`, so reading every dataset of a weights file
 * by its path from the root parsed each group above it once per dataset. Counted on keras-hub's
 * own Llama 3 weights file (fixtures/hub_presets.py): one `get` per group or dataset of the file
 * (h5py counts 91 below the root), however many datasets are read below it after.
 */
import * as fs from 'fs';
import * as path from 'path';

import {Hdf5Reader} from '../../src/io/hdf5_datasets';

const FILE = path.join(__dirname, '..', 'fixtures', 'hub_presets', 'llama3', 'model.weights.h5');

describe('Hdf5Reader: each group and dataset reached once', () => {
  it("listing every dataset, then reading each one's shape and place: one jsfive get per object", async () => {
    const jsfive = await import('jsfive');
    const get = jest.spyOn(jsfive.Group.prototype, 'get');
    // the reader's calls (jsfive's own `get('.')` on each group it makes aside)
    const gets = () => get.mock.calls.filter(([name]) => name !== '.').length;
    try {
      const reader = await Hdf5Reader.open(
        new Uint8Array(fs.readFileSync(FILE)),
        'model.weights.h5',
      );
      const paths = reader.datasetPaths('/');
      expect(paths.length).toBeGreaterThan(20);
      // the walk reached every group and dataset once: one get each (h5py's listing has 91)
      const walked = gets();
      expect(walked).toBe(91);
      // each dataset's shape and place by its path from the root: no group walked again
      const datasets = paths.map((p) => reader.dataset(p));
      expect(datasets.every((d) => d.bytes > 0)).toBe(true);
      expect(reader.keys('layers/llama_transformer_decoder_1').length).toBeGreaterThan(3);
      expect(gets()).toBe(walked);
    } finally {
      get.mockRestore();
    }
  });
});
