/**
 * Writes an HDF5 file of groups and contiguous datasets, the subset Keras 3's `model.weights.h5`
 * uses (`layers/<name>/vars/<index>` datasets of float / integer arrays), in HDF5's version-2
 * structures (what h5py writes with `libver='latest'`, readable by HDF5 1.8 and later): a
 * version-2 superblock, version-2 object headers with their Jenkins lookup3 checksums, groups
 * holding their links in their object header (link info, group info and link messages), datasets
 * with a dataspace, a datatype, a fill value and a contiguous layout. No attributes, no chunking,
 * no compression. Reference: the HDF5 File Format Specification, version 3.0.
 */

/** The element types written. */
export type Hdf5Dtype = 'float32' | 'float64' | 'float16' | 'int8' | 'uint8' | 'int32' | 'int64';

/** A dataset: its shape (`[]` for a scalar) and its values, row-major, little-endian. */
export interface Hdf5Dataset {
  shape: number[];
  dtype: Hdf5Dtype;
  /** The values' bytes (length = product of shape x element size). */
  data: Uint8Array;
}

/** A group: named children, written in the order given. */
export interface Hdf5Group {
  [name: string]: Hdf5Group | Hdf5Dataset;
}

/** HDF5's undefined address (all bits set). */
const UNDEF = -1;
const SIGNATURE = [0x89, 0x48, 0x44, 0x46, 0x0d, 0x0a, 0x1a, 0x0a];

const ELEMENT_BYTES: Record<Hdf5Dtype, number> = {
  float32: 4,
  float64: 8,
  float16: 2,
  int8: 1,
  uint8: 1,
  int32: 4,
  int64: 8,
};

function isDataset(x: Hdf5Group | Hdf5Dataset): x is Hdf5Dataset {
  return x.data instanceof Uint8Array && Array.isArray(x.shape);
}

/** Bob Jenkins' lookup3 `hashlittle` (HDF5's `H5_checksum_lookup3`), initial value 0. */
export function lookup3(key: Uint8Array): number {
  const rot = (x: number, k: number) => ((x << k) | (x >>> (32 - k))) >>> 0;
  let length = key.length;
  let a = (0xdeadbeef + length) >>> 0;
  let b = a;
  let c = a;
  let i = 0;
  const word = (at: number) =>
    (key[at] | (key[at + 1] << 8) | (key[at + 2] << 16) | (key[at + 3] << 24)) >>> 0;
  while (length > 12) {
    a = (a + word(i)) >>> 0;
    b = (b + word(i + 4)) >>> 0;
    c = (c + word(i + 8)) >>> 0;
    // mix
    a = (a - c) >>> 0;
    a = (a ^ rot(c, 4)) >>> 0;
    c = (c + b) >>> 0;
    b = (b - a) >>> 0;
    b = (b ^ rot(a, 6)) >>> 0;
    a = (a + c) >>> 0;
    c = (c - b) >>> 0;
    c = (c ^ rot(b, 8)) >>> 0;
    b = (b + a) >>> 0;
    a = (a - c) >>> 0;
    a = (a ^ rot(c, 16)) >>> 0;
    c = (c + b) >>> 0;
    b = (b - a) >>> 0;
    b = (b ^ rot(a, 19)) >>> 0;
    a = (a + c) >>> 0;
    c = (c - b) >>> 0;
    c = (c ^ rot(b, 4)) >>> 0;
    b = (b + a) >>> 0;
    length -= 12;
    i += 12;
  }
  if (length === 0) return c;
  // the last 1..12 bytes, zero-padded, as hashlittle's byte-wise tail
  const tail = new Uint8Array(12);
  tail.set(key.subarray(i, i + length));
  const t = (at: number) =>
    (tail[at] | (tail[at + 1] << 8) | (tail[at + 2] << 16) | (tail[at + 3] << 24)) >>> 0;
  a = (a + t(0)) >>> 0;
  b = (b + t(4)) >>> 0;
  c = (c + t(8)) >>> 0;
  // final
  c = (c ^ b) >>> 0;
  c = (c - rot(b, 14)) >>> 0;
  a = (a ^ c) >>> 0;
  a = (a - rot(c, 11)) >>> 0;
  b = (b ^ a) >>> 0;
  b = (b - rot(a, 25)) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rot(b, 16)) >>> 0;
  a = (a ^ c) >>> 0;
  a = (a - rot(c, 4)) >>> 0;
  b = (b ^ a) >>> 0;
  b = (b - rot(a, 14)) >>> 0;
  c = (c ^ b) >>> 0;
  c = (c - rot(b, 24)) >>> 0;
  return c;
}

/** Little-endian byte writer. */
class Bytes {
  private readonly parts: number[] = [];
  u8(v: number): this {
    this.parts.push(v & 0xff);
    return this;
  }
  u16(v: number): this {
    return this.u8(v).u8(v >>> 8);
  }
  u32(v: number): this {
    return this.u16(v & 0xffff).u16(v >>> 16);
  }
  /** An unsigned 64-bit value below 2^53, or UNDEF (all bits set). */
  u64(v: number): this {
    if (v === UNDEF) return this.u32(0xffffffff).u32(0xffffffff);
    return this.u32(v % 2 ** 32).u32(Math.floor(v / 2 ** 32));
  }
  bytes(b: ArrayLike<number>): this {
    for (let i = 0; i < b.length; i++) this.parts.push(b[i]);
    return this;
  }
  get length(): number {
    return this.parts.length;
  }
  done(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}

function datatype(dtype: Hdf5Dtype): Uint8Array {
  const size = ELEMENT_BYTES[dtype];
  const w = new Bytes();
  if (dtype.startsWith('float')) {
    // class 1 (floating point), version 1; little-endian, mantissa msb implied; IEEE layouts
    const [signAt, expAt, expSize, mantSize, bias] =
      dtype === 'float16'
        ? [15, 10, 5, 10, 15]
        : dtype === 'float32'
          ? [31, 23, 8, 23, 127]
          : [63, 52, 11, 52, 1023];
    w.u8(0x11).u8(0x20).u8(signAt).u8(0).u32(size);
    w.u16(0)
      .u16(size * 8)
      .u8(expAt)
      .u8(expSize)
      .u8(0)
      .u8(mantSize)
      .u32(bias);
  } else {
    // class 0 (fixed point), version 1; little-endian; signed unless uint8
    w.u8(0x10)
      .u8(dtype === 'uint8' ? 0 : 0x08)
      .u8(0)
      .u8(0)
      .u32(size);
    w.u16(0).u16(size * 8);
  }
  return w.done();
}

/** A version-2 object header holding `messages` ([type, body]), with its checksum. */
function objectHeader(messages: Array<[number, Uint8Array]>): Uint8Array {
  const body = new Bytes();
  for (const [type, data] of messages) {
    if (data.length > 0xffff) throw new Error(`HDF5: a header message of ${data.length} bytes`);
    body.u8(type).u16(data.length).u8(0).bytes(data);
  }
  // flags 0x02: the size of chunk #0 takes 4 bytes; no times, no attribute phase values
  const head = new Bytes().bytes([0x4f, 0x48, 0x44, 0x52]).u8(2).u8(0x02).u32(body.length);
  const withoutSum = new Bytes().bytes(head.done()).bytes(body.done()).done();
  return new Bytes().bytes(withoutSum).u32(lookup3(withoutSum)).done();
}

/**
 * The bytes of an HDF5 file holding `root` (groups and datasets, children in the order given).
 * Names are UTF-8, with no '/' or '.' alone; every dataset's bytes must match its shape and type.
 */
export function writeHdf5(root: Hdf5Group): Uint8Array {
  const chunks: Uint8Array[] = [];
  let end = 48; // after the superblock
  const place = (bytes: Uint8Array): number => {
    const at = end;
    chunks.push(bytes);
    end += bytes.length;
    return at;
  };
  const writeNode = (node: Hdf5Group | Hdf5Dataset, path: string): number => {
    if (isDataset(node)) {
      const elements = node.shape.reduce((n, d) => n * d, 1);
      if (!node.shape.every((d) => Number.isInteger(d) && d >= 0)) {
        throw new Error(`HDF5: dataset '${path}' has shape [${node.shape.join(', ')}]`);
      }
      const bytes = elements * ELEMENT_BYTES[node.dtype];
      if (node.data.length !== bytes) {
        throw new Error(
          `HDF5: dataset '${path}' of shape [${node.shape.join(', ')}] ${node.dtype} needs ` +
            `${bytes} bytes, received ${node.data.length}`,
        );
      }
      const address = bytes > 0 ? place(node.data) : UNDEF;
      const space = new Bytes()
        .u8(2)
        .u8(node.shape.length)
        .u8(0)
        .u8(node.shape.length ? 1 : 0);
      for (const d of node.shape) space.u64(d);
      return place(
        objectHeader([
          [0x01, space.done()],
          [0x03, datatype(node.dtype)],
          // fill value v3: allocation early, written if set, no value defined
          [0x05, new Bytes().u8(3).u8(0x09).done()],
          // layout v3: contiguous at `address`, `bytes` long
          [0x08, new Bytes().u8(3).u8(1).u64(address).u64(bytes).done()],
        ]),
      );
    }
    const links: Array<[number, Uint8Array]> = [];
    for (const [name, child] of Object.entries(node)) {
      if (name === '' || name.includes('/') || name === '.') {
        throw new Error(`HDF5: '${path}' has a child named ${JSON.stringify(name)}`);
      }
      const address = writeNode(child, `${path}${name}/`);
      const encoded = new TextEncoder().encode(name);
      const ascii = encoded.length === name.length;
      const long = encoded.length > 255;
      // link v1: flags bit 0 (2-byte name length), bit 4 (charset present: UTF-8); a hard link
      const link = new Bytes().u8(1).u8((long ? 1 : 0) | (ascii ? 0 : 0x10));
      if (!ascii) link.u8(1);
      if (long) link.u16(encoded.length);
      else link.u8(encoded.length);
      links.push([0x06, link.bytes(encoded).u64(address).done()]);
    }
    return place(
      objectHeader([
        // link info v0: no creation order, no dense storage (fractal heap, name index undefined)
        [0x02, new Bytes().u8(0).u8(0).u64(UNDEF).u64(UNDEF).done()],
        // group info v0 with phase change values: links stay in the header however many
        [0x0a, new Bytes().u8(0).u8(1).u16(0xffff).u16(0).done()],
        ...links,
      ]),
    );
  };
  const rootAddress = writeNode(root, '/');
  const superblock = new Bytes()
    .bytes(SIGNATURE)
    .u8(2) // superblock version
    .u8(8) // size of offsets
    .u8(8) // size of lengths
    .u8(0) // file consistency flags
    .u64(0) // base address
    .u64(UNDEF) // superblock extension
    .u64(end) // end of file
    .u64(rootAddress)
    .done();
  const out = new Uint8Array(end);
  out.set(superblock);
  new DataView(out.buffer).setUint32(44, lookup3(superblock), true);
  let at = 48;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
