/**
 * Reading the datasets of an HDF5 file held in memory (Keras' `model.weights.h5`, tf-keras 2's
 * `.h5` models) without trusting it. jsfive (pure JavaScript, imported only when a file is
 * opened) parses the tree, attributes, shapes and types; the values are copied here straight from
 * the file's bytes, after checking that the dataset is stored contiguously (as Keras writes it),
 * in a type tfjs holds, and that every byte it declares lies inside the file: a small file
 * declaring a 40 GB dataset is refused from its header, before anything is allocated.
 */
import type {DataObjects, Dataset, Group, File as H5File} from 'jsfive';

import {readRanges, sparseImage} from './hdf5_sparse_image';
import type {RandomAccessFile} from './random_access_file';

/** A dataset's place in the file and what tfjs makes of it. */
export interface Hdf5Dataset {
  path: string;
  shape: number[];
  /**
   * The dtype tfjs gets (float64 becomes float32, int64 int32; int8 stays bytes, in tfjs' one-byte
   * dtype `bool`: the package's int8 weights, ops/int8.ts).
   */
  dtype: 'float32' | 'int32' | 'bool';
  /** HDF5's type, e.g. `<f4`. */
  fileType: string;
  /** Where the values start in the file, and how many bytes they take there. */
  offset: number;
  fileBytes: number;
  /** Bytes of the values as tfjs holds them (4 per element; 1 for int8). */
  bytes: number;
}

const SIGNATURE = [0x89, 0x48, 0x44, 0x46, 0x0d, 0x0a, 0x1a, 0x0a];
const DATA_LAYOUT_MESSAGE = 0x0008;
const LINK_MESSAGE = 0x0006;
/** How deep groups may nest under the walked root: Keras' weights paths are a few levels deep. */
export const MAX_GROUP_DEPTH = 64;
const TYPES: Record<string, {dtype: 'float32' | 'int32' | 'bool'; size: number}> = {
  '<f4': {dtype: 'float32', size: 4},
  '<f8': {dtype: 'float32', size: 8},
  '<i4': {dtype: 'int32', size: 4},
  '<i8': {dtype: 'int32', size: 8},
  // Keras 3's int8 weights (`model.quantize("int8")`; numpy's `|i1`, which jsfive names `<i1`),
  // kept as bytes
  '<i1': {dtype: 'bool', size: 1},
};

/**
 * The file size an HDF5 superblock declares (its end-of-file address; superblock versions 0 to 3,
 * 8-byte offsets), or null where it cannot be read.
 */
function declaredEnd(bytes: Uint8Array): number | null {
  if (bytes.length < 48) return null;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const version = bytes[8];
  const at = version === 0 ? 40 : version === 1 ? 44 : version === 2 || version === 3 ? 28 : -1;
  const offsetSize = version <= 1 ? bytes[13] : bytes[9];
  if (at < 0 || offsetSize !== 8) return null;
  const base = version <= 1 ? at - 16 : 12;
  return (
    view.getUint32(at, true) + view.getUint32(at + 4, true) * 2 ** 32 + view.getUint32(base, true)
  );
}

/** Whether `bytes` start with HDF5's signature. */
export function isHdf5(bytes: Uint8Array): boolean {
  return bytes.length >= 8 && SIGNATURE.every((b, i) => bytes[i] === b);
}

/** What the reader takes, for its refusals of other links. */
const UNSUPPORTED_LINK = 'expected groups and datasets only, as Keras writes them';

/**
 * Whether jsfive failed on a link it cannot follow: it calls the link's target as a function and
 * throws "thing is not a function" for an external or user-defined link.
 */
function isUnfollowedLink(e: unknown): boolean {
  return e instanceof TypeError && /is not a function/.test(e.message);
}

/** An opened HDF5 file: its groups' attributes and its datasets, read on request. */
export class Hdf5Reader {
  /**
   * The groups and datasets reached so far, by path: jsfive makes a new object for each `get`,
   * parsing its object header and links again, so walking each dataset's path from the root
   * parsed every group above it once per dataset (a 30-block model: thousands of headers).
   */
  private readonly nodes = new Map<string, Group | Dataset>();

  private constructor(
    private readonly file: H5File,
    private readonly GroupClass: typeof Group,
    readonly bytes: Uint8Array,
    readonly label: string,
    /**
     * Where `bytes` is a sparse image (hdf5_sparse_image.ts): the file, read by range for the
     * values left out of the image (their sizes by their first byte).
     */
    private readonly source: {file: RandomAccessFile; leftOut: Map<number, number>} | null = null,
  ) {}

  /**
   * Opens a file read by range (Node's fs) as an image without its large datasets' values, which
   * {@link copy} reads from the file: the file's bytes are never all held in memory. Every region
   * the image left out must be exactly one dataset's values; any other (a scan's false find) is
   * read into the image and the file parsed again. The reader holds `file` open until
   * {@link close}. `minLeftOut`: the smallest values left out (hdf5_sparse_image.ts' 64 KiB).
   */
  static async openFile(
    file: RandomAccessFile,
    label: string,
    minLeftOut?: number,
  ): Promise<Hdf5Reader> {
    const {image, leftOut} = sparseImage(file, minLeftOut);
    const values = new Map<number, number>();
    let reader: Hdf5Reader | null = null;
    try {
      reader = await Hdf5Reader.open(image, label);
      for (const p of reader.datasetPaths('/')) {
        const d = reader.dataset(p);
        values.set(d.offset, d.fileBytes);
      }
    } catch {
      // an image that cannot be read (metadata left out) or a file the walk refuses: every
      // byte in the image, read (or refused) as the whole file would be
      values.clear();
    }
    const kept = leftOut.filter((r) => values.get(r.start) === r.end - r.start);
    if (reader == null || kept.length !== leftOut.length) {
      readRanges(
        file,
        image,
        leftOut.filter((r) => !kept.includes(r)),
      );
      reader = await Hdf5Reader.open(image, label);
    }
    return new Hdf5Reader(reader.file, reader.GroupClass, image, label, {
      file,
      leftOut: new Map(kept.map((r) => [r.start, r.end - r.start])),
    });
  }

  /** Closes the file a reader of {@link openFile} reads from (nothing for one in memory). */
  close(): void {
    this.source?.file.close();
  }

  /**
   * Opens `bytes` (parsing only the tree as it is walked). `label` names the file in errors.
   */
  static async open(bytes: Uint8Array, label: string): Promise<Hdf5Reader> {
    if (!isHdf5(bytes)) {
      const head = Array.from(bytes.subarray(0, 8), (b) => b.toString(16).padStart(2, '0'));
      throw new Error(
        `reading ${label}: expected an HDF5 file (starting with 89 48 44 46 0d 0a 1a 0a), ` +
          `received ${bytes.length} bytes starting with ${head.join(' ') || 'nothing'}`,
      );
    }
    const end = declaredEnd(bytes);
    if (end != null && end > bytes.length) {
      throw new Error(
        `reading ${label}: expected the ${end} bytes its HDF5 superblock declares (end-of-file ` +
          `address), received ${bytes.length} (the file is truncated)`,
      );
    }
    const jsfive = await import('jsfive');
    // jsfive reads from an ArrayBuffer of the file alone
    const own =
      bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength
        ? (bytes.buffer as ArrayBuffer)
        : (bytes.slice().buffer as ArrayBuffer);
    let file: H5File;
    try {
      file = new jsfive.File(own, label);
    } catch (e) {
      if (isUnfollowedLink(e)) {
        throw new Error(
          `reading ${label}: the root group holds a link that is not a hard link to a group or ` +
            `dataset (an external or user-defined link); it is not supported (${UNSUPPORTED_LINK})`,
        );
      }
      throw new Error(`reading ${label}: not a readable HDF5 file, damaged (${String(e)})`);
    }
    return new Hdf5Reader(file, jsfive.Group, new Uint8Array(own), label);
  }

  private fail(message: string): never {
    throw new Error(`reading ${this.label}: ${message}`);
  }

  /**
   * The object at `path`, walked one link at a time: a soft link, an external link or any link
   * but a hard one is refused by name (Keras writes none; jsfive follows a soft link to itself
   * until the stack overflows, and fails on an external one with a TypeError).
   */
  private node(path: string): Group | Dataset {
    let at: Group | Dataset = this.file;
    let walked = '';
    for (const name of path.split('/')) {
      if (name === '') continue;
      if (!(at instanceof this.GroupClass)) {
        this.fail(`cannot read '${path}': '${walked}' is a dataset, not a group`);
      }
      const where: string = walked === '' ? name : `${walked}/${name}`;
      at = this.child(at, name, where);
      walked = where;
    }
    return at;
  }

  /** The object `name` of `group` (at `path`), by a hard link only; each path made once. */
  private child(group: Group, name: string, path: string): Group | Dataset {
    const known = this.nodes.get(path);
    if (known != null) return known;
    const made = this.followed(group, name, path);
    this.nodes.set(path, made);
    return made;
  }

  /** {@link child}, made now. */
  private followed(group: Group, name: string, path: string): Group | Dataset {
    const link = group._links[name];
    if (link === undefined) this.fail(`cannot read '${path}': no such group or dataset`);
    if (typeof link === 'string') {
      this.fail(
        `'${path}' is a soft link (to ${JSON.stringify(link)}); soft links are not supported ` +
          '(expected groups and datasets only, as Keras writes them)',
      );
    }
    try {
      return group.get(name);
    } catch (e) {
      const bad = this.unsupportedLink(link);
      if (bad != null) {
        this.fail(
          `'${path}/${bad.name}' is ${bad.kind}; it is not supported (expected groups and ` +
            'datasets only, as Keras writes them)',
        );
      }
      if (isUnfollowedLink(e)) {
        // a link kept outside the group's header (a group of many links): not found by name
        this.fail(
          `'${path}' holds a link that is not a hard link to a group or dataset (an external or ` +
            `user-defined link); it is not supported (${UNSUPPORTED_LINK})`,
        );
      }
      this.fail(`cannot read '${path}' (${String(e)})`);
    }
  }

  /**
   * The first link of the group at `address` that jsfive cannot follow (an external link, a
   * user-defined one), found from its link messages, or null.
   */
  private unsupportedLink(address: number): {name: string; kind: string} | null {
    const DataObjectsClass = this.file._dataobjects.constructor as new (
      fh: ArrayBuffer,
      offset: number,
    ) => DataObjects;
    let objects: DataObjects;
    try {
      objects = new DataObjectsClass(this.bytes.buffer as ArrayBuffer, address);
    } catch {
      return null;
    }
    const b = this.bytes;
    for (const msg of objects.msgs) {
      if (msg.get('type') !== LINK_MESSAGE) continue;
      let at = msg.get('offset_to_message') ?? b.length;
      if (at + 2 > b.length) continue;
      const flags = b[at + 1];
      at += 2;
      const type = (flags & 0x08) !== 0 ? b[at++] : 0;
      if ((flags & 0x04) !== 0) at += 8; // creation order
      if ((flags & 0x10) !== 0) at += 1; // character set
      const size = 1 << (flags & 3);
      let length = 0;
      for (let i = size - 1; i >= 0; i--) length = length * 256 + (b[at + i] ?? 0);
      at += size;
      if (type === 0 || type === 1 || at + length > b.length) continue;
      const name = new TextDecoder('utf-8').decode(b.subarray(at, at + length));
      const kind = type === 64 ? 'an external link (to another file)' : `a link of type ${type}`;
      return {name, kind};
    }
    return null;
  }

  /** Whether `path` names a group. */
  isGroup(path: string): boolean {
    return this.node(path) instanceof this.GroupClass;
  }

  /** The names below a group, or an error naming what is missing. */
  keys(path: string): string[] {
    const n = this.node(path);
    if (!(n instanceof this.GroupClass)) this.fail(`expected a group at '${path}'`);
    return n.keys;
  }

  /** Whether the group `path` holds `name`. */
  has(path: string, name: string): boolean {
    return this.keys(path).includes(name);
  }

  /** A group's (or the file's, for '/') attributes. */
  attrs(path: string): Record<string, unknown> {
    try {
      return this.node(path).attrs;
    } catch (e) {
      this.fail(`cannot read the attributes of '${path}' (${(e as Error).message ?? String(e)})`);
    }
  }

  /**
   * The paths of every dataset under `root`, depth first, names sorted (as h5py lists them).
   * Each group is visited once, by its address: a group reached a second time (a hard link to
   * itself or to a group above it, which would make the walk endless, or a second name of a
   * group) is refused, and so are groups nested more than {@link MAX_GROUP_DEPTH} deep.
   */
  datasetPaths(root: string, skip: (path: string) => boolean = () => false): string[] {
    const out: string[] = [];
    const start = this.node(root);
    if (!(start instanceof this.GroupClass)) this.fail(`expected a group at '${root}'`);
    const rootPath = root === '/' ? '' : root;
    const seen = new Map<number, string>([[start._dataobjects.offset, rootPath || '/']]);
    const stack: Array<{group: Group; path: string; depth: number}> = [
      {group: start, path: rootPath, depth: 0},
    ];
    while (stack.length > 0) {
      const {group, path: at, depth} = stack.pop() as (typeof stack)[number];
      for (const name of [...group.keys].sort()) {
        const p = at === '' ? name : `${at}/${name}`;
        if (skip(p)) continue;
        const link = group._links[name];
        const node = this.child(group, name, p);
        if (!(node instanceof this.GroupClass)) {
          out.push(p);
          continue;
        }
        const first = seen.get(link as number);
        if (first != null) {
          this.fail(
            `the group '${p}' is a hard link to '${first}', a group already walked (` +
              `${first === '/' || p.startsWith(`${first}/`) ? 'a group that contains itself' : 'a second name of a group'}` +
              '); expected each group once, as Keras writes them',
          );
        }
        if (depth + 1 > MAX_GROUP_DEPTH) {
          this.fail(
            `the group '${p}' is nested ${depth + 1} groups deep; expected at most ` +
              `${MAX_GROUP_DEPTH} (Keras' weights are a few levels deep)`,
          );
        }
        seen.set(link as number, p);
        stack.push({group: node, path: p, depth: depth + 1});
      }
    }
    return out.sort();
  }

  /** A dataset's shape, type and place, checked against the file before anything is read. */
  dataset(path: string): Hdf5Dataset {
    const d = this.node(path);
    if (d instanceof this.GroupClass) this.fail(`expected a dataset at '${path}', found a group`);
    const ds = d as Dataset;
    const shape = ds.shape;
    if (!Array.isArray(shape) || !shape.every((n) => Number.isSafeInteger(n) && n >= 0)) {
      this.fail(`dataset '${path}' has an invalid shape ${JSON.stringify(shape)}`);
    }
    const fileType = typeof ds.dtype === 'string' ? ds.dtype : JSON.stringify(ds.dtype);
    const type = TYPES[fileType];
    if (type == null) {
      this.fail(
        `dataset '${path}' holds ${fileType} values; expected little-endian float32, float64, ` +
          'int8, int32 or int64 (<f4, <f8, <i1, <i4, <i8)',
      );
    }
    const elements = shape.reduce((p, n) => p * n, 1);
    const fileBytes = elements * type.size;
    const objects = ds._dataobjects;
    const layoutMessage = objects.find_msg_type(DATA_LAYOUT_MESSAGE)[0];
    if (layoutMessage == null) this.fail(`dataset '${path}' has no data layout message`);
    const [, , layout, at] = objects._get_data_message_properties(
      layoutMessage.get('offset_to_message'),
    );
    if (layout !== 1) {
      const how =
        layout === 0
          ? 'compactly (in its header)'
          : layout === 2
            ? 'in chunks (chunked or compressed)'
            : layout === 3
              ? 'as a virtual dataset (its values mapped from other datasets or files)'
              : `with data layout class ${layout}`;
      this.fail(
        `dataset '${path}' is stored ${how}, which is not supported; expected contiguous ` +
          'storage, as Keras writes weights',
      );
    }
    if (at + 8 > this.bytes.length) this.fail(`dataset '${path}' has a truncated layout message`);
    const view = new DataView(this.bytes.buffer, this.bytes.byteOffset, this.bytes.byteLength);
    const lo = view.getUint32(at, true);
    const hi = view.getUint32(at + 4, true);
    const undefinedAddress = lo === 0xffffffff && hi === 0xffffffff;
    const offset = undefinedAddress ? 0 : lo + hi * 2 ** 32;
    if (undefinedAddress ? fileBytes !== 0 : offset + fileBytes > this.bytes.length) {
      this.fail(
        `dataset '${path}' declares ${fileBytes} bytes (${JSON.stringify(shape)} ${fileType})` +
          (undefinedAddress
            ? ' but stores none'
            : ` at byte ${offset}, but the file holds ${this.bytes.length} bytes`),
      );
    }
    const bytes = elements * (type.dtype === 'bool' ? 1 : 4);
    return {path, shape, dtype: type.dtype, fileType, offset, fileBytes, bytes};
  }

  /** Copies a dataset's values, as tfjs holds them, into `out` at byte `at`. */
  copy(ds: Hdf5Dataset, out: Uint8Array, at: number): void {
    const same = ds.fileType === '<f4' || ds.fileType === '<i4' || ds.fileType === '<i1';
    let src = this.bytes.subarray(ds.offset, ds.offset + ds.fileBytes);
    if (this.source?.leftOut.get(ds.offset) === ds.fileBytes) {
      // values left out of the image: read from the file, straight into `out` where kept as is
      if (same) {
        this.source.file.read(out, at, ds.fileBytes, ds.offset);
        return;
      }
      src = new Uint8Array(ds.fileBytes);
      this.source.file.read(src, 0, ds.fileBytes, ds.offset);
    }
    if (same) {
      out.set(src, at);
      return;
    }
    const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
    const n = ds.bytes / 4;
    const target = new DataView(out.buffer, out.byteOffset + at, ds.bytes);
    for (let i = 0; i < n; i++) {
      if (ds.fileType === '<f8') {
        target.setFloat32(i * 4, view.getFloat64(i * 8, true), true);
      } else {
        const v = Number(view.getBigInt64(i * 8, true));
        if (v > 2147483647 || v < -2147483648) {
          this.fail(`dataset '${ds.path}' holds ${v}, outside int32`);
        }
        target.setInt32(i * 4, v, true);
      }
    }
  }
}
