/**
 * `loadTokenizer(source)`: a keras-hub preset folder (a path in Node, a URL anywhere) read as
 * keras-hub's `Tokenizer.from_preset` reads it: `tokenizer.json` (class name and config), then
 * only the assets that class names under `assets/<config_file stem>/`. Sizes are checked before
 * a file is read (a declared Content-Length, or the bytes as they stream in).
 */
import {kerasHubFamilies} from '../hub_models/registry';
import {CONFIG_JSON_LIMITS, parseBoundedJson} from '../io/bounded_json';
import {BytePairTokenizer} from '../tokenizers/byte_pair';
import type {TokenizerSplit} from '../tokenizers/byte_pair';
import type {PresetTokenizerClass} from '../tokenizers/preset_tokenizer';
import type {Tokenizer} from '../tokenizers/tokenizer';
import {WordPieceTokenizer} from '../tokenizers/word_piece';

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
const GENERIC_TOKENIZERS: readonly PresetTokenizerClass[] = [BytePairTokenizer, WordPieceTokenizer];

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

type ReadText = (name: string) => Promise<string>;

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
  let read: ReadText;
  if (/^https?:\/\//i.test(where)) {
    const fetcher = options.fetch ?? (typeof fetch === 'function' ? fetch : undefined);
    if (fetcher === undefined) {
      throw new Error(
        `loadTokenizer: ${where} is a URL but there is no fetch; pass options.fetch.`,
      );
    }
    read = urlReader(where, fetcher, limit);
  } else if (
    /^[a-z][a-z0-9+.-]*:/i.test(where) &&
    !/^file:/i.test(where) &&
    !/^[a-z]:[\\/]/i.test(where)
  ) {
    throw new Error(
      `loadTokenizer: source must be a folder path or an http(s) URL, received ${JSON.stringify(where)}.`,
    );
  } else {
    const path = /^file:/i.test(where) ? decodeURIComponent(new URL(where).pathname) : where;
    read = await fileReader(path, limit);
  }
  const split = checkSplit(options.split, 'loadTokenizer');
  const configText = await read('tokenizer.json');
  const config = parseBoundedJson(
    configText,
    'tokenizer.json',
    CONFIG_JSON_LIMITS,
    'loadTokenizer',
  );
  return tokenizerFromPreset(config, await readAssets(config, read), {split});
}

/**
 * Builds a tokenizer from a parsed `tokenizer.json` and the text of its assets (file name ->
 * content), without reading files: for the browser, bundles and tests.
 */
export function tokenizerFromPreset(
  tokenizerJson: unknown,
  assets: Readonly<Record<string, string>>,
  options: Pick<LoadTokenizerOptions, 'split'> = {},
): Tokenizer {
  const split = checkSplit(options?.split, 'tokenizerFromPreset');
  const {className, config} = classAndConfig(tokenizerJson);
  const asset = (name: string): string => {
    const text = assets[name];
    if (typeof text !== 'string') {
      throw new Error(
        `loadTokenizer: ${className} needs the asset ${name}; it is missing ` +
          `(received assets: ${Object.keys(assets).join(', ') || 'none'}).`,
      );
    }
    return text;
  };
  return (presetTokenizerClass(className) as PresetTokenizerClass).fromPreset(config, asset, split);
}

function classAndConfig(json: unknown): {className: string; config: Record<string, unknown>} {
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    throw new Error(
      'loadTokenizer: tokenizer.json must hold an object {class_name, config}, received ' +
        `${Array.isArray(json) ? 'an array' : typeof json}.`,
    );
  }
  const {class_name: className, config} = json as {class_name?: unknown; config?: unknown};
  if (typeof className !== 'string' || presetTokenizerClass(className) === undefined) {
    const known = presetTokenizerClasses().map((c) => c.className);
    throw new Error(
      `loadTokenizer: tokenizer.json's class_name must be one of ${known.join(', ')}; ` +
        `received ${JSON.stringify(className)}.`,
    );
  }
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw new Error(
      `loadTokenizer: tokenizer.json's config must be an object, received ${typeof config}.`,
    );
  }
  return {className, config: config as Record<string, unknown>};
}

/** Reads the assets of the class, and only those, from `assets/<config_file stem>/`. */
async function readAssets(json: unknown, read: ReadText): Promise<Record<string, string>> {
  const {className, config} = classAndConfig(json);
  const configFile = config.config_file ?? 'tokenizer.json';
  const stem = typeof configFile === 'string' ? configFile.split('.')[0] : '';
  if (!/^[A-Za-z0-9_-]+$/.test(stem)) {
    throw new Error(
      `loadTokenizer: tokenizer.json's config.config_file must be a plain file name such as ` +
        `"tokenizer.json", received ${JSON.stringify(configFile)}.`,
    );
  }
  const assets: Record<string, string> = {};
  for (const name of (presetTokenizerClass(className) as PresetTokenizerClass).fileAssets) {
    assets[name] = await read(`assets/${stem}/${name}`);
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

function utf8Strict(bytes: Uint8Array, name: string): string {
  try {
    return new TextDecoder('utf-8', {fatal: true}).decode(bytes);
  } catch {
    throw new Error(`loadTokenizer: ${name} is not valid UTF-8.`);
  }
}

function tooLarge(name: string, size: number, limit: number): Error {
  return new Error(
    `loadTokenizer: ${name} has ${size} bytes, over the limit of ${limit} bytes ` +
      '(options.maxFileBytes); refused before reading it.',
  );
}

interface NodeFs {
  promises: {
    stat(path: string): Promise<{size: number; isFile(): boolean}>;
    readFile(path: string): Promise<Uint8Array>;
    realpath(path: string): Promise<string>;
  };
}

async function fileReader(folder: string, limit: number): Promise<ReadText> {
  // A module name in a variable: bundlers for the browser leave it alone.
  const moduleName = 'fs';
  let fs: NodeFs;
  try {
    fs = (await import(moduleName)) as NodeFs;
  } catch {
    throw new Error(
      `loadTokenizer: reading the folder ${JSON.stringify(folder)} needs Node's fs; in the ` +
        'browser pass an http(s) URL or use tokenizerFromPreset.',
    );
  }
  const base = folder.replace(/[\\/]+$/, '');
  return async (name) => {
    const path = `${base}/${name}`;
    let stat: {size: number; isFile(): boolean};
    try {
      stat = await fs.promises.stat(path);
    } catch {
      throw new Error(`loadTokenizer: missing file ${name} (expected at ${path}).`);
    }
    if (!stat.isFile()) throw new Error(`loadTokenizer: ${name} is not a file (at ${path}).`);
    // links are followed, but must stay inside the folder's real path
    const [real, root] = await Promise.all([
      fs.promises.realpath(path),
      fs.promises.realpath(base === '' ? '/' : base),
    ]);
    const sep = root.includes('\\') ? '\\' : '/';
    if (!real.startsWith(root.endsWith(sep) ? root : root + sep)) {
      throw new Error(
        `loadTokenizer: refusing ${name}: it leads to ${real}, outside the folder ${folder}.`,
      );
    }
    if (stat.size > limit) throw tooLarge(name, stat.size, limit);
    const bytes = await fs.promises.readFile(real);
    if (bytes.length > limit) throw tooLarge(name, bytes.length, limit);
    return utf8Strict(bytes, name);
  };
}

function urlReader(
  base: string,
  fetcher: (url: string) => Promise<Response>,
  limit: number,
): ReadText {
  const root = base.endsWith('/') ? base : base + '/';
  return async (name) => {
    const url = new URL(name, root).toString();
    let response: Response;
    try {
      response = await fetcher(url);
    } catch (e) {
      throw new Error(
        `loadTokenizer: cannot fetch ${url}: ${e instanceof Error ? e.message : String(e)}.`,
      );
    }
    if (response == null || typeof response !== 'object' || typeof response.ok !== 'boolean') {
      throw new Error(
        `loadTokenizer: fetching ${url}: expected a Response, received ` +
          `${response === null ? 'null' : typeof response}.`,
      );
    }
    if (!response.ok) {
      throw new Error(
        response.status === 404
          ? `loadTokenizer: missing file ${name} (${url} answered 404).`
          : `loadTokenizer: fetching ${name} failed (${url} answered ${response.status}).`,
      );
    }
    const declared = Number(response.headers.get('content-length'));
    if (Number.isFinite(declared) && declared > limit) throw tooLarge(name, declared, limit);
    const body = response.body;
    if (body === null) {
      const bytes = new Uint8Array(await response.arrayBuffer());
      if (bytes.length > limit) throw tooLarge(name, bytes.length, limit);
      return utf8Strict(bytes, name);
    }
    const reader = body.getReader();
    const chunks: Uint8Array[] = [];
    let total = 0;
    for (;;) {
      const {done, value} = await reader.read();
      if (done) break;
      total += value.length;
      if (total > limit) {
        await reader.cancel();
        throw tooLarge(name, total, limit);
      }
      chunks.push(value);
    }
    const bytes = new Uint8Array(total);
    let offset = 0;
    for (const chunk of chunks) {
      bytes.set(chunk, offset);
      offset += chunk.length;
    }
    return utf8Strict(bytes, name);
  };
}
