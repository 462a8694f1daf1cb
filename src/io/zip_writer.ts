/**
 * Writes a zip archive of stored (uncompressed) entries, as Keras 3 writes `.keras` files
 * (Python's zipfile with ZIP_STORED): a local header and the bytes of each entry, then the
 * central directory. Names are UTF-8 (general purpose flag bit 11). Archives of 4 GiB or more
 * (which need ZIP64) are refused.
 */

let table: Uint32Array | null = null;

/** CRC-32 (IEEE 802.3, as zip uses) of `bytes`. */
export function crc32(bytes: Uint8Array): number {
  if (table == null) {
    table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      table[n] = c >>> 0;
    }
  }
  let crc = 0xffffffff;
  for (let i = 0; i < bytes.length; i++) crc = table[(crc ^ bytes[i]) & 0xff] ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** MS-DOS time and date of `d` (in UTC, so that an archive does not depend on the time zone). */
function dosTime(d: Date): [number, number] {
  const time = (d.getUTCHours() << 11) | (d.getUTCMinutes() << 5) | (d.getUTCSeconds() >> 1);
  const date =
    ((Math.max(d.getUTCFullYear(), 1980) - 1980) << 9) |
    ((d.getUTCMonth() + 1) << 5) |
    d.getUTCDate();
  return [time, date];
}

/** One entry: its name in the archive and its bytes. */
export interface ZipEntry {
  name: string;
  data: Uint8Array;
}

/** The bytes of a zip archive holding `entries` (stored, in the order given), dated `date`. */
export function writeZip(entries: ZipEntry[], date: Date = new Date()): Uint8Array {
  const [time, day] = dosTime(date);
  const names = entries.map((e) => new TextEncoder().encode(e.name));
  const total =
    entries.reduce(
      (n, e, i) => n + 30 + names[i].length + e.data.length + 46 + names[i].length,
      0,
    ) + 22;
  if (total >= 2 ** 32 || entries.length >= 0xffff) {
    throw new Error(
      `zip: an archive of ${total} bytes and ${entries.length} entries needs ZIP64, which is ` +
        'not written (at most 4 GiB and 65534 entries)',
    );
  }
  const out = new Uint8Array(total);
  const view = new DataView(out.buffer);
  let at = 0;
  const u16 = (v: number) => {
    view.setUint16(at, v, true);
    at += 2;
  };
  const u32 = (v: number) => {
    view.setUint32(at, v, true);
    at += 4;
  };
  const offsets: number[] = [];
  const crcs = entries.map((e) => crc32(e.data));
  entries.forEach((e, i) => {
    offsets.push(at);
    u32(0x04034b50);
    u16(20); // version needed: 2.0
    u16(0x0800); // UTF-8 names
    u16(0); // stored
    u16(time);
    u16(day);
    u32(crcs[i]);
    u32(e.data.length);
    u32(e.data.length);
    u16(names[i].length);
    u16(0); // no extra field
    out.set(names[i], at);
    at += names[i].length;
    out.set(e.data, at);
    at += e.data.length;
  });
  const directory = at;
  entries.forEach((e, i) => {
    u32(0x02014b50);
    u16(20); // made by: 2.0
    u16(20);
    u16(0x0800);
    u16(0);
    u16(time);
    u16(day);
    u32(crcs[i]);
    u32(e.data.length);
    u32(e.data.length);
    u16(names[i].length);
    u16(0); // extra
    u16(0); // comment
    u16(0); // disk
    u16(0); // internal attributes
    u32(0); // external attributes
    u32(offsets[i]);
    out.set(names[i], at);
    at += names[i].length;
  });
  const size = at - directory;
  u32(0x06054b50);
  u16(0);
  u16(0);
  u16(entries.length);
  u16(entries.length);
  u32(size);
  u32(directory);
  u16(0); // comment
  return out;
}
