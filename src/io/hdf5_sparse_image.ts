/**
 * An HDF5 file's image in memory without its large datasets' values: the bytes a reader parses
 * (superblock, object headers, groups, heaps, attributes) copied from the file, the values of
 * each large contiguous dataset left as zeros that the memory never commits (a zero-filled
 * ArrayBuffer's untouched pages take no memory), to be read by range when a weight is written.
 * A 540 MB Keras weights file of a 135M-parameter model takes about 1 MB this way, so loading it
 * holds its weights once (in the model) instead of twice (the file's bytes and the model).
 *
 * The values' places come from a scan of the file for data layout messages (version 3,
 * contiguous: `08 00 18 00` in a version-1 object header, as h5py writes them, or `08 12 00` in a
 * version-2 one, as hdf5_writer.ts does), before anything is parsed. A scan can find a message-like
 * run of bytes inside some values: the reader checks every region left out against the datasets
 * it then parses and reads into the image any region that is not exactly one dataset's values
 * (hdf5_datasets.ts, `Hdf5Reader.openFile`).
 */
import type {RandomAccessFile} from './random_access_file';

/** Bytes of a file [start, end). */
export interface ByteRange {
  start: number;
  end: number;
}

/** The smallest values left out of the image: smaller ones are read with the rest (64 KiB). */
export const MIN_LEFT_OUT = 64 << 10;
/** Bytes copied at a time into the image (8 MiB), and read at a time by the scan (256 KiB). */
const SCAN_BLOCK = 8 << 20;
const SCAN_BLOCK_SMALL = 256 << 10;
/** A layout message's bytes from its header's first byte to its size's last (version 1). */
const MESSAGE_SPAN = 26;

/**
 * The contiguous regions that data layout messages in `file` declare, `minBytes` or longer. The
 * scan jumps over each region it has found ahead of it (a dataset's header comes before its values
 * in the files h5py and hdf5_writer.ts write), so it reads little more than the metadata.
 */
export function declaredValueRegions(file: RandomAccessFile, minBytes: number): ByteRange[] {
  const found = new Map<number, number>();
  /** Starts of regions found ahead of the scan, sorted. */
  const ahead: number[] = [];
  const block = new Uint8Array(Math.min(SCAN_BLOCK_SMALL, file.size));
  const view = new DataView(block.buffer);
  const u64 = (at: number) => view.getUint32(at, true) + view.getUint32(at + 4, true) * 2 ** 32;
  const consider = (address: number, bytes: number, here: number) => {
    if (bytes < minBytes || address < 8 || address + bytes > file.size || found.has(address)) {
      return;
    }
    found.set(address, bytes);
    if (address > here) {
      ahead.push(address);
      ahead.sort((a, b) => a - b);
    }
  };
  let pos = 0;
  while (pos < file.size) {
    while (ahead.length > 0 && ahead[0] <= pos) {
      const start = ahead.shift() as number;
      // the scan reached a region it found: over it
      if (start === pos) pos = start + (found.get(start) as number);
    }
    if (pos >= file.size) break;
    const limit = Math.min(file.size, ahead.length > 0 ? ahead[0] : file.size);
    const n = Math.min(block.length, limit - pos + MESSAGE_SPAN, file.size - pos);
    file.read(block, 0, n, pos);
    const scanned = Math.min(n, limit - pos);
    for (let i = block.indexOf(0x08); i >= 0 && i < scanned; i = block.indexOf(0x08, i + 1)) {
      if (i + MESSAGE_SPAN > n) break;
      // version-1 header message: type 0x0008, size 24 (18 padded to 8), flags, 3 reserved
      if (block[i + 1] === 0 && block[i + 2] === 0x18 && block[i + 3] === 0) {
        if (block[i + 8] === 3 && block[i + 9] === 1) consider(u64(i + 10), u64(i + 18), pos + i);
      }
      // version-2 header message: type 0x08, size 18, flags
      if (block[i + 1] === 0x12 && block[i + 2] === 0) {
        if (block[i + 4] === 3 && block[i + 5] === 1) consider(u64(i + 6), u64(i + 14), pos + i);
      }
    }
    // the next block overlaps this one by a message's span, unless a region starts first
    const next = pos + n - MESSAGE_SPAN;
    const reached = ahead.length > 0 && ahead[0] <= next ? ahead[0] : null;
    pos = reached ?? (pos + n >= file.size ? file.size : Math.max(next, pos + 1));
  }
  // regions sorted; any two that overlap are both dropped (read with the rest)
  const sorted = [...found].map(([start, bytes]) => ({start, end: start + bytes}));
  sorted.sort((a, b) => a.start - b.start);
  return sorted.filter(
    (r, i) =>
      (i === 0 || sorted[i - 1].end <= r.start) &&
      (i === sorted.length - 1 || r.end <= sorted[i + 1].start),
  );
}

/** Copies `ranges` of `file` into `image` at the same places, a block at a time. */
export function readRanges(file: RandomAccessFile, image: Uint8Array, ranges: ByteRange[]): void {
  for (const {start, end} of ranges) {
    for (let at = start; at < end; at += SCAN_BLOCK) {
      file.read(image, at, Math.min(SCAN_BLOCK, end - at), at);
    }
  }
}

/** The parts of [0, size) outside the sorted, disjoint `regions`. */
export function complement(size: number, regions: ByteRange[]): ByteRange[] {
  const out: ByteRange[] = [];
  let at = 0;
  for (const r of regions) {
    if (r.start > at) out.push({start: at, end: r.start});
    at = Math.max(at, r.end);
  }
  if (at < size) out.push({start: at, end: size});
  return out;
}

/**
 * The image of `file`: every byte but those of the value regions the scan found (returned as
 * `leftOut`, each `minLeftOut` bytes or more), which stay zero and uncommitted.
 */
export function sparseImage(
  file: RandomAccessFile,
  minLeftOut = MIN_LEFT_OUT,
): {image: Uint8Array; leftOut: ByteRange[]} {
  const leftOut = declaredValueRegions(file, minLeftOut);
  const image = new Uint8Array(file.size);
  readRanges(file, image, complement(file.size, leftOut));
  return {image, leftOut};
}
