/**
 * The HDF5 writer (src/io/hdf5_writer.ts) against two independent readers: jsfive (a JavaScript
 * HDF5 reader) here, and h5py (HDF5's C library) through fixtures/hdf5_writer_check.py, which
 * read fixtures/hdf5/written.h5 (this file's sample, written by the writer with
 * HDF5_WRITE_FIXTURE=1) and recorded what it saw in fixtures/hdf5/h5py_read.json; the writer must
 * still produce those bytes. lookup3 is
 * checked against Bob Jenkins' published values.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as jsfiveTyped from 'jsfive';

import {Hdf5Group, lookup3, writeHdf5} from '../../src/io/hdf5_writer';

/** What this test reads of jsfive (its declared types, src/io/jsfive.d.ts, leave out `value`). */
interface H5Node {
  keys: string[];
  value: ArrayLike<number>;
  shape: number[];
  dtype: string;
}
const jsfive = jsfiveTyped as unknown as {
  File: new (b: ArrayBuffer) => {keys: string[]; get(p: string): H5Node};
};

const FIXTURE = path.join(__dirname, '..', '..', 'fixtures', 'hdf5');
const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** The sample: Keras 3's weight layout, every element type, a scalar, an empty and a 0-d set. */
function sample(): Hdf5Group {
  const many: Hdf5Group = {};
  for (let i = 0; i < 20; i++) {
    many[`d${i}`] = {shape: [1], dtype: 'int32', data: bytesOf(new Int32Array([i]))};
  }
  return {
    layers: {
      dense: {
        vars: {
          '0': {
            shape: [3, 2],
            dtype: 'float32',
            data: bytesOf(new Float32Array([1, 2, 3, 4, 5, 6])),
          },
          '1': {shape: [2], dtype: 'float32', data: bytesOf(new Float32Array([0.5, -1]))},
        },
      },
      input_layer: {vars: {}},
    },
    vars: {},
    kinds: {
      int8: {shape: [2, 2], dtype: 'int8', data: bytesOf(new Int8Array([-127, 5, 0, 127]))},
      uint8: {shape: [1], dtype: 'uint8', data: new Uint8Array([7])},
      int64: {shape: [1], dtype: 'int64', data: bytesOf(new BigInt64Array([BigInt(-3)]))},
      float64: {shape: [2], dtype: 'float64', data: bytesOf(new Float64Array([Math.PI, -0]))},
      float16: {shape: [2], dtype: 'float16', data: new Uint8Array([0x00, 0x3c, 0x00, 0xc0])},
      scalar: {shape: [], dtype: 'float32', data: bytesOf(new Float32Array([3.5]))},
      empty: {shape: [0, 4], dtype: 'float32', data: new Uint8Array(0)},
      é名: {shape: [1], dtype: 'uint8', data: new Uint8Array([9])},
    },
    many,
  };
}

function read(bytes: Uint8Array) {
  return new jsfive.File(bytes.slice().buffer);
}

describe('writeHdf5', () => {
  it('lookup3 gives the published hashlittle values', () => {
    expect(lookup3(new Uint8Array(0))).toBe(0xdeadbeef);
    expect(lookup3(new TextEncoder().encode('Four score and seven years ago'))).toBe(0x17770551);
  });

  it('jsfive reads back every group, dataset, shape, type and value', () => {
    const f = read(writeHdf5(sample()));
    expect(f.keys).toEqual(['layers', 'vars', 'kinds', 'many']);
    const ds = (p: string) => f.get(p);
    expect(ds('layers/dense/vars/0').shape).toEqual([3, 2]);
    expect(Array.from(ds('layers/dense/vars/0').value)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(Array.from(ds('layers/dense/vars/1').value)).toEqual([0.5, -1]);
    expect(f.get('layers/input_layer/vars').keys).toEqual([]);
    expect(Array.from(ds('kinds/int8').value)).toEqual([-127, 5, 0, 127]);
    expect(ds('kinds/int8').dtype).toBe('<i1');
    expect(Array.from(ds('kinds/float64').value)).toEqual([Math.PI, -0]);
    expect(ds('kinds/float16').dtype).toBe('<f2');
    expect(Array.from(ds('kinds/scalar').value)).toEqual([3.5]);
    expect(ds('kinds/scalar').shape).toEqual([]);
    expect(ds('kinds/empty').shape).toEqual([0, 4]);
    expect(Array.from(ds('kinds/é名').value)).toEqual([9]);
    expect(f.get('many').keys).toHaveLength(20);
    expect(Array.from(ds('many/d17').value)).toEqual([17]);
  });

  it('writes the bytes h5py (HDF5 1.14) read as fixtures/hdf5/h5py_read.json records', () => {
    const written = writeHdf5(sample());
    // HDF5_WRITE_FIXTURE=1 rewrites the sample; then run fixtures/hdf5_writer_check.py
    if (process.env.HDF5_WRITE_FIXTURE === '1')
      fs.writeFileSync(path.join(FIXTURE, 'written.h5'), written);
    const committed = fs.readFileSync(path.join(FIXTURE, 'written.h5'));
    expect(Buffer.from(written).equals(committed)).toBe(true);
    const seen = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'h5py_read.json'), 'utf8'));
    expect(seen['layers/dense/vars/0']).toEqual({
      dtype: 'float32',
      shape: [3, 2],
      values: [
        [1, 2],
        [3, 4],
        [5, 6],
      ],
    });
    expect(seen['kinds/int8']).toEqual({
      dtype: 'int8',
      shape: [2, 2],
      values: [
        [-127, 5],
        [0, 127],
      ],
    });
    expect(seen['kinds/float16']).toEqual({dtype: 'float16', shape: [2], values: [1, -2]});
    expect(seen['kinds/scalar']).toEqual({dtype: 'float32', shape: [], values: 3.5});
    expect(Object.keys(seen).filter((k) => k.startsWith('many/'))).toHaveLength(20);
  });

  it('refuses a dataset whose bytes do not match its shape, and bad names', () => {
    expect(() =>
      writeHdf5({x: {shape: [2, 2], dtype: 'float32', data: new Uint8Array(12)}}),
    ).toThrow("HDF5: dataset '/x/' of shape [2, 2] float32 needs 16 bytes, received 12");
    expect(() => writeHdf5({'a/b': {}})).toThrow(`HDF5: '/' has a child named "a/b"`);
    expect(() => writeHdf5({x: {shape: [-1], dtype: 'int8', data: new Uint8Array(0)}})).toThrow(
      "HDF5: dataset '/x/' has shape [-1]",
    );
  });
});
