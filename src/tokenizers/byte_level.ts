/**
 * GPT-2's byte-level alphabet (keras-hub's `bytes_to_unicode`): each of the 256 byte values is
 * one printable character, so a BPE vocabulary holds any byte sequence as text.
 */

let tables: {byteToChar: string[]; charToByte: Map<string, number>} | undefined;

/** The byte -> character table and its inverse, built once. */
export function byteTables(): {byteToChar: string[]; charToByte: Map<string, number>} {
  if (tables === undefined) {
    const byteToChar: string[] = new Array<string>(256);
    let extra = 0;
    for (let b = 0; b < 256; b++) {
      const printable =
        (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
      byteToChar[b] = String.fromCharCode(printable ? b : 256 + extra++);
    }
    const charToByte = new Map<string, number>();
    byteToChar.forEach((c, b) => charToByte.set(c, b));
    tables = {byteToChar, charToByte};
  }
  return tables;
}

let encoder: TextEncoder | undefined;
let decoder: TextDecoder | undefined;

/** UTF-8 bytes of a string; a lone surrogate becomes U+FFFD's bytes (TextEncoder's rule). */
export function utf8Bytes(text: string): Uint8Array {
  encoder ??= new TextEncoder();
  return encoder.encode(text);
}

/**
 * Lossy UTF-8: each maximal invalid subsequence becomes one U+FFFD, as Python's
 * `bytes.decode("utf-8", errors="replace")` and Rust's `from_utf8_lossy` do; a leading byte order
 * mark is kept (Python keeps it).
 */
export function utf8Lossy(bytes: Uint8Array): string {
  decoder ??= new TextDecoder('utf-8', {fatal: false, ignoreBOM: true});
  return decoder.decode(bytes);
}
