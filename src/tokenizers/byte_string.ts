/**
 * Byte strings: UTF-8 held in a JavaScript string of one character per byte (0..255), so that
 * SentencePiece's byte-wise rules (its tries, piece lengths, byte fallback) run as in C++ while
 * pieces are still Map keys and slices. And sentencepiece's own UTF-8 reading (util.cc
 * `DecodeUTF8`, `OneCharLen`), which differs from TextDecoder's on malformed input.
 */

/** The byte string of UTF-8 bytes. */
export function bytesToByteString(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 8192) {
    out += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return out;
}

/** The byte string of a text's UTF-8 (a lone surrogate becomes U+FFFD, as TextEncoder writes it). */
export function toByteString(text: string): string {
  // ASCII is its own byte string
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(text)) return text;
  return bytesToByteString(new TextEncoder().encode(text));
}

/** The bytes of a byte string. */
export function byteStringBytes(s: string): Uint8Array {
  const out = new Uint8Array(s.length);
  for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
  return out;
}

/** The text of a byte string that holds valid UTF-8. */
export function fromByteString(s: string): string {
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(s)) return s;
  return new TextDecoder().decode(byteStringBytes(s));
}

/** sentencepiece's `OneCharLen`: a character's length in bytes from its first byte alone. */
export function oneCharLength(firstByte: number): number {
  const high = firstByte >> 4;
  return high < 12 ? 1 : high < 14 ? 2 : high === 14 ? 3 : 4;
}

const isTrail = (b: number): boolean => (b & 0xc0) === 0x80;
const isValidCodePoint = (c: number): boolean => c < 0xd800 || (c >= 0xe000 && c <= 0x10ffff);

/**
 * The length of the valid UTF-8 character at `at` of a byte string, or 0 when the bytes there
 * are malformed (sentencepiece's `IsValidDecodeUTF8`: a malformed byte is consumed alone).
 */
export function validCharLength(s: string, at: number): number {
  const left = s.length - at;
  const b0 = s.charCodeAt(at);
  if (b0 < 0x80) return 1;
  if (left >= 2 && (b0 & 0xe0) === 0xc0) {
    const b1 = s.charCodeAt(at + 1);
    const cp = ((b0 & 0x1f) << 6) | (b1 & 0x3f);
    if (isTrail(b1) && cp >= 0x80) return 2;
  } else if (left >= 3 && (b0 & 0xf0) === 0xe0) {
    const b1 = s.charCodeAt(at + 1);
    const b2 = s.charCodeAt(at + 2);
    const cp = ((b0 & 0x0f) << 12) | ((b1 & 0x3f) << 6) | (b2 & 0x3f);
    if (isTrail(b1) && isTrail(b2) && cp >= 0x800 && isValidCodePoint(cp)) return 3;
  } else if (left >= 4 && (b0 & 0xf8) === 0xf0) {
    const b1 = s.charCodeAt(at + 1);
    const b2 = s.charCodeAt(at + 2);
    const b3 = s.charCodeAt(at + 3);
    const cp = ((b0 & 0x07) << 18) | ((b1 & 0x3f) << 12) | ((b2 & 0x3f) << 6) | (b3 & 0x3f);
    if (isTrail(b1) && isTrail(b2) && isTrail(b3) && cp >= 0x10000 && isValidCodePoint(cp)) {
      return 4;
    }
  }
  return 0;
}
