/**
 * Reading named entries of a zip archive held in memory (a Keras 3 `.keras` file), without
 * trusting it: nothing is extracted to disk, entry names that could lead outside (`..`, absolute
 * paths, drives, backslashes) are refused, every entry must lie inside the bytes it came in, and
 * an entry's declared size is checked against a limit before anything is allocated. Stored
 * entries (what Keras writes) are views of the archive's bytes, not copies; deflated ones are
 * inflated by fflate, imported only when one is read.
 */

/** One entry of the central directory. */
export interface ZipEntry {
  name: string;
  /** 0: stored, 8: deflated. */
  method: number;
  compressedSize: number;
  size: number;
  /** Offset of the entry's local header. */
  headerOffset: number;
}

function fail(message: string): never {
  throw new Error(`reading a .keras file: ${message}`);
}

/** The first bytes of `bytes`, for an error: printable ASCII as text, else hex. */
export function describeStart(bytes: Uint8Array): string {
  const head = bytes.subarray(0, 8);
  const printable = head.length > 0 && head.every((b) => b >= 0x20 && b < 0x7f);
  const shown = printable
    ? JSON.stringify(String.fromCharCode(...head))
    : Array.from(head, (b) => b.toString(16).padStart(2, '0')).join(' ');
  return `${bytes.length} bytes${head.length > 0 ? ` starting with ${shown}` : ''}`;
}

/** An entry name that stays inside the archive's own folder, or an error. */
function checkName(name: string): void {
  const parts = name.split('/');
  if (
    name.length === 0 ||
    name.startsWith('/') ||
    name.includes('\\') ||
    /^[a-z]:/i.test(name) ||
    name.includes('\0') ||
    parts.some((p) => p === '..')
  ) {
    fail(
      `refusing the zip entry ${JSON.stringify(name)}: expected a relative name inside the ` +
        'archive (no "..", no absolute path, drive or backslash)',
    );
  }
}

const EOCD = 0x06054b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;
const EOCD64_LOCATOR = 0x07064b50;
const EOCD64 = 0x06064b50;

/** Reads a little-endian 64-bit size as a number (exact below 2^53). */
function u64(view: DataView, at: number): number {
  return view.getUint32(at, true) + view.getUint32(at + 4, true) * 2 ** 32;
}

/** Finds the end-of-central-directory record: in the last 64 KiB + 22 bytes. */
function findEnd(view: DataView): number {
  const stop = Math.max(0, view.byteLength - 22 - 0xffff);
  for (let at = view.byteLength - 22; at >= stop; at--) {
    if (view.getUint32(at, true) === EOCD) return at;
  }
  return -1;
}

/**
 * The entries of a zip archive by name, from its central directory. Throws with what was
 * expected and what arrived on bytes that are not a zip archive, a truncated one, an entry
 * outside the bytes, a name leading outside or a name listed twice.
 */
export function zipEntries(bytes: Uint8Array, what = 'a zip archive'): Map<string, ZipEntry> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.length >= 22 ? findEnd(view) : -1;
  if (end < 0) {
    const zip = bytes.length >= 4 && view.getUint32(0, true) === LOCAL;
    fail(
      zip
        ? `expected ${what}, received ${bytes.length} bytes that start as one but have no end ` +
            'record (the file is truncated)'
        : `expected ${what} (bytes starting with "PK"), received ${describeStart(bytes)}`,
    );
  }
  let count = view.getUint16(end + 10, true);
  let dirSize = view.getUint32(end + 12, true);
  let dirOffset = view.getUint32(end + 16, true);
  if (dirOffset === 0xffffffff || count === 0xffff || dirSize === 0xffffffff) {
    // zip64: the locator precedes the end record and points at the zip64 end record
    const loc = end - 20;
    if (loc < 0 || view.getUint32(loc, true) !== EOCD64_LOCATOR) {
      fail('the archive declares zip64 sizes but has no zip64 end record (the file is damaged)');
    }
    const at = u64(view, loc + 8);
    if (at + 56 > bytes.length || view.getUint32(at, true) !== EOCD64) {
      fail('the zip64 end record lies outside the archive (the file is truncated)');
    }
    count = u64(view, at + 32);
    dirSize = u64(view, at + 40);
    dirOffset = u64(view, at + 48);
  }
  if (dirOffset + dirSize > bytes.length) {
    fail(
      `the central directory (${dirSize} bytes at ${dirOffset}) lies beyond the ${bytes.length} ` +
        'bytes received (the file is truncated)',
    );
  }
  const entries = new Map<string, ZipEntry>();
  const decoder = new TextDecoder('utf-8');
  let at = dirOffset;
  for (let i = 0; i < count; i++) {
    if (at + 46 > dirOffset + dirSize || view.getUint32(at, true) !== CENTRAL) {
      fail(`central directory entry ${i} of ${count} is damaged (expected its signature)`);
    }
    const flags = view.getUint16(at + 8, true);
    const method = view.getUint16(at + 10, true);
    let compressedSize = view.getUint32(at + 20, true);
    let size = view.getUint32(at + 24, true);
    const nameLength = view.getUint16(at + 28, true);
    const extraLength = view.getUint16(at + 30, true);
    const commentLength = view.getUint16(at + 32, true);
    let headerOffset = view.getUint32(at + 42, true);
    const next = at + 46 + nameLength + extraLength + commentLength;
    if (next > dirOffset + dirSize) fail(`central directory entry ${i} runs past the directory`);
    const name = decoder.decode(bytes.subarray(at + 46, at + 46 + nameLength));
    // zip64 extra field: the 64-bit values of those fields that hold 0xffffffff, in order
    for (let e = at + 46 + nameLength; e + 4 <= at + 46 + nameLength + extraLength;) {
      const id = view.getUint16(e, true);
      const len = view.getUint16(e + 2, true);
      if (id === 0x0001) {
        let p = e + 4;
        if (size === 0xffffffff) {
          size = u64(view, p);
          p += 8;
        }
        if (compressedSize === 0xffffffff) {
          compressedSize = u64(view, p);
          p += 8;
        }
        if (headerOffset === 0xffffffff) headerOffset = u64(view, p);
      }
      e += 4 + len;
    }
    checkName(name);
    if (entries.has(name)) fail(`the archive lists ${JSON.stringify(name)} twice`);
    if ((flags & 1) !== 0) fail(`the entry ${JSON.stringify(name)} is encrypted`);
    if (headerOffset + 30 + compressedSize > bytes.length) {
      fail(
        `the entry ${JSON.stringify(name)} (${compressedSize} bytes at ${headerOffset}) lies ` +
          `beyond the ${bytes.length} bytes received (the file is truncated)`,
      );
    }
    entries.set(name, {name, method, compressedSize, size, headerOffset});
    at = next;
  }
  return entries;
}

/**
 * The bytes of one entry: a view of `bytes` for a stored entry, an inflated copy for a deflated
 * one. Refuses an entry whose declared size exceeds `maxBytes` before allocating anything.
 */
export async function zipEntryBytes(
  bytes: Uint8Array,
  entry: ZipEntry,
  maxBytes: number,
): Promise<Uint8Array> {
  const label = JSON.stringify(entry.name);
  if (entry.size > maxBytes) {
    fail(`the entry ${label} declares ${entry.size} bytes, more than the ${maxBytes} allowed`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const h = entry.headerOffset;
  if (view.getUint32(h, true) !== LOCAL) {
    fail(`the local header of ${label} is damaged (expected its signature at byte ${h})`);
  }
  const start = h + 30 + view.getUint16(h + 26, true) + view.getUint16(h + 28, true);
  const stop = start + entry.compressedSize;
  if (stop > bytes.length) {
    fail(`the data of ${label} runs past the ${bytes.length} bytes received (truncated)`);
  }
  const data = bytes.subarray(start, stop);
  if (entry.method === 0) {
    if (entry.compressedSize !== entry.size) {
      fail(`the stored entry ${label} declares ${entry.size} bytes but holds ${data.length}`);
    }
    return data;
  }
  if (entry.method !== 8) {
    fail(
      `the entry ${label} uses compression method ${entry.method}; expected 0 (stored) or 8 ` +
        '(deflate)',
    );
  }
  const {inflateSync} = await import('fflate');
  const out = new Uint8Array(entry.size);
  let got: Uint8Array;
  try {
    got = inflateSync(data, {out});
  } catch (e) {
    fail(`cannot inflate ${label}: ${(e as Error).message}`);
  }
  if (got.length !== entry.size) {
    fail(`the entry ${label} declares ${entry.size} bytes but inflates to ${got.length}`);
  }
  return got;
}
