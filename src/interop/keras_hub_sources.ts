/**
 * Where a keras-hub preset's files come from, for `loadKerasHubPreset`, `loadKerasModel` and
 * `loadTokenizer`: a folder on disk (Node; names kept inside it, links leading out refused), a URL
 * base (each file fetched by name, its body counted as it streams in), a `.keras` zip (path, URL,
 * bytes, Blob), a dropped folder's `File[]` or a Map of path -> bytes; each file's size checked
 * before it is read. A file that cannot be read is a {@link PresetFileError}: the facts, worded
 * for `loadKerasHubPreset`, which `loadTokenizer` words in its own name.
 */
import {hasSyncFs, openRandomAccess} from '../io/random_access_file';
import {zipEntries, zipEntryBytes} from '../io/zip_entries';
import {KerasFiles, MAX_WEIGHTS_BYTES} from './keras_file';

/** A file of a dropped preset folder: a `File` (its `webkitRelativePath`, else its name, is its path). */
export interface PresetFile extends Blob {
  /** The file's name (its path when it has no `webkitRelativePath`). */
  readonly name: string;
  /** Its path in a chosen or dropped folder (`gpt2/config.json`), where the browser gives one. */
  readonly webkitRelativePath?: string;
}

/**
 * What {@link loadKerasHubPreset} reads: a folder path (Node) or URL of a preset; a `.keras`
 * file's path, URL or bytes (ArrayBuffer, Uint8Array, Blob, File); a dropped folder (`File[]` or
 * a `FileList` from `<input type=file webkitdirectory>` or a drop); or a Map from the path inside
 * the preset (`config.json`, `assets/tokenizer/vocabulary.json`) to its bytes.
 */
export type KerasHubPresetSource =
  | string
  | URL
  | ArrayBuffer
  | Uint8Array
  | Blob
  | ArrayLike<PresetFile>
  | ReadonlyMap<string, Blob | Uint8Array | ArrayBuffer>;

/** The files of a preset by path inside it (`assets/tokenizer/merges.txt`). */
export type PresetFiles = KerasFiles;

/** An error of `loadKerasHubPreset` (its name first, as its callers reword it). */
export function failPreset(message: string): never {
  throw new Error(`loadKerasHubPreset: ${message}`);
}

/** Why a preset's file could not be read, as facts (each loader words them in its own name). */
export type PresetFileProblem =
  /** No such file: `where` says where it was looked for (`(expected at dir/x)`, `in label`). */
  | {kind: 'missing'; name: string; where: string}
  /** Over the limit: `declared` (Content-Length) or held (a file's size, the bytes received). */
  | {kind: 'too-large'; name: string; path: string; bytes: number; limit: number; declared: boolean}
  /** A name that is not a plain path inside the preset (`why`, when there is more to say). */
  | {kind: 'refused-name'; name: string; why: string | null; inside: string}
  /** A folder's file that leads (a link) to `real`, outside the folder. */
  | {kind: 'outside'; name: string; path: string; real: string; folder: string}
  | {kind: 'not-a-file'; name: string; path: string}
  | {kind: 'cannot-fetch'; url: string; reason: string}
  | {kind: 'not-a-response'; url: string; received: string}
  | {kind: 'status'; name: string; url: string; status: number}
  /** A folder read where Node's fs is not (a browser). */
  | {kind: 'no-fs'; what: string};

/** A problem in `loadKerasHubPreset`'s words (without its name). */
export function presetFileWords(p: PresetFileProblem): string {
  switch (p.kind) {
    case 'missing':
      return `missing file ${p.name} ${p.where}`;
    case 'too-large':
      return `${p.path} ${p.declared ? 'declares' : 'holds'} ${p.bytes} bytes, more than the ${p.limit} allowed`;
    case 'refused-name':
      return (
        `refusing the file name ${JSON.stringify(p.name)}: ${p.why == null ? '' : `${p.why}; `}` +
        `expected a path inside ${p.inside}`
      );
    case 'outside':
      return `refusing ${p.path}: it leads to ${p.real}, outside the preset folder ${p.folder}`;
    case 'not-a-file':
      return `expected ${p.path} to be a file`;
    case 'cannot-fetch':
      return `cannot fetch ${p.url}: ${p.reason}`;
    case 'not-a-response':
      return `fetching ${p.url}: expected a Response, received ${p.received}`;
    case 'status':
      return `fetching ${p.url}: expected status 200, received ${p.status}`;
    case 'no-fs':
      return (
        `reading ${p.what} needs Node's fs; in the browser pass a URL, a .keras file's bytes, the ` +
        'files of a dropped folder (File[]) or a Map of path -> bytes'
      );
  }
}

/** A preset's file that could not be read: `problem` holds the facts, the message is `loadKerasHubPreset`'s. */
export class PresetFileError extends Error {
  constructor(readonly problem: PresetFileProblem) {
    super(`loadKerasHubPreset: ${presetFileWords(problem)}`);
  }
}

function problem(p: PresetFileProblem): never {
  throw new PresetFileError(p);
}

const EXPECTED_SOURCE =
  'expected a preset folder path or URL, a .keras file (path, URL, bytes, Blob), a File[] / ' +
  'FileList or a Map of path -> bytes';

const toBytes = async (v: Blob | Uint8Array | ArrayBuffer): Promise<Uint8Array> =>
  v instanceof Uint8Array
    ? v
    : v instanceof ArrayBuffer
      ? new Uint8Array(v)
      : new Uint8Array(await v.arrayBuffer());

const sizeOf = (v: Blob | Uint8Array | ArrayBuffer): number =>
  v instanceof Uint8Array || v instanceof ArrayBuffer ? v.byteLength : v.size;

/**
 * The files of a Map keyed by path. Paths are taken with `/` separators; when no `config.json`
 * is at the top but every path starts with one folder (a dropped folder's
 * `webkitRelativePath`: `gpt2/config.json`), that folder is dropped.
 */
export function mapFiles(
  entries: ReadonlyMap<string, Blob | Uint8Array | ArrayBuffer>,
  label: string,
): PresetFiles {
  const byPath = new Map<string, Blob | Uint8Array | ArrayBuffer>();
  for (const [key, value] of entries) {
    if (typeof key !== 'string')
      failPreset(`expected the Map's keys to be paths, received ${typeof key}`);
    byPath.set(key.replace(/\\/g, '/').replace(/^\.?\//, ''), value);
  }
  if (!byPath.has('config.json')) {
    const firsts = new Set([...byPath.keys()].map((k) => k.split('/')[0]));
    const [only] = [...firsts];
    if (firsts.size === 1 && byPath.has(`${only}/config.json`)) {
      const stripped = new Map<string, Blob | Uint8Array | ArrayBuffer>();
      for (const [k, v] of byPath) stripped.set(k.slice(only.length + 1), v);
      return mapFiles(stripped, `${label} (${only}/)`);
    }
  }
  return {
    label,
    has: async (name) => byPath.has(name),
    read: async (name, maxBytes) => {
      const value = byPath.get(name);
      if (value == null) problem({kind: 'missing', name, where: `in ${label}`});
      if (sizeOf(value) > maxBytes) {
        problem({
          kind: 'too-large',
          name,
          path: name,
          bytes: sizeOf(value),
          limit: maxBytes,
          declared: false,
        });
      }
      return toBytes(value);
    },
  };
}

/**
 * The URL of the file `name` of a preset at `root` (a URL ending in `/`), checked on the resolved
 * URL: the same origin, a path under the root's, and each segment below it, percent-decoded, a
 * plain name (no `.`, `..`, slash or backslash); no query or fragment. A name from the preset's
 * own files (a shard of model.weights.json) can thus not make the loader fetch anything outside
 * the preset: `http:attacker.example`, `//host/x`, `%2e%2e` and `..%2f` are refused before a
 * request is made.
 */
export function urlUnder(root: string, name: string): string {
  const refuse = (why: string): never =>
    problem({kind: 'refused-name', name, why, inside: `the preset at ${root}`});
  if (/[?#\0\\]/.test(name)) refuse('it holds "?", "#", a backslash or NUL');
  let url: URL;
  let base: URL;
  try {
    base = new URL(root);
    url = new URL(name, base);
  } catch {
    return refuse('it is not a URL path');
  }
  if (url.origin !== base.origin || url.protocol !== base.protocol) {
    refuse(`it resolves to ${url.origin}, another origin`);
  }
  if (url.search !== '' || url.hash !== '' || !url.pathname.startsWith(base.pathname)) {
    refuse(`it resolves to ${url.href}, outside the preset`);
  }
  const rest = url.pathname.slice(base.pathname.length).split('/');
  for (const segment of rest) {
    let plain: string;
    try {
      plain = decodeURIComponent(segment);
    } catch {
      return refuse(`its part ${JSON.stringify(segment)} is not valid percent-encoding`);
    }
    if (plain === '' || plain === '.' || plain === '..' || /[/\\\0]/.test(plain)) {
      refuse(`its part ${JSON.stringify(segment)} reads ${JSON.stringify(plain)} once decoded`);
    }
  }
  return url.href;
}

/**
 * The bytes of a response's body, at most `maxBytes`: counted as they stream in (the stream
 * cancelled once over), into one buffer of the declared length when there is one.
 */
async function bodyBytes(
  response: Response,
  name: string,
  maxBytes: number,
  declared: number,
): Promise<Uint8Array> {
  const over = (bytes: number): never =>
    problem({kind: 'too-large', name, path: name, bytes, limit: maxBytes, declared: false});
  const body = response.body;
  if (body == null) {
    const bytes = new Uint8Array(await response.arrayBuffer());
    return bytes.length > maxBytes ? over(bytes.length) : bytes;
  }
  const reader = body.getReader();
  let buffer = new Uint8Array(Number.isInteger(declared) && declared >= 0 ? declared : 0);
  let total = 0;
  for (;;) {
    const {done, value} = await reader.read();
    if (done) break;
    if (total + value.length > maxBytes) {
      await reader.cancel();
      over(total + value.length);
    }
    if (total + value.length > buffer.length) {
      const grown = new Uint8Array(
        Math.min(maxBytes, Math.max(2 * buffer.length, total + value.length)),
      );
      grown.set(buffer.subarray(0, total));
      buffer = grown;
    }
    buffer.set(value, total);
    total += value.length;
  }
  return total === buffer.length ? buffer : buffer.slice(0, total);
}

/**
 * The files of a preset at a URL: each file fetched once (a missing one answers 404), its
 * declared size checked before its body is read and its body counted as it streams in.
 */
export function urlFiles(base: string, fetcher: (url: string) => Promise<Response>): PresetFiles {
  const root = base.endsWith('/') ? base : `${base}/`;
  const pending = new Map<string, Promise<Response | null>>();
  const get = (name: string): Promise<Response | null> => {
    let p = pending.get(name);
    if (p == null) {
      const url = urlUnder(root, name);
      p = fetcher(url).then(
        (r: Response | null | undefined) => {
          if (r == null || typeof r !== 'object' || typeof r.status !== 'number') {
            problem({kind: 'not-a-response', url, received: r === null ? 'null' : typeof r});
          }
          if (r.status === 404) return null;
          if (!r.ok) problem({kind: 'status', name, url, status: r.status});
          return r;
        },
        (e: unknown) =>
          problem({kind: 'cannot-fetch', url, reason: e instanceof Error ? e.message : String(e)}),
      );
      pending.set(name, p);
    }
    return p;
  };
  return {
    label: root,
    has: async (name) => (await get(name)) != null,
    read: async (name, maxBytes) => {
      const response = await get(name);
      pending.delete(name);
      if (response == null) {
        problem({kind: 'missing', name, where: `(${urlUnder(root, name)} answered 404)`});
      }
      const declared = Number(response.headers.get('content-length') ?? NaN);
      if (Number.isFinite(declared) && declared > maxBytes) {
        await response.body?.cancel();
        problem({
          kind: 'too-large',
          name,
          path: name,
          bytes: declared,
          limit: maxBytes,
          declared: true,
        });
      }
      return bodyBytes(response, name, maxBytes, declared);
    },
  };
}

export interface NodeFs {
  promises: {
    stat(path: string): Promise<{size: number; isFile(): boolean; isDirectory(): boolean}>;
    readFile(path: string): Promise<Uint8Array>;
    realpath(path: string): Promise<string>;
  };
}

export async function nodeFs(what: string): Promise<NodeFs> {
  // a module name in a variable: bundlers for the browser leave it alone
  const moduleName = 'fs';
  try {
    return (await import(moduleName)) as NodeFs;
  } catch {
    return problem({kind: 'no-fs', what});
  }
}

/** The files of a local folder: names are the package's own (checked), links must stay inside. */
export function folderFiles(fs: NodeFs, dir: string): PresetFiles {
  const base = dir.replace(/[\\/]+$/, '');
  const resolve = async (name: string): Promise<string | null> => {
    if (name.split('/').some((p) => p === '' || p === '.' || p === '..' || /[\\\0]/.test(p))) {
      problem({kind: 'refused-name', name, why: null, inside: dir});
    }
    let real: string;
    try {
      real = await fs.promises.realpath(`${base}/${name}`);
    } catch {
      return null;
    }
    const root = await fs.promises.realpath(base === '' ? '/' : base);
    const sep = root.includes('\\') ? '\\' : '/';
    if (!real.startsWith(root.endsWith(sep) ? root : root + sep)) {
      problem({kind: 'outside', name, path: `${base}/${name}`, real, folder: dir});
    }
    return real;
  };
  /** The real path of a regular file `name`, no larger than `maxBytes`, or the problem. */
  const checked = async (name: string, maxBytes: number): Promise<string> => {
    const real = await resolve(name);
    const path = `${base}/${name}`;
    if (real == null) problem({kind: 'missing', name, where: `(expected at ${path})`});
    const st = await fs.promises.stat(real);
    if (!st.isFile()) problem({kind: 'not-a-file', name, path});
    if (st.size > maxBytes) {
      problem({kind: 'too-large', name, path, bytes: st.size, limit: maxBytes, declared: false});
    }
    return real;
  };
  const syncFs = hasSyncFs(fs) ? fs : null;
  return {
    label: dir,
    has: async (name) => {
      const real = await resolve(name);
      return real != null && (await fs.promises.stat(real)).isFile();
    },
    read: async (name, maxBytes) => {
      const data = await fs.promises.readFile(await checked(name, maxBytes));
      return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    },
    ...(syncFs == null
      ? {}
      : {
          openFile: async (name: string, maxBytes: number) => {
            const file = openRandomAccess(syncFs, await checked(name, maxBytes));
            if (file.size > maxBytes) {
              // grown since it was checked
              file.close();
              problem({
                kind: 'too-large',
                name,
                path: `${base}/${name}`,
                bytes: file.size,
                limit: maxBytes,
                declared: false,
              });
            }
            return file;
          },
        }),
  };
}

/** The entries of a `.keras` archive (a keras-hub task or backbone saved with `.save`). */
export function zipFiles(bytes: Uint8Array, label: string): PresetFiles {
  const entries = zipEntries(bytes, 'a .keras file (a zip archive)');
  return {
    label,
    has: async (name) => entries.has(name),
    read: async (name, maxBytes) => {
      const entry = entries.get(name);
      if (entry == null) problem({kind: 'missing', name, where: `in ${label}`});
      return zipEntryBytes(bytes, entry, maxBytes);
    },
  };
}

export const isBlob = (x: unknown): x is Blob => typeof Blob !== 'undefined' && x instanceof Blob;
export const isZip = (b: Uint8Array) => b.length >= 4 && b[0] === 0x50 && b[1] === 0x4b;
export const isKerasName = (s: string) => /\.keras$/i.test(s.split(/[?#]/)[0]);

export interface Opened {
  files: PresetFiles;
  /** A `.keras` file (everything in config.json and assets/) rather than a preset folder. */
  kerasFile: boolean;
}

async function fetchBytes(url: string, fetcher: (url: string) => Promise<Response>) {
  const files = urlFiles(url.replace(/[^/]*$/, ''), fetcher);
  const name = url.split(/[?#]/)[0].replace(/^.*\//, '');
  return files.read(name, MAX_WEIGHTS_BYTES);
}

/**
 * What a string names: an `http(s)://` URL, a local path (a `file:` URL's, decoded; a Windows
 * drive's), or null for another scheme (`ftp:`, `data:`), which no loader reads.
 */
export function presetLocation(where: string): {url: string} | {path: string} | null {
  if (/^https?:\/\//i.test(where)) return {url: where};
  if (
    /^[a-z][a-z0-9+.-]*:/i.test(where) &&
    !/^file:/i.test(where) &&
    !/^[a-z]:[\\/]/i.test(where)
  ) {
    return null;
  }
  return {path: /^file:/i.test(where) ? decodeURIComponent(new URL(where).pathname) : where};
}

export async function openPreset(
  source: KerasHubPresetSource,
  fetchOption: ((url: string) => Promise<Response>) | undefined,
): Promise<Opened> {
  const fetcher = fetchOption ?? (typeof fetch === 'function' ? fetch : undefined);
  if (source instanceof Uint8Array || source instanceof ArrayBuffer) {
    const bytes = source instanceof Uint8Array ? source : new Uint8Array(source);
    return {files: zipFiles(bytes, 'the bytes given'), kerasFile: true};
  }
  if (isBlob(source)) {
    const name = (source as Partial<PresetFile>).name;
    const bytes = new Uint8Array(await source.arrayBuffer());
    return {files: zipFiles(bytes, name || 'the Blob given'), kerasFile: true};
  }
  if (source instanceof Map) {
    return {files: mapFiles(source, 'the files given'), kerasFile: false};
  }
  if (typeof source === 'string' || source instanceof URL) {
    const where = String(source);
    if (where === '') failPreset(`${EXPECTED_SOURCE}, received an empty string`);
    const location = presetLocation(where);
    if (location == null) {
      failPreset(
        `expected a folder or .keras path, a URL, bytes or files, received ${JSON.stringify(where)}`,
      );
    }
    if ('url' in location) {
      if (fetcher == null)
        failPreset(`${where} is a URL but there is no fetch; pass options.fetch`);
      if (isKerasName(where)) {
        return {files: zipFiles(await fetchBytes(where, fetcher), where), kerasFile: true};
      }
      return {files: urlFiles(where, fetcher), kerasFile: false};
    }
    const p = location.path;
    const fs = await nodeFs(p);
    const st = await fs.promises.stat(p).catch(() => null);
    if (st == null) failPreset(`no such file or folder: ${p}`);
    if (st.isDirectory()) return {files: folderFiles(fs, p), kerasFile: false};
    if (st.size > MAX_WEIGHTS_BYTES) {
      failPreset(`${p} holds ${st.size} bytes, more than the ${MAX_WEIGHTS_BYTES} allowed`);
    }
    const data = await fs.promises.readFile(p);
    const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    if (!isZip(bytes)) {
      failPreset(
        `expected ${p} to be a preset folder or a .keras file (a zip archive, starting with "PK")`,
      );
    }
    return {files: zipFiles(bytes, p), kerasFile: true};
  }
  if (source != null && typeof (source as ArrayLike<PresetFile>).length === 'number') {
    const list = Array.from(source as ArrayLike<PresetFile>);
    if (!list.every(isBlob)) failPreset('expected every entry of the list to be a File');
    if (list.length === 1 && isKerasName(list[0].name)) {
      const bytes = new Uint8Array(await list[0].arrayBuffer());
      return {files: zipFiles(bytes, list[0].name), kerasFile: true};
    }
    const map = new Map<string, Blob>();
    for (const f of list) map.set(f.webkitRelativePath || f.name, f);
    return {files: mapFiles(map, 'the files given'), kerasFile: false};
  }
  failPreset(`${EXPECTED_SOURCE}, received ${source === null ? 'null' : typeof source}`);
}
