/**
 * WordPiece as keras-hub's WordPieceTokenizer / BertTokenizer in a tf.data pipeline: CJK
 * characters spaced out, accents stripped (NFD, marks removed), the text split on ASCII
 * whitespace, control and format characters and punctuation (punctuation kept), words case-folded
 * (tf_text.case_fold_utf8: NFKC_Casefold), then greedy longest-match-first subwords with the
 * suffix indicator; a word that cannot be covered, or is over 100 UTF-8 bytes, is the oov token.
 */
import {utf8Bytes} from './byte_level';
import {checkIds, requireToken} from './tokenizer';
import type {Tokenizer} from './tokenizer';
import type {TokenizerSplit} from './byte_pair';
import {WORD_PIECE_ASSETS, wordPiecePresetOptions} from './preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from './preset_tokenizer';

/** tf_text's FastWordpieceTokenizer default (keras-hub's MAX_BYTES_PER_WORD). */
export const MAX_BYTES_PER_WORD = 100;

const CJK =
  '[\\u4E00-\\u9FFF]|[\\u3400-\\u4DBF]|[\\u{20000}-\\u{2A6DF}]|[\\u{2A700}-\\u{2B73F}]|' +
  '[\\u{2B740}-\\u{2B81F}]|[\\u{2B820}-\\u{2CEAF}]|[\\uF900-\\uFAFF]|[\\u{2F800}-\\u{2FA1F}]';
/** keras-hub's PUNCTUATION_REGEX. */
const PUNCTUATION = '[!-/]|[:-@]|[\\[-`]|[{-~]|[\\p{P}]';
/** keras-hub's WHITESPACE_REGEX as RE2 reads it: RE2's `\s` is ASCII `[\t\n\f\r ]`. */
const WHITESPACE = '[\\t\\n\\f\\r ]|\\p{Cc}|\\p{Cf}';

/** Options of {@link WordPieceTokenizer}: keras-hub's arguments. */
export interface WordPieceTokenizerOptions {
  /** The tokens, id = position (the lines of `vocabulary.txt`). */
  vocabulary: readonly string[];
  /** Case-fold words (tf_text.case_fold_utf8, which applies NFKC too). Default false. */
  lowercase?: boolean;
  /** Remove accents (NFD, then drop nonspacing marks). Default false. */
  stripAccents?: boolean;
  /** Split on whitespace and punctuation; false takes the text as one word. Default true. */
  split?: boolean;
  /** Split around CJK ideographs. Default true. */
  splitOnCjk?: boolean;
  /** Default `##`. */
  suffixIndicator?: string;
  /** Default `[UNK]`. */
  oovToken?: string;
  /** Extra special tokens (keras-hub's `special_tokens`). */
  specialTokens?: readonly string[];
  /** Keep special tokens found in the text whole (keras-hub's `special_tokens_in_strings`). */
  specialTokensInStrings?: boolean;
}

/**
 * keras-hub's WordPieceTokenizer with its asset `vocabulary.txt`.
 *
 * @example
 * ```js
 * const vocabulary = ['[UNK]', 'the', 'qu', '##ick', 'br', '##own', 'fox', '.'];
 * const tokenizer = new WordPieceTokenizer({vocabulary, lowercase: true});
 * tokenizer.encode('The quick brown fox.'); // [1, 2, 3, 4, 5, 6, 7]
 * ```
 */
export class WordPieceTokenizer implements Tokenizer {
  /** keras-hub's class name, as a preset's tokenizer.json names it. */
  static get className(): string {
    return 'WordPieceTokenizer';
  }
  /** The files it reads from a preset (keras-hub's `file_assets`). */
  static get fileAssets(): readonly string[] {
    return WORD_PIECE_ASSETS;
  }
  /** The tokenizer of a preset's tokenizer.json config and its assets. */
  static fromPreset(
    config: TokenizerConfig,
    asset: TokenizerAsset,
    _split: TokenizerSplit,
  ): WordPieceTokenizer {
    return new WordPieceTokenizer(wordPiecePresetOptions(config, asset));
  }

  protected readonly owner: string;
  readonly vocabularySize: number;
  startTokenId?: number;
  endTokenId?: number;
  padTokenId?: number;
  /** keras-hub's WordPieceTokenizer has no end token: none (BertTokenizer: `[SEP]`). */
  stopTokenIds: readonly number[] = [];
  /** keras-hub's `special_token_ids`: none (BertTokenizer: `[CLS]`, `[SEP]`, `[PAD]`, `[MASK]`). */
  specialTokenIds: readonly number[] = [];
  /** keras-hub's `lowercase`. */
  readonly lowercase: boolean;
  /** keras-hub's `strip_accents`. */
  readonly stripAccents: boolean;
  /** keras-hub's `split`. */
  readonly splitWords: boolean;
  /** keras-hub's `split_on_cjk`. */
  readonly splitOnCjk: boolean;
  /** keras-hub's `suffix_indicator`. */
  readonly suffixIndicator: string;
  /** keras-hub's `oov_token`. */
  readonly oovToken: string;
  /** The special tokens of the class and of the options (kept whole when in strings). */
  readonly specialTokens: readonly string[];
  /** keras-hub's `special_tokens_in_strings`. */
  readonly specialTokensInStrings: boolean;
  private readonly vocabulary: readonly string[];
  private readonly ids: Map<string, number>;
  private readonly cjk: RegExp;
  private readonly splitter: RegExp;
  private readonly keep: RegExp;
  private readonly specialSet: Set<string>;

  constructor(
    options: WordPieceTokenizerOptions,
    owner = 'WordPieceTokenizer',
    classSpecialTokens: readonly string[] = [],
  ) {
    this.owner = owner;
    if (options === null || typeof options !== 'object' || !Array.isArray(options.vocabulary)) {
      throw new Error(
        `${owner}: expected options {vocabulary: string[]} (the lines of vocabulary.txt), ` +
          `received ${options === null || typeof options !== 'object' ? String(options) : typeof options.vocabulary}.`,
      );
    }
    this.vocabulary = [...options.vocabulary];
    this.ids = new Map();
    this.vocabulary.forEach((token, id) => {
      if (typeof token !== 'string') {
        throw new Error(
          `${owner}: vocabulary entry ${id} must be a string, received ${typeof token}.`,
        );
      }
      if (!this.ids.has(token)) this.ids.set(token, id);
    });
    this.vocabularySize = this.vocabulary.length;
    this.lowercase = options.lowercase ?? false;
    this.stripAccents = options.stripAccents ?? false;
    this.splitWords = options.split ?? true;
    this.splitOnCjk = options.splitOnCjk ?? true;
    this.suffixIndicator = options.suffixIndicator ?? '##';
    this.oovToken = options.oovToken ?? '[UNK]';
    if (!this.ids.has(this.oovToken)) {
      throw new Error(
        `${owner}: cannot find oovToken ${JSON.stringify(this.oovToken)} in the vocabulary ` +
          `(${this.vocabularySize} entries); add it or pass another oovToken.`,
      );
    }
    this.specialTokens = [...new Set([...classSpecialTokens, ...(options.specialTokens ?? [])])];
    for (const token of this.specialTokens) requireToken(this.ids, token, owner);
    this.specialTokensInStrings = options.specialTokensInStrings ?? false;
    const splitting = this.splitWords && this.specialTokensInStrings ? this.specialTokens : [];
    this.specialSet = new Set(splitting);
    const special = splitting.map(escapeRegExp).join('|');
    const prefix = special === '' ? '' : special + '|';
    const kept = this.splitOnCjk ? `${PUNCTUATION}|${CJK}` : PUNCTUATION;
    this.cjk = new RegExp(CJK, 'gu');
    this.splitter = new RegExp(`${prefix}${WHITESPACE}|${kept}`, 'gu');
    this.keep = new RegExp(`^(?:${prefix}${kept})$`, 'u');
  }

  tokenToId(token: string): number | undefined {
    return this.ids.get(token);
  }

  idToToken(id: number): string | undefined {
    return Number.isInteger(id) && id >= 0 && id < this.vocabularySize
      ? this.vocabulary[id]
      : undefined;
  }

  encode(text: string): number[] {
    if (typeof text !== 'string') {
      throw new Error(`${this.owner}.encode: expected a string, received ${typeof text}.`);
    }
    const ids: number[] = [];
    for (const word of this.pretokenize(text)) this.wordPiece(word, ids);
    return ids;
  }

  /** keras-hub's detokenize: words joined by spaces, suffix pieces glued to the word before. */
  decode(ids: number[]): string {
    checkIds(ids, this.vocabularySize, this.owner);
    const words: string[] = [];
    const n = this.suffixIndicator.length;
    ids.forEach((id, i) => {
      const token = this.vocabulary[id];
      if (i > 0 && token.length > n && token.startsWith(this.suffixIndicator)) {
        words[words.length - 1] += token.slice(n);
      } else {
        words.push(token);
      }
    });
    return words.join(' ');
  }

  /** The words WordPiece runs on (keras-hub's `pretokenize`). */
  pretokenize(text: string): string[] {
    let t = text;
    if (this.splitWords && this.splitOnCjk) t = t.replace(this.cjk, ' $& ');
    if (this.stripAccents) t = t.normalize('NFD').replace(/\p{Mn}/gu, '');
    let words: string[];
    if (this.splitWords) {
      words = [];
      let position = 0;
      for (const match of t.matchAll(this.splitter)) {
        const start = match.index ?? 0;
        if (start > position) words.push(t.slice(position, start));
        if (match[0] !== '' && this.keep.test(match[0])) words.push(match[0]);
        position = start + match[0].length;
      }
      if (position < t.length) words.push(t.slice(position));
    } else {
      words = t === '' ? [] : [t];
    }
    if (this.lowercase) words = words.map((w) => (this.specialSet.has(w) ? w : caseFold(w)));
    return words;
  }

  private wordPiece(word: string, out: number[]): void {
    if (word === '') return;
    const special = this.specialSet.has(word) ? this.ids.get(word) : undefined;
    if (special !== undefined) {
      out.push(special);
      return;
    }
    const oov = this.ids.get(this.oovToken) as number;
    if (utf8Bytes(word).length > MAX_BYTES_PER_WORD) {
      out.push(oov);
      return;
    }
    const chars = Array.from(word);
    const pieces: number[] = [];
    let start = 0;
    while (start < chars.length) {
      let end = chars.length;
      let found: number | undefined;
      while (start < end) {
        const sub = chars.slice(start, end).join('');
        found = this.ids.get(start > 0 ? this.suffixIndicator + sub : sub);
        if (found !== undefined) break;
        end--;
      }
      if (found === undefined) {
        out.push(oov);
        return;
      }
      pieces.push(found);
      start = end;
    }
    for (const id of pieces) out.push(id);
  }
}

/**
 * ICU's NFKC_Casefold as tf_text.case_fold_utf8 applies it: NFKD, full case folding (upper then
 * lower case per character, which folds ß to ss and ς to σ; dotless ı kept), NFKC, default
 * ignorable characters removed.
 */
export function caseFold(word: string): string {
  let folded = '';
  for (const ch of word.normalize('NFKD')) {
    folded += ch === '\u0131' ? ch : ch.toLowerCase().toUpperCase().toLowerCase();
  }
  return folded.normalize('NFKC').replace(/\p{Default_Ignorable_Code_Point}/gu, '');
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&');
}
