/**
 * The HDF5 reader (src/io/hdf5_datasets.ts) on files Keras never writes, made by h5py
 * (fixtures/hdf5_hostile.py): links it cannot or must not follow are refused by name, with what
 * is not supported. The hard-link cycles, which hung the walk, are tested in a child process with
 * a time and memory limit by keras_file_safety.test.ts.
 */
import * as fs from 'fs';
import * as path from 'path';

import {Hdf5Reader, MAX_GROUP_DEPTH} from '../../src/io/hdf5_datasets';

const dir = path.join(__dirname, '..', '..', 'fixtures', 'hdf5_hostile');
const open = (name: string) =>
  Hdf5Reader.open(new Uint8Array(fs.readFileSync(path.join(dir, name))), name);

/** Every dataset's place, as loadKerasModel reads a Keras 3 weights file. */
async function walk(name: string): Promise<string[]> {
  const reader = await open(name);
  const paths = reader.datasetPaths('/', (p) => p === 'optimizer');
  for (const p of paths) reader.dataset(p);
  return paths;
}

describe('Hdf5Reader refuses what Keras never writes, naming the object', () => {
  it('an external link: named, not "thing is not a function"', async () => {
    await expect(walk('external.weights.h5')).rejects.toThrow(
      "reading external.weights.h5: 'layers/ext' is an external link (to another file); it is " +
        'not supported (expected groups and datasets only, as Keras writes them)',
    );
  });

  it('an external link among many links, or in the root group: named, not "thing is not a function"', async () => {
    // a group of many links keeps them outside its header (fixtures/hdf5_hostile.py)
    await expect(walk('external_many.weights.h5')).rejects.toThrow(
      "reading external_many.weights.h5: 'layers' holds a link that is not a hard link to a " +
        'group or dataset (an external or user-defined link); it is not supported (expected ' +
        'groups and datasets only, as Keras writes them)',
    );
    await expect(walk('external_root.weights.h5')).rejects.toThrow(
      'reading external_root.weights.h5: the root group holds a link that is not a hard link ' +
        'to a group or dataset (an external or user-defined link); it is not supported',
    );
  });

  it('a soft link to itself: named, not "Cannot read properties of null"', async () => {
    await expect(walk('soft_loop.weights.h5')).rejects.toThrow(
      `reading soft_loop.weights.h5: 'layers/soft' is a soft link (to "/layers/soft"); soft ` +
        'links are not supported (expected groups and datasets only, as Keras writes them)',
    );
    // reached by its path too (tf-keras 2 files are read by the names their attributes list)
    const reader = await open('soft_loop.weights.h5');
    expect(() => reader.dataset('layers/soft')).toThrow(/'layers\/soft' is a soft link/);
  });

  it('a virtual dataset: said to be virtual, not "stored compactly"', async () => {
    await expect(walk('virtual.weights.h5')).rejects.toThrow(
      "reading virtual.weights.h5: dataset 'layers/dense/vars/0' is stored as a virtual dataset " +
        '(its values mapped from other datasets or files), which is not supported; expected ' +
        'contiguous storage, as Keras writes weights',
    );
  });

  it(`groups nested 80 deep: refused past ${MAX_GROUP_DEPTH}`, async () => {
    await expect(walk('deep.weights.h5')).rejects.toThrow(
      new RegExp(
        `the group 'layers/deep(/g\\d+){${MAX_GROUP_DEPTH - 1}}' is nested ${MAX_GROUP_DEPTH + 1} ` +
          `groups deep; expected at most ${MAX_GROUP_DEPTH}`,
      ),
    );
  });

  it('the same weights without the additions walk as h5py lists them', async () => {
    // every fixture is sequential.keras' weights plus one addition: its six datasets, sorted
    // (h5py's visit lists the same)
    const reader = await open('deep.weights.h5');
    const paths = reader.datasetPaths('/', (p) => p === 'layers/deep');
    expect(paths).toEqual([
      'layers/dense/vars/0',
      'layers/dense/vars/1',
      'layers/dense_1/vars/0',
      'layers/dense_1/vars/1',
      'layers/layer_normalization/vars/0',
      'layers/layer_normalization/vars/1',
    ]);
  });
});
