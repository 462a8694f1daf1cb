/**
 * Zip archives whose deflated entries inflate to far more than they take: `prefix` followed by
 * many zeros, written as raw deflate by hand (a stored block for the prefix, then one fixed-Huffman
 * block of a literal 0 and copies of 258 bytes at distance 1: 13 bits each), so a test can make a
 * 200 MiB entry in milliseconds without allocating it. CRCs are written as 0: the readers under
 * test check sizes, not checksums.
 */

/** A little-endian bit writer: values LSB first, Huffman codes MSB first (RFC 1951). */
class Bits {
  private readonly out: number[] = [];
  private acc = 0;
  private n = 0;
  value(v: number, bits: number): void {
    for (let i = 0; i < bits; i++) this.bit((v >> i) & 1);
  }
  code(c: number, bits: number): void {
    for (let i = bits - 1; i >= 0; i--) this.bit((c >> i) & 1);
  }
  private bit(b: number): void {
    this.acc |= b << this.n;
    if (++this.n === 8) this.flush();
  }
  flush(): void {
    if (this.n > 0) this.out.push(this.acc);
    this.acc = 0;
    this.n = 0;
  }
  bytes(more: ArrayLike<number> = []): void {
    this.flush();
    for (let i = 0; i < more.length; i++) this.out.push(more[i]);
  }
  result(): Uint8Array {
    this.flush();
    return Uint8Array.from(this.out);
  }
}

/** Raw deflate of `prefix` (at most 65535 bytes) then 1 + 258 * `copies` zeros. */
export function deflatePrefixThenZeros(prefix: Uint8Array, copies: number): Uint8Array {
  if (prefix.length > 0xffff) throw new Error('prefix too long for one stored block');
  const w = new Bits();
  w.value(0, 1); // not the last block
  w.value(0, 2); // stored
  const n = prefix.length;
  w.bytes([n & 0xff, n >> 8, ~n & 0xff, (~n >> 8) & 0xff]);
  w.bytes(prefix);
  w.value(1, 1); // the last block
  w.value(1, 2); // fixed Huffman codes
  w.code(0x30, 8); // literal 0
  for (let i = 0; i < copies; i++) {
    w.code(0xc5, 8); // length 258 (code 285)
    w.code(0, 5); // distance 1
  }
  w.code(0, 7); // end of block
  return w.result();
}

/** One entry of {@link zipOf}: its name, its data as stored, and the size it inflates to. */
export interface RawEntry {
  name: string;
  /** 0: stored, 8: deflated. */
  method: 0 | 8;
  data: Uint8Array;
  size: number;
}

/** A zip archive of entries as given (no zip64: each below 4 GiB). */
export function zipOf(entries: RawEntry[]): Uint8Array {
  const enc = new TextEncoder();
  const parts: Uint8Array[] = [];
  const central: Uint8Array[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = enc.encode(e.name);
    const local = new Uint8Array(30 + name.length);
    const v = new DataView(local.buffer);
    v.setUint32(0, 0x04034b50, true);
    v.setUint16(4, 20, true);
    v.setUint16(8, e.method, true);
    v.setUint32(18, e.data.length, true);
    v.setUint32(22, e.size, true);
    v.setUint16(26, name.length, true);
    local.set(name, 30);
    const dir = new Uint8Array(46 + name.length);
    const d = new DataView(dir.buffer);
    d.setUint32(0, 0x02014b50, true);
    d.setUint16(4, 20, true);
    d.setUint16(6, 20, true);
    d.setUint16(10, e.method, true);
    d.setUint32(20, e.data.length, true);
    d.setUint32(24, e.size, true);
    d.setUint16(28, name.length, true);
    d.setUint32(42, offset, true);
    dir.set(name, 46);
    parts.push(local, e.data);
    central.push(dir);
    offset += local.length + e.data.length;
  }
  const dirSize = central.reduce((n, c) => n + c.length, 0);
  const end = new Uint8Array(22);
  const x = new DataView(end.buffer);
  x.setUint32(0, 0x06054b50, true);
  x.setUint16(8, entries.length, true);
  x.setUint16(10, entries.length, true);
  x.setUint32(12, dirSize, true);
  x.setUint32(16, offset, true);
  const all = [...parts, ...central, end];
  const out = new Uint8Array(all.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of all) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
