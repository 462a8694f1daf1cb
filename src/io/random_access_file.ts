/**
 * A file read by range, where the platform allows it (Node's fs): what lets a large weights file
 * be read without holding its bytes in memory (hdf5_sparse_image.ts). Reads are synchronous, as
 * a weight's values are written into its variable inside one synchronous call.
 */

/** A file opened for reading by range. */
export interface RandomAccessFile {
  /** Its size in bytes when opened. */
  readonly size: number;
  /** Copies `length` bytes from byte `position` of the file into `out` at `outAt`. */
  read(out: Uint8Array, outAt: number, length: number, position: number): void;
  /** Closes the file; reading after that throws. */
  close(): void;
}

/** The synchronous part of Node's fs that {@link openRandomAccess} uses. */
export interface SyncFs {
  openSync(path: string, flags: string): number;
  fstatSync(fd: number): {size: number};
  readSync(
    fd: number,
    buffer: Uint8Array,
    offset: number,
    length: number,
    position: number,
  ): number;
  closeSync(fd: number): void;
}

/** Whether `fs` has what {@link openRandomAccess} needs (a browser's or a test's fs may not). */
export function hasSyncFs(fs: unknown): fs is SyncFs {
  const f = fs as Partial<SyncFs> | null;
  return (
    f != null &&
    typeof f.openSync === 'function' &&
    typeof f.fstatSync === 'function' &&
    typeof f.readSync === 'function' &&
    typeof f.closeSync === 'function'
  );
}

/**
 * Opens `path` for reading by range. A read that ends before its length (the file shrank since it
 * was opened) throws, naming the file, rather than leaving zeros.
 */
export function openRandomAccess(fs: SyncFs, path: string): RandomAccessFile {
  const fd = fs.openSync(path, 'r');
  let open = true;
  let size: number;
  try {
    size = fs.fstatSync(fd).size;
  } catch (e) {
    fs.closeSync(fd);
    throw e;
  }
  return {
    size,
    read(out, outAt, length, position) {
      if (!open) throw new Error(`reading ${path}: the file was closed`);
      let done = 0;
      while (done < length) {
        const n = fs.readSync(fd, out, outAt + done, length - done, position + done);
        if (n <= 0) {
          throw new Error(
            `reading ${path}: expected ${length} bytes at byte ${position}, the file ended ` +
              `after ${done} (it changed while it was read)`,
          );
        }
        done += n;
      }
    },
    close() {
      if (!open) return;
      open = false;
      fs.closeSync(fd);
    },
  };
}
