/**
 * A weights file read by range (src/io/hdf5_sparse_image.ts, `Hdf5Reader.openFile`): the image
 * the reader parses leaves out the large datasets' values, which are read from the file as they
 * are copied. Checked against the reader of the whole file's bytes (jsfive's own walk of the
 * datasets' places), on a file h5py wrote (version-1 object headers) and one hdf5_writer.ts
 * wrote (version 2), and on a file whose values hold a layout message's bytes pointing at its
 * metadata (a scan's false find, read back into the image).
 */
import * as fs from 'fs';
import * as path from 'path';

import {Hdf5Reader} from '../../src/io/hdf5_datasets';
import {complement, declaredValueRegions, MIN_LEFT_OUT} from '../../src/io/hdf5_sparse_image';
import {writeHdf5} from '../../src/io/hdf5_writer';
import type {Hdf5Group} from '../../src/io/hdf5_writer';
import type {RandomAccessFile} from '../../src/io/random_access_file';

const H5PY_FILE = path.join(
  __dirname,
  '..',
  'fixtures',
  'hub_presets',
  'llama3',
  'model.weights.h5',
);

/** A file of `bytes` read by range, counting its reads' bytes and whether it was closed. */
function bytesFile(bytes: Uint8Array) {
  const stats = {read: 0, closed: false};
  const file: RandomAccessFile = {
    size: bytes.length,
    read(out, outAt, length, position) {
      if (stats.closed) throw new Error('closed');
      out.set(bytes.subarray(position, position + length), outAt);
      stats.read += length;
    },
    close() {
      stats.closed = true;
    },
  };
  return {file, stats};
}

/** Every dataset's [offset, offset + bytes) and values, by the reader of the whole bytes. */
async function wholeFile(bytes: Uint8Array) {
  const reader = await Hdf5Reader.open(bytes, 'whole');
  return reader.datasetPaths('/').map((p) => {
    const d = reader.dataset(p);
    const values = new Uint8Array(d.bytes);
    reader.copy(d, values, 0);
    return {path: p, start: d.offset, end: d.offset + d.fileBytes, values};
  });
}

/** Values of n float32s, i * step. */
/** Every dataset `reader` copies equals the whole file's reader's values. */
async function expectValuesOf(reader: Hdf5Reader, bytes: Uint8Array): Promise<void> {
  for (const d of await wholeFile(bytes)) {
    const ds = reader.dataset(d.path);
    const out = new Uint8Array(ds.bytes);
    reader.copy(ds, out, 0);
    expect(out).toEqual(d.values);
  }
}

const floats = (n: number, step: number) =>
  new Uint8Array(Float32Array.from({length: n}, (_, i) => i * step).buffer);

function writtenFile(): Uint8Array {
  const root: Hdf5Group = {
    layers: {
      big: {vars: {'0': {shape: [64, 32], dtype: 'float32', data: floats(2048, 0.5)}}},
      small: {vars: {'0': {shape: [4], dtype: 'float32', data: floats(4, 1)}}},
      ints: {
        vars: {
          '0': {
            shape: [600],
            dtype: 'int64',
            data: new Uint8Array(
              BigInt64Array.from({length: 600}, (_, i) => BigInt(i - 300)).buffer,
            ),
          },
        },
      },
    },
  };
  return writeHdf5(root);
}

describe('declaredValueRegions: the values a scan of the layout messages finds', () => {
  it.each([
    ['h5py (version-1 headers)', () => new Uint8Array(fs.readFileSync(H5PY_FILE))],
    ['hdf5_writer.ts (version-2 headers)', writtenFile],
  ])('%s: exactly the datasets of at least the given size', async (_, make) => {
    const bytes = make();
    const minBytes = 1024;
    const expected = (await wholeFile(bytes))
      .filter((d) => d.end - d.start >= minBytes)
      .map(({start, end}) => ({start, end}))
      .sort((a, b) => a.start - b.start);
    expect(expected.length).toBeGreaterThanOrEqual(2);
    const {file} = bytesFile(bytes);
    expect(declaredValueRegions(file, minBytes)).toEqual(expected);
  });

  it('complement: the bytes outside sorted regions', () => {
    expect(
      complement(100, [
        {start: 10, end: 20},
        {start: 20, end: 30},
        {start: 50, end: 100},
      ]),
    ).toEqual([
      {start: 0, end: 10},
      {start: 30, end: 50},
    ]);
    expect(complement(5, [])).toEqual([{start: 0, end: 5}]);
  });
});

describe('Hdf5Reader.openFile: values read by range', () => {
  it.each([
    ['h5py (version-1 headers)', () => new Uint8Array(fs.readFileSync(H5PY_FILE))],
    ['hdf5_writer.ts (version-2 headers)', writtenFile],
  ])(
    '%s: every dataset as the whole file gives it; large values not in the image',
    async (_, make) => {
      const bytes = make();
      const {file, stats} = bytesFile(bytes);
      const reader = await Hdf5Reader.openFile(file, 'by range', 1024);
      const whole = await wholeFile(bytes);
      const leftOut = whole.filter((d) => d.end - d.start >= 1024);
      const leftOutBytes = leftOut.reduce((n, d) => n + d.end - d.start, 0);
      expect(leftOutBytes).toBeGreaterThan(0);
      // the image holds no byte of a left-out dataset's values (zeros where the file has values)
      for (const d of leftOut) {
        expect(reader.bytes.subarray(d.start, d.end).every((b) => b === 0)).toBe(true);
        expect(bytes.subarray(d.start, d.end).some((b) => b !== 0)).toBe(true);
      }
      const beforeCopies = stats.read;
      for (const d of whole) {
        const ds = reader.dataset(d.path);
        const out = new Uint8Array(ds.bytes + 8);
        reader.copy(ds, out, 8);
        expect(out.subarray(8)).toEqual(d.values);
      }
      // the copies read exactly the left-out values from the file
      expect(stats.read - beforeCopies).toBe(leftOutBytes);
      expect(stats.closed).toBe(false);
      reader.close();
      expect(stats.closed).toBe(true);
    },
  );

  it("a layout message's bytes inside values, pointing at the metadata: read back, values right", async () => {
    // bait's values hold a version-1 layout message declaring [metadata start, end of file)
    const make = (bait: Uint8Array): Uint8Array => {
      const root: Hdf5Group = {
        a: {shape: [512], dtype: 'float32', data: floats(512, 0.25)},
        b: {shape: [32], dtype: 'int8', data: bait},
      };
      for (let i = 0; i < 24; i++)
        root[`c${i}`] = {shape: [2], dtype: 'float32', data: floats(2, i)};
      return writeHdf5(root);
    };
    const plain = make(new Uint8Array(32));
    const places = await wholeFile(plain);
    const b = places.find((d) => d.path === 'b')!;
    const metaStart = b.end; // b's header follows its values (hdf5_writer.ts places values first)
    const bait = new Uint8Array(32);
    bait.set([0x08, 0, 0x18, 0, 0, 0, 0, 0, 3, 1]);
    const view = new DataView(bait.buffer);
    view.setUint32(10, metaStart, true);
    view.setUint32(18, plain.length - metaStart, true);
    const bytes = make(bait);
    expect(bytes.length).toBe(plain.length);
    expect(plain.length - metaStart).toBeGreaterThanOrEqual(1024);
    const {file} = bytesFile(bytes);
    // the scan takes the bait (it cannot tell): the reader must not
    expect(declaredValueRegions(file, 1024)).toContainEqual({start: metaStart, end: bytes.length});
    const reader = await Hdf5Reader.openFile(file, 'bait', 1024);
    await expectValuesOf(reader, bytes);
    reader.close();
  });

  it("a layout message's bytes inside values, pointing into a later dataset's values: read back", async () => {
    // the scan takes the bait's region (part of m's values) first and jumps over it, so m's own
    // layout message names a start it already has: the image would lack m's first values
    const make = (bait: Uint8Array): Uint8Array =>
      writeHdf5({
        a: {shape: [512], dtype: 'float32', data: floats(512, 0.25)},
        b: {shape: [32], dtype: 'int8', data: bait},
        m: {shape: [512], dtype: 'float32', data: floats(512, 3)},
        c: {shape: [2], dtype: 'float32', data: floats(2, 1)},
      });
    const plain = make(new Uint8Array(32));
    const m = (await wholeFile(plain)).find((d) => d.path === 'm')!;
    const bait = new Uint8Array(32);
    bait.set([0x08, 0, 0x18, 0, 0, 0, 0, 0, 3, 1]);
    const view = new DataView(bait.buffer);
    view.setUint32(10, m.start, true);
    view.setUint32(18, m.end - m.start - 4, true);
    const bytes = make(bait);
    const {file} = bytesFile(bytes);
    expect(declaredValueRegions(file, 1024)).toContainEqual({start: m.start, end: m.end - 4});
    const reader = await Hdf5Reader.openFile(file, 'bait', 1024);
    await expectValuesOf(reader, bytes);
    reader.close();
  });

  it(`leaves out values of ${MIN_LEFT_OUT} bytes and more by default, not smaller ones`, async () => {
    const bytes = writeHdf5({
      large: {shape: [MIN_LEFT_OUT / 4], dtype: 'float32', data: floats(MIN_LEFT_OUT / 4, 1)},
      under: {
        shape: [MIN_LEFT_OUT / 4 - 1],
        dtype: 'float32',
        data: floats(MIN_LEFT_OUT / 4 - 1, 1),
      },
    });
    const {file} = bytesFile(bytes);
    const reader = await Hdf5Reader.openFile(file, 'default');
    const large = reader.dataset('large');
    const under = reader.dataset('under');
    expect(reader.bytes.subarray(large.offset + 4, large.offset + 8)).toEqual(new Uint8Array(4));
    expect(reader.bytes.subarray(under.offset + 4, under.offset + 8)).toEqual(
      bytes.subarray(under.offset + 4, under.offset + 8),
    );
    reader.close();
  });
});
