/**
 * SentencePiece's normalizer (normalizer.cc) on byte strings (byte_string.ts): the model's
 * `precompiled_charsmap` (a darts-clone double-array trie of UTF-8 sequences whose values point
 * into a block of NUL-terminated replacement strings; nmt_nfkc, nfkc_cf and the like compiled
 * into it), the longest rule at each position, user-defined symbols left as they are,
 * malformed UTF-8 as U+FFFD a byte at a time; then `remove_extra_whitespaces`,
 * `add_dummy_prefix` (a suffix when the trainer treats whitespace as a suffix) and
 * `escape_whitespaces` (a space written U+2581).
 */
import {validCharLength} from './byte_string';
import {DoubleArray} from './double_array';
import type {NormalizerSpec} from './sentence_piece_model';
import type {PieceTrie} from './piece_trie';

/** U+2581 (LOWER ONE EIGHTH BLOCK), SentencePiece's space, as a byte string. */
export const SPACE_SYMBOL = '\xe2\x96\x81';

/** U+FFFD as a byte string. */
const REPLACEMENT = '\xef\xbf\xbd';

/** darts-clone keeps at most this many prefix matches per position (normalizer.h). */
const MAX_TRIE_RESULTS = 32;

/** The parts of a precompiled charsmap: its trie and its block of replacement strings. */
function decodeCharsmap(blob: Uint8Array, what: string): {trie: DoubleArray; normalized: string} {
  if (blob.length <= 4) {
    throw new Error(
      `${what}: the normalizer's precompiled_charsmap is broken (${blob.length} bytes).`,
    );
  }
  const trieSize = new DataView(blob.buffer, blob.byteOffset, 4).getUint32(0, true);
  if (trieSize >= blob.length) {
    throw new Error(
      `${what}: the normalizer's precompiled_charsmap declares a trie of ${trieSize} bytes, ` +
        `more than its ${blob.length - 4} bytes hold.`,
    );
  }
  const trie = new DoubleArray(blob.subarray(4, 4 + trieSize));
  let normalized = '';
  const rest = blob.subarray(4 + trieSize);
  for (let i = 0; i < rest.length; i += 8192) {
    normalized += String.fromCharCode(...rest.subarray(i, i + 8192));
  }
  return {trie, normalized};
}

export class SentencePieceNormalizer {
  private readonly trie: DoubleArray | undefined;
  private readonly replacements: string = '';

  /**
   * `userDefined`: the model's user-defined symbols, never normalized (sentencepiece's prefix
   * matcher); `treatWhitespaceAsSuffix`: the trainer's flag (the dummy space goes at the end).
   */
  constructor(
    private readonly spec: NormalizerSpec,
    private readonly userDefined: PieceTrie | undefined,
    private readonly treatWhitespaceAsSuffix: boolean,
    what: string,
  ) {
    if (spec.precompiledCharsmap.length > 0) {
      const {trie, normalized} = decodeCharsmap(spec.precompiledCharsmap, what);
      this.trie = trie;
      this.replacements = normalized;
    }
  }

  /** The normalized form of the characters at `at` and how many bytes of `s` they take. */
  private prefix(s: string, at: number): [string, number] {
    if (this.userDefined !== undefined) {
      const length = this.userDefined.longestPrefix(s, at);
      if (length > 0) return [s.substr(at, length), length];
    }
    let longest = 0;
    let value = 0;
    if (this.trie !== undefined) {
      let results = 0;
      this.trie.commonPrefixSearch(s, at, (length, v) => {
        if (results++ < MAX_TRIE_RESULTS && length > longest) {
          longest = length;
          value = v;
        }
      });
    }
    if (longest === 0) {
      const length = validCharLength(s, at);
      return length === 0 ? [REPLACEMENT, 1] : [s.substr(at, length), length];
    }
    const end = this.replacements.indexOf('\0', value);
    return [this.replacements.slice(value, end < 0 ? undefined : end), longest];
  }

  /** The normalized byte string of the byte string `input`. */
  normalize(input: string): string {
    const {removeExtraWhitespaces, addDummyPrefix, escapeWhitespaces} = this.spec;
    let at = 0;
    const end = input.length;
    if (removeExtraWhitespaces) {
      while (at < end) {
        const [piece, length] = this.prefix(input, at);
        if (piece !== ' ') break;
        at += length;
      }
    }
    if (at >= end) return '';
    const space = escapeWhitespaces ? SPACE_SYMBOL : ' ';
    let out = '';
    if (!this.treatWhitespaceAsSuffix && addDummyPrefix) out += space;
    let isPrevSpace = removeExtraWhitespaces;
    while (at < end) {
      const [normalized, length] = this.prefix(input, at);
      let piece = normalized;
      if (isPrevSpace) {
        let skip = 0;
        while (skip < piece.length && piece.charCodeAt(skip) === 0x20) skip++;
        piece = piece.slice(skip);
      }
      if (piece.length > 0) {
        out += escapeWhitespaces ? piece.replace(/ /g, SPACE_SYMBOL) : piece;
        isPrevSpace = piece.charCodeAt(piece.length - 1) === 0x20;
      }
      at += length;
      if (!removeExtraWhitespaces) isPrevSpace = false;
    }
    if (removeExtraWhitespaces) {
      while (out.endsWith(space)) out = out.slice(0, out.length - space.length);
    }
    if (this.treatWhitespaceAsSuffix && addDummyPrefix) out += space;
    return out;
  }
}
