/**
 * What a keras-hub tokenizer class declares to be read from a preset (as keras-hub's tokenizers
 * declare `file_assets`): its class name, the asset files it reads, and how it is made from
 * `tokenizer.json`'s config and those files' text. The options the two generic tokenizers read
 * from a config (byte-level BPE, WordPiece) are here, for their subclasses in the families too.
 */
import {parseBoundedJson} from '../io/bounded_json';
import type {JsonLimits} from '../io/bounded_json';
import type {BytePairTokenizerOptions, TokenizerSplit} from './byte_pair';
import type {SentencePieceTokenizerOptions} from './sentence_piece';
import type {Tokenizer} from './tokenizer';
import type {WordPieceTokenizerOptions} from './word_piece';

/** The `config` of a preset's `tokenizer.json`. */
export type TokenizerConfig = Readonly<Record<string, unknown>>;

/**
 * The text of one of a tokenizer's assets by file name (an error when it is missing); its
 * `bytes(name)`, the bytes of an asset the class declares binary (`binaryAssets`, e.g.
 * SentencePiece's `vocabulary.spm`).
 */
export interface TokenizerAsset {
  (name: string): string;
  /** The bytes of a binary asset by file name (an error when it is missing). */
  bytes?: (name: string) => Uint8Array;
}

/** A keras-hub tokenizer class as a preset names it (`tokenizer.json`'s `class_name`). */
export interface PresetTokenizerClass {
  /** keras-hub's class name (`GPT2Tokenizer`). */
  readonly className: string;
  /** The files it reads from the preset's `assets/<config_file stem>/` (keras-hub's `file_assets`). */
  readonly fileAssets: readonly string[];
  /** The assets of `fileAssets` read as bytes, not text (`asset.bytes(name)`). Default none. */
  readonly binaryAssets?: readonly string[];
  /** The tokenizer of a config and its assets. */
  fromPreset(config: TokenizerConfig, asset: TokenizerAsset, split: TokenizerSplit): Tokenizer;
}

/**
 * The limits of a `vocabulary.json`: a flat object of token -> id (1 level; 2 allowed). Llama 3's
 * has about 9 MB; 64 Mi characters hold a 262,144-token vocabulary (Gemma's size) with every
 * token spelled in `\u` escapes.
 */
const VOCABULARY_JSON_LIMITS: JsonLimits = {maxChars: 64 * 2 ** 20, maxDepth: 2};

/** Python's `str.isspace` characters at the end of a line (`rstrip()` removes them). */
const PYTHON_TRAILING_SPACE =
  // eslint-disable-next-line no-control-regex -- str.isspace() holds U+001C..U+001F
  /[\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+$/u;

/** The lines of a text file as Python's `[line.rstrip() for line in file]` gives them. */
function pythonLines(text: string): string[] {
  const lines = text.split(/\r\n|\r|\n/);
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  return lines.map((line) => line.replace(PYTHON_TRAILING_SPACE, ''));
}

/** A config's lists of strings, flags and strings, checked (errors name the key). */
function configReader(config: TokenizerConfig) {
  const strings = (key: string): string[] | undefined => {
    const value = config[key];
    if (value === undefined || value === null) return undefined;
    if (!Array.isArray(value) || value.some((v) => typeof v !== 'string')) {
      throw new Error(
        `loadTokenizer: tokenizer.json's config.${key} must be a list of strings, received ` +
          `${JSON.stringify(value)}.`,
      );
    }
    return value as string[];
  };
  const flag = (key: string, fallback: boolean): boolean => {
    const value = config[key];
    if (value === undefined || value === null) return fallback;
    if (typeof value !== 'boolean') {
      throw new Error(
        `loadTokenizer: tokenizer.json's config.${key} must be true or false, received ` +
          `${JSON.stringify(value)}.`,
      );
    }
    return value;
  };
  const text = (key: string, fallback: string): string => {
    const value = config[key];
    if (value === undefined || value === null) return fallback;
    if (typeof value !== 'string') {
      throw new Error(
        `loadTokenizer: tokenizer.json's config.${key} must be a string, received ${JSON.stringify(value)}.`,
      );
    }
    return value;
  };
  return {strings, flag, text};
}

/** keras-hub's BytePairTokenizer arguments from a config, `vocabulary.json` and `merges.txt`. */
export function bytePairPresetOptions(
  config: TokenizerConfig,
  asset: TokenizerAsset,
  split: TokenizerSplit,
): BytePairTokenizerOptions {
  const {strings, flag} = configReader(config);
  const vocabulary = parseBoundedJson(
    asset('vocabulary.json'),
    'vocabulary.json',
    VOCABULARY_JSON_LIMITS,
    'loadTokenizer',
  );
  if (vocabulary === null || typeof vocabulary !== 'object' || Array.isArray(vocabulary)) {
    throw new Error(
      'loadTokenizer: vocabulary.json must hold an object of token -> id, received ' +
        `${Array.isArray(vocabulary) ? 'an array' : typeof vocabulary}.`,
    );
  }
  return {
    vocabulary: vocabulary as Record<string, number>,
    merges: pythonLines(asset('merges.txt')),
    unsplittableTokens: strings('unsplittable_tokens'),
    addPrefixSpace: flag('add_prefix_space', false),
    split,
  };
}

/** keras-hub's WordPieceTokenizer arguments from a config and `vocabulary.txt`. */
export function wordPiecePresetOptions(
  config: TokenizerConfig,
  asset: TokenizerAsset,
): WordPieceTokenizerOptions {
  const {strings, flag, text} = configReader(config);
  return {
    vocabulary: pythonLines(asset('vocabulary.txt')),
    lowercase: flag('lowercase', false),
    stripAccents: flag('strip_accents', false),
    split: flag('split', true),
    splitOnCjk: flag('split_on_cjk', true),
    suffixIndicator: text('suffix_indicator', '##'),
    oovToken: text('oov_token', '[UNK]'),
    specialTokens: strings('special_tokens'),
    specialTokensInStrings: flag('special_tokens_in_strings', false),
  };
}

/** The byte-level BPE assets (keras-hub's BytePairTokenizer `file_assets`). */
export const BYTE_PAIR_ASSETS = ['vocabulary.json', 'merges.txt'] as const;

/** The WordPiece asset (keras-hub's WordPieceTokenizer `file_assets`). */
export const WORD_PIECE_ASSETS = ['vocabulary.txt'] as const;

/** keras-hub's SentencePieceTokenizer arguments from a config (`add_bos`, `add_eos`) and `vocabulary.spm`. */
export function sentencePiecePresetOptions(
  config: TokenizerConfig,
  asset: TokenizerAsset,
): SentencePieceTokenizerOptions {
  const {flag} = configReader(config);
  if (asset.bytes === undefined) {
    throw new Error(
      'loadTokenizer: vocabulary.spm is a binary asset; expected the assets to give its bytes ' +
        '(asset.bytes), received text only.',
    );
  }
  return {
    proto: asset.bytes('vocabulary.spm'),
    addBos: flag('add_bos', false),
    addEos: flag('add_eos', false),
  };
}

/** The SentencePiece asset (keras-hub's SentencePieceTokenizer `file_assets`), read as bytes. */
export const SENTENCE_PIECE_ASSETS = ['vocabulary.spm'] as const;
