/**
 * `loadTokenizer(source)`: a keras-hub preset folder (a path in Node, a URL anywhere) read as
 * keras-hub's `Tokenizer.from_preset` reads it: `tokenizer.json` (class name and config), then
 * only the assets that class declares (its `fileAssets`, keras-hub's `file_assets`) under
 * `assets/<config_file stem>/`. The files are read through the preset's source
 * (keras_hub_sources.ts), as `loadKerasHubPreset` reads its weights, configs and tokenizer: the
 * same name rules and size checks (a file's size, a declared Content-Length, the bytes as they
 * stream in), errors worded here in `loadTokenizer`'s name.
 */
import {kerasHubFamilies} from '../hub_models/registry';
import {isObject} from '../layers/engine/json_object';
import {CONFIG_JSON_LIMITS, parseBoundedJson} from '../io/bounded_json';
import {BytePairTokenizer} from '../tokenizers/byte_pair';
import type {TokenizerSplit} from '../tokenizers/byte_pair';
import type {PresetTokenizerClass, TokenizerAsset} from '../tokenizers/preset_tokenizer';
import type {Tokenizer} from '../tokenizers/tokenizer';
import {WordPieceTokenizer} from '../tokenizers/word_piece';
import {SentencePieceTokenizer} from '../tokenizers/sentence_piece';
import {
  folderFiles,
  nodeFs,
  PresetFileError,
  presetFileWords,
  presetLocation,
  urlFiles,
} from './keras_hub_sources';
import type {PresetFileProblem, PresetFiles} from './keras_hub_sources';

/** Options of {@link loadTokenizer}. */
export interface LoadTokenizerOptions {
  /** The most bytes one file may have (tokenizer.json or an asset). Default 64 MiB. */
  maxFileBytes?: number;
  /** The fetch used for URLs. Default the global `fetch`. */
  fetch?: (url: string) => Promise<Response>;
  /**
   * How byte-level BPE splits text before merging: `keras-hub` (default), keras-hub 0.32's ids
   * as its tokenizer gives them in a tf.data pipeline; `model`, the original model's own regex
   * (Hugging Face's ids). WordPiece has one split and ignores it.
   */
  split?: TokenizerSplit;
}

/** The default of {@link LoadTokenizerOptions.maxFileBytes}: 64 MiB (Llama 3's vocabulary.json is ~9 MB). */
export const DEFAULT_MAX_TOKENIZER_FILE_BYTES = 67108864;

/** The generic keras-hub tokenizer classes (the families' own come with their families). */
const GENERIC_TOKENIZERS: readonly PresetTokenizerClass[] = [
  BytePairTokenizer,
  WordPieceTokenizer,
  SentencePieceTokenizer,
];

/**
 * The keras-hub tokenizer classes a preset may name: each registered family's, then the generic
 * ones, with the assets each one reads (its `fileAssets`).
 */
export function presetTokenizerClasses(): PresetTokenizerClass[] {
  return [...kerasHubFamilies().map((f) => f.tokenizer), ...GENERIC_TOKENIZERS];
}

/** The tokenizer class named `className`, or undefined. */
export function presetTokenizerClass(className: string): PresetTokenizerClass | undefined {
  return presetTokenizerClasses().find((c) => c.className === className);
}

/** The text of a preset's file by its path in the preset (`assets/tokenizer/merges.txt`). */
export type ReadText = (path: string) => Promise<string>;

/** The bytes of a preset's file by its path in the preset (`assets/tokenizer/vocabulary.spm`). */
export type ReadBytes = (path: string) => Promise<Uint8Array>;

/** A tokenizer's assets by file name: text, or bytes for the assets its class reads as bytes. */
export type TokenizerAssets = Readonly<Record<string, string | Uint8Array>>;

/**
 * Loads the tokenizer of a keras-hub preset: `source` is the preset folder (a path in Node, or
 * an `http(s)://` URL read with fetch). Reads `tokenizer.json` and the assets its class names.
 *
 * ```js
 * const tokenizer = await loadTokenizer('fixtures/tokenizers/gpt2');
 * tokenizer.encode('Hello world');
 * ```
 */
export async function loadTokenizer(
  source: string | URL,
  options: LoadTokenizerOptions = {},
): Promise<Tokenizer> {
  if (options === null || typeof options !== 'object') {
    throw new Error(
      'loadTokenizer: expected options to be an object such as {maxFileBytes, fetch}, received ' +
        `${options === null ? 'null' : typeof options}.`,
    );
  }
  if (!(typeof source === 'string' || source instanceof URL) || source === '') {
    throw new Error(
      'loadTokenizer: source must be a folder path or an http(s) URL, received ' +
        `${source === undefined ? 'undefined' : JSON.stringify(source)}.`,
    );
  }
  const limit = options.maxFileBytes ?? DEFAULT_MAX_TOKENIZER_FILE_BYTES;
  if (!(Number.isInteger(limit) && limit > 0)) {
    throw new Error(
      `loadTokenizer: maxFileBytes must be a whole number > 0, received ${String(limit)}.`,
    );
  }
  const where = String(source);
  const location = presetLocation(where);
  if (location == null) {
    throw new Error(
      `loadTokenizer: source must be a folder path or an http(s) URL, received ${JSON.stringify(where)}.`,
    );
  }
  let files: PresetFiles;
  if ('url' in location) {
    const fetcher = options.fetch ?? (typeof fetch === 'function' ? fetch : undefined);
    if (fetcher === undefined) {
      throw new Error(
        `loadTokenizer: ${where} is a URL but there is no fetch; pass options.fetch.`,
      );
    }
    files = urlFiles(location.url, fetcher);
  } else {
    files = folderFiles(await inOwnWords(() => nodeFs(location.path)), location.path);
  }
  const split = checkSplit(options.split, 'loadTokenizer');
  const readBytes: ReadBytes = (path) => inOwnWords(() => files.read(path, limit));
  const read: ReadText = async (path) => utf8Strict(await readBytes(path), path);
  const config = parseBoundedJson(
    await read('tokenizer.json'),
    'tokenizer.json',
    CONFIG_JSON_LIMITS,
    'loadTokenizer',
  );
  const {tokenizerClass, config: tokenizerConfig} = classAndConfig(config);
  const folder = tokenizerAssetFolder(tokenizerConfig);
  if (folder == null) {
    throw new Error(
      `loadTokenizer: tokenizer.json's config.config_file must be a plain file name such as ` +
        `"tokenizer.json", received ${JSON.stringify(tokenizerConfig.config_file)}.`,
    );
  }
  const assets = await readDeclaredAssets(tokenizerClass, folder, read, readBytes);
  return fromChecked(tokenizerClass, tokenizerConfig, assets, split);
}

/**
 * Builds a tokenizer from a parsed `tokenizer.json` and its assets (file name -> content: the
 * text of a text asset, the bytes of a binary one such as SentencePiece's `vocabulary.spm`),
 * without reading files: for the browser, bundles and tests.
 */
export function tokenizerFromPreset(
  tokenizerJson: unknown,
  assets: TokenizerAssets,
  options: Pick<LoadTokenizerOptions, 'split'> = {},
): Tokenizer {
  const split = checkSplit(options?.split, 'tokenizerFromPreset');
  const {tokenizerClass, config} = classAndConfig(tokenizerJson);
  return fromChecked(tokenizerClass, config, assets, split);
}

/** The tokenizer of a checked class and config, from its assets by name. */
function fromChecked(
  tokenizerClass: PresetTokenizerClass,
  config: Record<string, unknown>,
  assets: TokenizerAssets,
  split: TokenizerSplit,
): Tokenizer {
  const {className} = tokenizerClass;
  const missing = (name: string): Error =>
    new Error(
      `loadTokenizer: ${className} needs the asset ${name}; it is missing ` +
        `(received assets: ${Object.keys(assets).join(', ') || 'none'}).`,
    );
  const has = (name: string): boolean => Object.prototype.hasOwnProperty.call(assets, name);
  const asset: TokenizerAsset = (name: string): string => {
    const value = has(name) ? assets[name] : undefined;
    if (ArrayBuffer.isView(value)) {
      const text = utf8Text(value);
      if (text == null) throw new Error(`loadTokenizer: ${name} is not valid UTF-8.`);
      return text;
    }
    if (typeof value !== 'string') throw missing(name);
    return value;
  };
  asset.bytes = (name: string): Uint8Array => {
    const value = has(name) ? assets[name] : undefined;
    if (!ArrayBuffer.isView(value)) {
      if (typeof value === 'string') {
        throw new Error(
          `loadTokenizer: ${className} reads ${name} as bytes; expected a Uint8Array, ` +
            'received a string.',
        );
      }
      throw missing(name);
    }
    return value;
  };
  return tokenizerClass.fromPreset(config, asset, split);
}

function classAndConfig(json: unknown): {
  tokenizerClass: PresetTokenizerClass;
  config: Record<string, unknown>;
} {
  if (!isObject(json)) {
    throw new Error(
      'loadTokenizer: tokenizer.json must hold an object {class_name, config}, received ' +
        `${Array.isArray(json) ? 'an array' : typeof json}.`,
    );
  }
  const {class_name: className, config} = json as {class_name?: unknown; config?: unknown};
  const tokenizerClass =
    typeof className === 'string' ? presetTokenizerClass(className) : undefined;
  if (tokenizerClass === undefined) {
    const known = presetTokenizerClasses().map((c) => c.className);
    throw new Error(
      `loadTokenizer: tokenizer.json's class_name must be one of ${known.join(', ')}; ` +
        `received ${JSON.stringify(className)}.`,
    );
  }
  if (!isObject(config)) {
    throw new Error(
      `loadTokenizer: tokenizer.json's config must be an object, received ${typeof config}.`,
    );
  }
  return {tokenizerClass, config: config as Record<string, unknown>};
}

/**
 * The folder of a tokenizer's assets in a preset, `assets/<config_file stem>` (keras-hub's
 * `config_file`, default `tokenizer.json`), or null when config_file is not a plain file name.
 */
export function tokenizerAssetFolder(config: Readonly<Record<string, unknown>>): string | null {
  const configFile = config.config_file ?? 'tokenizer.json';
  const stem = typeof configFile === 'string' ? configFile.split('.')[0] : '';
  return /^[A-Za-z0-9_-]+$/.test(stem) ? `assets/${stem}` : null;
}

/**
 * The assets a tokenizer class declares (its `fileAssets`), and only those, read from `folder`
 * of a preset, each once: file name -> text (`read`), or bytes (`readBytes`) for the assets the
 * class reads as bytes (its `binaryAssets`).
 */
export async function readDeclaredAssets(
  tokenizerClass: PresetTokenizerClass,
  folder: string,
  read: ReadText,
  readBytes: ReadBytes,
): Promise<Record<string, string | Uint8Array>> {
  const assets: Record<string, string | Uint8Array> = {};
  const binary = new Set(tokenizerClass.binaryAssets ?? []);
  for (const name of tokenizerClass.fileAssets) {
    if (!Object.prototype.hasOwnProperty.call(assets, name)) {
      const path = `${folder}/${name}`;
      assets[name] = binary.has(name) ? await readBytes(path) : await read(path);
    }
  }
  return assets;
}

function checkSplit(split: unknown, owner: string): TokenizerSplit {
  if (split === undefined) return 'keras-hub';
  if (split !== 'keras-hub' && split !== 'model') {
    throw new Error(
      `${owner}: options.split must be 'keras-hub' or 'model', received ${JSON.stringify(split)}.`,
    );
  }
  return split;
}

/** The text of UTF-8 bytes, or null when they are not valid UTF-8. */
export function utf8Text(bytes: Uint8Array): string | null {
  try {
    return new TextDecoder('utf-8', {fatal: true}).decode(bytes);
  } catch {
    return null;
  }
}

function utf8Strict(bytes: Uint8Array, name: string): string {
  const text = utf8Text(bytes);
  if (text == null) throw new Error(`loadTokenizer: ${name} is not valid UTF-8.`);
  return text;
}

/** A preset file's problem in `loadTokenizer`'s words (its messages before it read through the preset's sources). */
function tokenizerWords(p: PresetFileProblem): string {
  switch (p.kind) {
    case 'too-large':
      return (
        `${p.name} has ${p.bytes} bytes, over the limit of ${p.limit} bytes ` +
        '(options.maxFileBytes); refused before reading it.'
      );
    case 'outside':
      return `refusing ${p.name}: it leads to ${p.real}, outside the folder ${p.folder}.`;
    case 'not-a-file':
      return `${p.name} is not a file (at ${p.path}).`;
    case 'status':
      return `fetching ${p.name} failed (${p.url} answered ${p.status}).`;
    case 'no-fs':
      return (
        `reading the folder ${JSON.stringify(p.what)} needs Node's fs; in the browser pass an ` +
        'http(s) URL or use tokenizerFromPreset.'
      );
    case 'missing':
    case 'refused-name':
    case 'cannot-fetch':
    case 'not-a-response':
      return `${presetFileWords(p)}.`;
  }
}

/** Runs a read of the preset's source, its problems worded in `loadTokenizer`'s name. */
async function inOwnWords<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    if (e instanceof PresetFileError)
      throw new Error(`loadTokenizer: ${tokenizerWords(e.problem)}`);
    throw e;
  }
}
