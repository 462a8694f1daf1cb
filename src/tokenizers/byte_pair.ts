/**
 * Byte-level BPE as keras-hub's BytePairTokenizer (GPT2Tokenizer, Llama3Tokenizer): special
 * tokens kept whole, the text split as keras-hub splits it (keras_hub_split.ts) or with the
 * model's regex (`split: 'model'`), each piece's UTF-8 bytes mapped to GPT-2's byte alphabet and
 * merged by rank (bpe_merge.ts), the merged symbols looked up in the vocabulary.
 */
import {byteTables, utf8Bytes, utf8Lossy} from './byte_level';
import {MergeTable} from './bpe_merge';
import {kerasHubSplit} from './keras_hub_split';
import {checkIds, requireToken} from './tokenizer';
import type {Tokenizer} from './tokenizer';
import {BYTE_PAIR_ASSETS, bytePairPresetOptions} from './preset_tokenizer';
import type {TokenizerAsset, TokenizerConfig} from './preset_tokenizer';

/**
 * Unicode White_Space, the `\s` of Oniguruma (Hugging Face's tokenizers): JavaScript's `\s`
 * lacks U+0085 and adds U+FEFF, so the patterns spell the class out.
 */
const WS = '\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

/** The names of the models' split regexes ({@link splitPatternSource}). */
export type SplitPatternName = 'gpt2' | 'llama3';

/**
 * The source of a model's split regex (`u` flag). `gpt2`: GPT-2's (OpenAI's encoder.py; keras-hub
 * emulates it in its tf.data path). `llama3`: Llama 3's (tiktoken's cl100k form), its `(?i:...)`
 * spelled out, as JavaScript before ES2025 lacks it. Built in a function so that bundlers drop it
 * for code that never tokenizes.
 */
export function splitPatternSource(name: SplitPatternName): string {
  const s = `[${WS}]`;
  const notS = `[^${WS}]`;
  const other = `[^${WS}\\p{L}\\p{N}]`;
  if (name === 'gpt2') {
    return `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?${other}+|${s}+(?!${notS})|${s}+`;
  }
  return (
    "'[sS\\u017f]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|" +
    `\\p{N}{1,3}| ?${other}+[\\r\\n]*|${s}*[\\r\\n]+|${s}+(?!${notS})|${s}+`
  );
}

/**
 * How a byte-level BPE tokenizer splits text before merging: `keras-hub` as keras-hub 0.32's
 * tokenizer does in a tf.data pipeline (keras-hub's ids, what a Keras user gets), `model` with the
 * original model's own regex (Hugging Face's ids: GPT-2's or Llama 3's pattern).
 */
export type TokenizerSplit = 'keras-hub' | 'model';

/** Options of {@link BytePairTokenizer}. */
export interface BytePairTokenizerOptions {
  /** Token -> id (the content of keras-hub's `vocabulary.json`). */
  vocabulary: Record<string, number> | ReadonlyMap<string, number>;
  /** Merge rules `"a b"`, highest priority first (the lines of `merges.txt`). */
  merges: readonly string[];
  /**
   * `keras-hub` (default): keras-hub 0.32's split (tf.data), for every family. `model`: split with
   * `splitPattern`, as Hugging Face's tokenizers do. Default `model` when `splitPattern` is given.
   */
  split?: TokenizerSplit;
  /**
   * The regex of the `model` split: `gpt2`, `llama3` (`splitPatternSource`) or a pattern source
   * (`u` flag). Default: the model's (GPT-2's for GPT2Tokenizer and BytePairTokenizer, Llama 3's
   * for Llama3Tokenizer).
   */
  splitPattern?: SplitPatternName | string;
  /** Strings never split nor merged, each one id (keras-hub's `unsplittable_tokens`). */
  unsplittableTokens?: readonly string[];
  /** Prepend a space to the text before splitting (keras-hub's `add_prefix_space`). Default false. */
  addPrefixSpace?: boolean;
}

/**
 * The merged ids of split pieces are remembered (keras-hub keeps a cache of merged words too),
 * up to this many bytes in all, counted as 2 bytes a character and 8 an id, plus 64 an entry;
 * the cache is emptied when a new entry would pass it.
 */
export const PIECE_CACHE_BYTES = 8 * 1024 * 1024;

/** Pieces longer than this many characters are merged each time, never cached. */
export const PIECE_CACHE_MAX_CHARS = 256;

/**
 * Byte-level BPE with keras-hub's assets: `vocabulary.json` and `merges.txt`.
 *
 * @example
 * ```js
 * // keras-hub's BytePairTokenizer docstring
 * const merges = ['b u', 't t', 'e r', 'bu tt', 'butt er', 'f l', 'fl y'];
 * const tokens = [...new Set(merges.flatMap((m) => [...m.split(' '), m.replace(' ', '')]))].sort();
 * const vocabulary = Object.fromEntries(tokens.map((t, i) => [t, i]));
 * new BytePairTokenizer({vocabulary, merges}).encode('butterfly'); // [3, 8]
 * ```
 */
export class BytePairTokenizer implements Tokenizer {
  /** keras-hub's class name, as a preset's tokenizer.json names it. */
  static get className(): string {
    return 'BytePairTokenizer';
  }
  /** The files it reads from a preset (keras-hub's `file_assets`). */
  static get fileAssets(): readonly string[] {
    return BYTE_PAIR_ASSETS;
  }
  /** The tokenizer of a preset's tokenizer.json config and its assets. */
  static fromPreset(
    config: TokenizerConfig,
    asset: TokenizerAsset,
    split: TokenizerSplit,
  ): BytePairTokenizer {
    return new BytePairTokenizer(bytePairPresetOptions(config, asset, split));
  }

  /** The name errors start with (a literal: minified bundles rename classes). */
  protected readonly owner: string;
  readonly vocabularySize: number;
  startTokenId?: number;
  endTokenId?: number;
  padTokenId?: number;
  /**
   * The ids keras-hub's `CausalLM.generate` stops at: its `end_token_id` and, for Llama 3, its
   * `end_token2_id`. keras-hub's BytePairTokenizer has no end token: none.
   */
  stopTokenIds: readonly number[] = [];
  /** keras-hub's `special_token_ids` (stripped from generated text), ascending. None here. */
  specialTokenIds: readonly number[] = [];
  /** keras-hub's `unsplittable_tokens`. */
  readonly unsplittableTokens: readonly string[];
  /** keras-hub's `add_prefix_space`: a space is put before the text. */
  readonly addPrefixSpace: boolean;
  /** How the text is split before merging (see {@link TokenizerSplit}). */
  readonly splitMode: TokenizerSplit;
  /** The source of the `model` split's regex. */
  readonly splitPattern: string;
  private readonly vocabulary: ReadonlyMap<string, number>;
  private readonly tokens: Map<number, string>;
  private readonly mergeTable: MergeTable;
  private readonly mergeRules: readonly string[];
  /** The vocabulary id of each byte's symbol, -1 where the vocabulary lacks it. */
  private readonly byteIds: Int32Array;
  private readonly splitter: RegExp;
  private readonly specialSplitter: RegExp | undefined;
  private readonly unsplittable: ReadonlySet<string>;
  private readonly cache = new Map<string, number[]>();
  private cacheBytes = 0;

  /** The id of a special token this tokenizer needs, or an error naming it. */
  protected special(token: string): number {
    return requireToken(this.vocabulary, token, this.owner);
  }

  constructor(
    options: BytePairTokenizerOptions,
    owner = 'BytePairTokenizer',
    modelPattern: SplitPatternName = 'gpt2',
  ) {
    const name = owner;
    this.owner = owner;
    if (options === null || typeof options !== 'object') {
      throw new Error(
        `${name}: expected options {vocabulary, merges}, received ${String(options)}.`,
      );
    }
    this.vocabulary = toVocabularyMap(options.vocabulary, name);
    this.vocabularySize = this.vocabulary.size;
    this.tokens = new Map();
    for (const [token, id] of this.vocabulary) {
      if (!this.tokens.has(id)) this.tokens.set(id, token);
    }
    const ranks = toRanks(options.merges, this.vocabulary, name);
    this.mergeRules = options.merges;
    this.mergeTable = new MergeTable(ranks, this.vocabulary, this.vocabularySize);
    const {byteToChar} = byteTables();
    this.byteIds = Int32Array.from(byteToChar, (c) => this.vocabulary.get(c) ?? -1);
    const mode = options.split ?? (options.splitPattern !== undefined ? 'model' : 'keras-hub');
    if (mode !== 'keras-hub' && mode !== 'model') {
      throw new Error(
        `${name}: split must be 'keras-hub' or 'model', received ${JSON.stringify(mode)}.`,
      );
    }
    this.splitMode = mode;
    const pattern = options.splitPattern ?? modelPattern;
    this.splitPattern =
      pattern === 'gpt2' || pattern === 'llama3' ? splitPatternSource(pattern) : pattern;
    try {
      this.splitter = new RegExp(this.splitPattern, 'gu');
    } catch (e) {
      throw new Error(
        `${name}: splitPattern must be gpt2, llama3 or a ` +
          `valid regular expression; received ${JSON.stringify(pattern)} (${(e as Error).message}).`,
      );
    }
    this.unsplittableTokens = [...(options.unsplittableTokens ?? [])];
    for (const token of this.unsplittableTokens) requireToken(this.vocabulary, token, name);
    this.specialSplitter = alternation(this.unsplittableTokens);
    this.unsplittable = new Set(this.unsplittableTokens);
    this.addPrefixSpace = options.addPrefixSpace ?? false;
  }

  tokenToId(token: string): number | undefined {
    return this.vocabulary.get(token);
  }

  idToToken(id: number): string | undefined {
    return this.tokens.get(id);
  }

  encode(text: string): number[] {
    if (typeof text !== 'string') {
      throw new Error(`${this.owner}.encode: expected a string, received ${typeof text}.`);
    }
    const input = this.addPrefixSpace ? ' ' + text : text;
    const ids: number[] = [];
    if (this.splitMode === 'keras-hub') {
      for (const piece of kerasHubSplit(input, this.unsplittableTokens)) {
        // keras-hub caches each unsplittable token as itself: one id
        if (this.unsplittable.has(piece)) ids.push(this.vocabulary.get(piece) as number);
        else this.encodePiece(piece, ids);
      }
      return ids;
    }
    const special = this.specialSplitter;
    if (special === undefined) {
      this.encodeOrdinary(input, ids);
      return ids;
    }
    special.lastIndex = 0;
    let position = 0;
    for (const match of input.matchAll(special)) {
      const start = match.index ?? 0;
      if (start > position) this.encodeOrdinary(input.slice(position, start), ids);
      ids.push(this.vocabulary.get(match[0]) as number);
      position = start + match[0].length;
    }
    if (position < input.length) this.encodeOrdinary(input.slice(position), ids);
    return ids;
  }

  decode(ids: number[]): string {
    checkIds(ids, Number.MAX_SAFE_INTEGER + 1, this.owner);
    const {charToByte} = byteTables();
    const bytes: number[] = [];
    for (let i = 0; i < ids.length; i++) {
      const token = this.tokens.get(ids[i]);
      if (token === undefined) {
        throw new Error(
          `${this.owner}.decode: token id ${ids[i]} at position ${i} is not in the vocabulary ` +
            `(${this.vocabularySize} entries).`,
        );
      }
      for (const char of token) {
        // keras-hub's tf.data detokenize drops a character outside the byte alphabet.
        const byte = charToByte.get(char);
        if (byte !== undefined) bytes.push(byte);
      }
    }
    return utf8Lossy(Uint8Array.from(bytes));
  }

  /**
   * The pieces `encode` merges one by one (exposed for tests and docs): keras-hub's split
   * (unsplittable tokens are pieces of their own), or the model's regex over a text without
   * special tokens.
   */
  split(text: string): string[] {
    if (this.splitMode === 'keras-hub') return kerasHubSplit(text, this.unsplittableTokens);
    return this.modelSplit(text);
  }

  /** The pieces of the model's regex: the matches and the text between them. */
  private modelSplit(text: string): string[] {
    const pieces: string[] = [];
    let position = 0;
    this.splitter.lastIndex = 0;
    for (const match of text.matchAll(this.splitter)) {
      const start = match.index ?? 0;
      if (start > position) pieces.push(text.slice(position, start));
      if (match[0].length > 0) pieces.push(match[0]);
      position = start + match[0].length;
    }
    if (position < text.length) pieces.push(text.slice(position));
    return pieces;
  }

  private encodeOrdinary(text: string, out: number[]): void {
    for (const piece of this.modelSplit(text)) this.encodePiece(piece, out);
  }

  /** The merged ids of one piece, from the cache or merged (and cached when short). */
  private encodePiece(piece: string, out: number[]): void {
    let ids = this.cache.get(piece);
    if (ids === undefined) {
      ids = this.mergePiece(piece);
      if (piece.length <= PIECE_CACHE_MAX_CHARS) {
        const bytes = 2 * piece.length + 8 * ids.length + 64;
        if (this.cacheBytes + bytes > PIECE_CACHE_BYTES) {
          this.cache.clear();
          this.cacheBytes = 0;
        }
        this.cache.set(piece, ids);
        this.cacheBytes += bytes;
      }
    }
    for (const id of ids) out.push(id);
  }

  /** BPE of one piece: repeatedly merges the leftmost adjacent pair of lowest rank (O(n log n)). */
  private mergePiece(piece: string): number[] {
    const bytes = utf8Bytes(piece);
    const symbols = new Array<number>(bytes.length);
    for (let i = 0; i < bytes.length; i++) symbols[i] = this.byteIds[bytes[i]];
    const ids = this.mergeTable.merge(symbols);
    for (const id of ids) {
      if (id < 0) {
        const {byteToChar} = byteTables();
        const symbol =
          id === -1
            ? byteToChar[bytes[symbols.indexOf(-1)]]
            : (this.mergeRules[-2 - id] ?? '').replace(' ', '');
        throw new Error(
          `${this.owner}.encode: the symbol ${JSON.stringify(symbol)} of ${JSON.stringify(piece)} ` +
            'is not in the vocabulary (a byte-level vocabulary holds all 256 byte symbols).',
        );
      }
    }
    return ids;
  }
}

function toVocabularyMap(
  vocabulary: Record<string, number> | ReadonlyMap<string, number>,
  owner: string,
): ReadonlyMap<string, number> {
  if (vocabulary === null || typeof vocabulary !== 'object' || Array.isArray(vocabulary)) {
    throw new Error(
      `${owner}: vocabulary must map token strings to ids (the object of vocabulary.json); ` +
        `received ${Array.isArray(vocabulary) ? 'an array' : String(vocabulary)}.`,
    );
  }
  const entries =
    vocabulary instanceof Map
      ? [...(vocabulary as ReadonlyMap<string, number>).entries()]
      : Object.entries(vocabulary);
  if (entries.length === 0) {
    throw new Error(`${owner}: the vocabulary is empty; expected token -> id entries.`);
  }
  // Ids index the embedding table: whole numbers in [0, size), each id one token.
  const size = entries.length;
  const owners = new Map<number, string>();
  const map = new Map<string, number>();
  for (const [token, id] of entries) {
    if (!Number.isInteger(id) || id < 0 || id >= size) {
      throw new Error(
        `${owner}: vocabulary ids must be whole numbers in [0, ${size - 1}] (the vocabulary has ` +
          `${size} entries); ${JSON.stringify(token)} has ${JSON.stringify(id)}.`,
      );
    }
    const other = owners.get(id);
    if (other !== undefined) {
      throw new Error(
        `${owner}: vocabulary id ${id} is given to two tokens, ${JSON.stringify(other)} and ` +
          `${JSON.stringify(token)}; expected each id once.`,
      );
    }
    owners.set(id, token);
    map.set(token, id);
  }
  return map;
}

function toRanks(
  merges: readonly string[],
  vocabulary: ReadonlyMap<string, number>,
  owner: string,
): Map<string, number> {
  if (!Array.isArray(merges)) {
    throw new Error(`${owner}: merges must be an array of "a b" rules; received ${typeof merges}.`);
  }
  const ranks = new Map<string, number>();
  merges.forEach((merge, i) => {
    if (typeof merge !== 'string' || merge.trimStart().startsWith('#version:')) return;
    const parts = merge.split(' ');
    if (parts.length !== 2 || parts[0] === '' || parts[1] === '') {
      throw new Error(
        `${owner}: merge rule ${i + 1} must be two tokens separated by one space; ` +
          `received ${JSON.stringify(merge)}.`,
      );
    }
    if (!vocabulary.has(parts[0]) || !vocabulary.has(parts[1])) {
      throw new Error(
        `${owner}: merge rule '${merge}' contains token '${parts[0]}' or '${parts[1]}' that is ` +
          'not in the vocabulary.',
      );
    }
    if (!ranks.has(merge)) ranks.set(merge, i);
  });
  return ranks;
}

/** One regex matching any of the strings, longest first (so a token's prefix never wins). */
function alternation(strings: readonly string[]): RegExp | undefined {
  if (strings.length === 0) return undefined;
  const sorted = [...strings].sort((a, b) => b.length - a.length);
  return new RegExp(sorted.map((s) => s.replace(/[.*+?^${}()|[\]\\/-]/g, '\\$&')).join('|'), 'gu');
}
