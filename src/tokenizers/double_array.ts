/**
 * A reader of darts-clone's double-array trie (third_party/darts_clone/darts.h in
 * sentencepiece), the trie a SentencePiece model's `precompiled_charsmap` holds: 32-bit
 * little-endian units, each a label, a leaf flag and an offset to its children, or a leaf's
 * value. `commonPrefixSearch` as darts-clone's: every key that is a prefix of the input.
 */
export class DoubleArray {
  private readonly units: Uint32Array;

  /** The trie of `bytes` (a whole number of 4-byte units). */
  constructor(bytes: Uint8Array) {
    const n = bytes.length >>> 2;
    this.units = new Uint32Array(n);
    const view = new DataView(bytes.buffer, bytes.byteOffset, n * 4);
    for (let i = 0; i < n; i++) this.units[i] = view.getUint32(i * 4, true);
  }

  /** The number of units. */
  get size(): number {
    return this.units.length;
  }

  /**
   * Calls `found(length, value)` for each key that is a prefix of the byte string `s` from `at`,
   * shortest first (darts-clone's `commonPrefixSearch` with an explicit length).
   */
  commonPrefixSearch(s: string, at: number, found: (length: number, value: number) => void): void {
    const units = this.units;
    if (units.length === 0) return;
    let node = offsetOf(units[0]);
    for (let i = at; i < s.length; i++) {
      const c = s.charCodeAt(i);
      node ^= c;
      if (node >= units.length) return;
      const unit = units[node];
      // label: the low byte and the leaf bit (bit 31); a leaf unit never matches a byte
      if ((unit & 0x800000ff) >>> 0 !== c) return;
      node ^= offsetOf(unit);
      if ((unit >>> 8) & 1) {
        if (node >= units.length) return;
        found(i - at + 1, units[node] & 0x7fffffff);
      }
    }
  }
}

/** A unit's offset to its children. */
function offsetOf(unit: number): number {
  return ((unit >>> 10) << ((unit & (1 << 9)) >>> 6)) >>> 0;
}
