/**
 * Keras files read directly, without tensorflowjs_converter: a Keras 3 `.keras` archive
 * (`config.json`, `metadata.json`, `model.weights.h5`), Keras 3's sharded weights
 * (`model.weights.json` + the shards it names) and a tf-keras 2 `.h5` full model (`model_config`
 * attribute + `model_weights` group) become the artifacts the converter would have written (the
 * same topology, weights named as the converter names them), so that {@link convertKerasArtifacts}
 * applies the same Keras semantics to both routes. Pure: works in browsers too.
 *
 * Safety: only the files named here are read; the config and every dataset's declared size are
 * checked (the topology guard, against the sizes the weights file declares) before the weights
 * are allocated; a dataset must lie inside its file. See SECURITY.md.
 */
import type * as tf from '@tensorflow/tfjs-core';

import {
  CONFIG_JSON_LIMITS,
  JsonLimits,
  parseBoundedJson,
  WEIGHTS_MANIFEST_JSON_LIMITS,
} from '../io/bounded_json';
import {checkTopology} from '../io/topology_guard';
import {declaredElements} from '../io/weight_bytes';
import {checkWeightsFit, weightCounts} from '../kernels/backend_capacity';
import {Hdf5Dataset, Hdf5Reader, isHdf5} from '../io/hdf5_datasets';
import type {RandomAccessFile} from '../io/random_access_file';
import {describeStart, zipEntries, zipEntryBytes} from '../io/zip_entries';
import {fail, isObj, Json, Obj} from './keras_json';

/** Options of `loadKerasModel`. */
export interface LoadKerasModelOptions {
  /** Called with the fraction (0 to 1, never decreasing) of the weights read so far. */
  onProgress?: (fraction: number) => void;
}

/**
 * The files of a Keras model by name: a `.keras` archive, a folder on disk, or (later) a preset
 * folder over http. `read` refuses a file larger than `maxBytes` before allocating it.
 */
export interface KerasFiles {
  /** What the files are, for errors (`m.keras`, `models/m/`). */
  label: string;
  has(name: string): Promise<boolean>;
  read(name: string, maxBytes: number): Promise<Uint8Array>;
  /**
   * The file opened for reading by range, checked as `read` checks it (Node's local folders),
   * where the files allow it: a large weights file is then read without holding its bytes.
   */
  openFile?(name: string, maxBytes: number): Promise<RandomAccessFile>;
}

/**
 * The most bytes a model's JSON file (config.json, metadata.json, task.json, preprocessor.json)
 * may take: {@link CONFIG_JSON_LIMITS}' characters (a UTF-8 byte is at most one character).
 */
export const MAX_JSON_BYTES = CONFIG_JSON_LIMITS.maxChars;
/** The most bytes a weights file is inflated to (2 GiB); stored entries are never copied. */
export const MAX_WEIGHTS_BYTES = 2 ** 31 - 1;

const decoder = new TextDecoder('utf-8');

/** The name of the file `name` of `label` (a folder, a URL ending in `/`, an archive). */
export function inFiles(label: string, name: string): string {
  return label.endsWith('/') ? `${label}${name}` : `${label}/${name}`;
}

/** JSON of a loaded file, its size and depth checked first (bounded_json.ts). */
function parseJson(bytes: Uint8Array, what: string, limits = CONFIG_JSON_LIMITS): Json {
  return parseBoundedJson(decoder.decode(bytes), what, limits, 'loadKerasModel') as Json;
}

/** Reads a JSON file of `files` no larger than `limits` allow, and parses it. */
async function readJsonFile(files: KerasFiles, name: string, limits: JsonLimits): Promise<Json> {
  return parseJson(await files.read(name, limits.maxChars), inFiles(files.label, name), limits);
}

/** The converter drops these keys everywhere in a Keras 3 config (keras_h5_conversion.py). */
const DROPPED_KEYS = new Set(['module', 'registered_name', 'date_saved']);

function dropKeys(x: Json): Json {
  if (Array.isArray(x)) return x.map(dropKeys);
  if (!isObj(x)) return x;
  const out: Obj = {};
  for (const [k, v] of Object.entries(x)) {
    if (!DROPPED_KEYS.has(k)) out[k] = dropKeys(v);
  }
  return out;
}

/** The datasets of one HDF5 file, as weights named by the converter's convention. */
interface WeightSource {
  reader: Hdf5Reader;
  datasets: Array<{name: string; dataset: Hdf5Dataset}>;
}

/** Keras 3 weights: every dataset by its path (`layers/dense/vars/0`), the optimizer's left. */
function keras3Weights(reader: Hdf5Reader): WeightSource {
  const paths = reader.datasetPaths('/', (p) => p === 'optimizer');
  return {reader, datasets: paths.map((p) => ({name: p, dataset: reader.dataset(p)}))};
}

function asStrings(x: unknown, what: string): string[] {
  if (!Array.isArray(x) || !x.every((s) => typeof s === 'string')) {
    fail(`expected ${what} to be a list of names, received ${JSON.stringify(x)}`);
  }
  return x as string[];
}

/** tf-keras 2 weights: `model_weights/<layer>/<weight_name>`, named without `:0`. */
function keras2Weights(reader: Hdf5Reader): WeightSource {
  const layers = asStrings(reader.attrs('model_weights').layer_names, "'layer_names'");
  const datasets: WeightSource['datasets'] = [];
  for (const layer of layers) {
    if (!reader.has('model_weights', layer)) {
      fail(`${reader.label} lists the layer '${layer}' but has no group model_weights/${layer}`);
    }
    const names = reader.attrs(`model_weights/${layer}`).weight_names;
    for (const w of asStrings(names ?? [], `the weight_names of ${layer}`)) {
      datasets.push({
        name: w.endsWith(':0') ? w.slice(0, -2) : w,
        dataset: reader.dataset(`model_weights/${layer}/${w}`),
      });
    }
  }
  return {reader, datasets};
}

/** Yields to the event loop (a page repaints its progress bar). */
const yieldNow = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/**
 * Checks the topology against the weights' declared sizes, then allocates and fills the weights
 * buffer, reporting progress.
 */
async function artifactsOf(
  topology: Obj,
  sources: WeightSource[],
  options: LoadKerasModelOptions,
): Promise<tf.io.ModelArtifacts> {
  const all = sources.flatMap((s) => s.datasets.map((d) => ({...d, reader: s.reader})));
  const weightSpecs: tf.io.WeightsManifestEntry[] = all.map(({name, dataset}) => ({
    name,
    shape: dataset.shape,
    dtype: dataset.dtype,
  }));
  // before a weights byte is allocated: the graph, and the sizes its config implies against the
  // sizes the weights files declare (each name once)
  const declared = declaredElements(weightSpecs);
  checkTopology(topology, declared);
  checkWeightsFit('loadKerasModel', 'the model', weightCounts(weightSpecs));
  const total = all.reduce((n, d) => n + d.dataset.bytes, 0);
  const data = new Uint8Array(total);
  const progress = options.onProgress;
  progress?.(0);
  let at = 0;
  let sinceYield = 0;
  for (const {reader, dataset} of all) {
    reader.copy(dataset, data, at);
    at += dataset.bytes;
    sinceYield += dataset.bytes;
    if (progress != null) {
      progress(total === 0 ? 1 : at / total);
      if (sinceYield > 8 * 2 ** 20) {
        sinceYield = 0;
        await yieldNow();
      }
    }
  }
  if (total === 0) progress?.(1);
  return {modelTopology: topology, weightSpecs, weightData: data.buffer as ArrayBuffer};
}

/**
 * A shard name from model.weights.json: a plain file name beside it. A colon (a URL scheme such
 * as `http:host`, a drive), `%` (percent-encoded dots and slashes), `?` and `#` are refused too:
 * a preset over http resolves the name against its base URL (checked again there, on the
 * resolved URL: keras_hub_sources.ts).
 */
function checkShardName(name: string, label: string): void {
  if (name.length === 0 || name === '.' || name === '..' || /[/\\\0:%?#]/.test(name)) {
    fail(
      `${inFiles(label, 'model.weights.json')} names the shard ${JSON.stringify(name)}; expected a file name ` +
        'beside it (no folder, "..", scheme or drive, backslash, "%", "?" or "#")',
    );
  }
}

/**
 * What a shard may hold beyond its weights' bytes: HDF5's superblock, object headers, B-trees and
 * name heaps. Measured with h5py 3.14 on Keras 3.15's files: 2.4 to 4.5 KiB per `vars` group
 * (keras-hub's gpt2 / bert / llama3 test presets, 35 to 39 of them: 84 to 97 KB in all; the
 * sharded fixture's shards: 18 and 22 KB for 4 and 7 groups). 64 KiB per shard and 16 KiB per
 * weight_map entry is three times that and more.
 */
export const SHARD_OVERHEAD_BYTES = 64 * 1024;
export const SHARD_ENTRY_OVERHEAD_BYTES = 16 * 1024;

/**
 * The shards a weights manifest (`model.weights.json`: `metadata.total_size` and a `weight_map`
 * of `/layers/.../vars` -> shard files) names, read one at a time within a budget: the manifest's
 * total_size plus {@link SHARD_OVERHEAD_BYTES} a shard and {@link SHARD_ENTRY_OVERHEAD_BYTES} an
 * entry (2 GiB in all when it declares no total_size). Each shard is refused from its declared
 * size (a zip entry's, a file's) before it is inflated or read when it would pass the budget
 * left, and checked before the next is read: every dataset lies under an entry the manifest
 * gives to that shard, the datasets' bytes so far stay within total_size, and the shard is no
 * larger than its datasets plus the overhead allowed (no padding).
 */
async function readShards(
  files: KerasFiles,
  manifestName: string,
  byRange: boolean,
): Promise<Hdf5Reader[]> {
  const where = inFiles(files.label, manifestName);
  const map = await readJsonFile(files, manifestName, WEIGHTS_MANIFEST_JSON_LIMITS);
  const weightMap = isObj(map) ? map.weight_map : undefined;
  if (!isObj(weightMap)) fail(`expected ${where} to hold a weight_map object (Keras 3 shards)`);
  /** Shard name -> the entries (`/layers/dense/vars`) the manifest puts in it. */
  const shards = new Map<string, Set<string>>();
  for (const [entry, v] of Object.entries(weightMap)) {
    for (const name of Array.isArray(v) ? v : [v]) {
      if (typeof name !== 'string') {
        fail(`${where} maps a weight to ${JSON.stringify(name)}; expected a file name`);
      }
      checkShardName(name, files.label);
      const entries = shards.get(name) ?? new Set<string>();
      entries.add(entry.replace(/^\/+/, ''));
      shards.set(name, entries);
    }
  }
  const meta = isObj(map) ? map.metadata : undefined;
  const declared = isObj(meta) ? meta.total_size : undefined;
  const totalSize =
    typeof declared === 'number' && Number.isFinite(declared) && declared >= 0 ? declared : null;
  const margin =
    SHARD_OVERHEAD_BYTES * shards.size + SHARD_ENTRY_OVERHEAD_BYTES * Object.keys(weightMap).length;
  const budget = totalSize == null ? MAX_WEIGHTS_BYTES : totalSize + margin;
  const budgetText =
    totalSize == null
      ? `${budget} bytes in all (it declares no metadata.total_size)`
      : `${budget} bytes in all (its metadata.total_size, ${totalSize}, plus ${margin} for ` +
        `HDF5's structure: ${SHARD_OVERHEAD_BYTES} a shard, ${SHARD_ENTRY_OVERHEAD_BYTES} an entry)`;
  let left = budget;
  let weightBytes = 0;
  const readers: Hdf5Reader[] = [];
  try {
    for (const [name, entries] of shards) {
      if (!(await files.has(name))) fail(`${where} names the shard '${name}', which is missing`);
      const limit = Math.max(0, Math.min(MAX_WEIGHTS_BYTES, left));
      let source: Uint8Array | RandomAccessFile;
      try {
        source = await fileSource(files, name, limit, byRange);
      } catch (e) {
        const message = (e as Error).message.replace(/^load\w+: /, '');
        fail(
          `the shards of ${where} may take ${budgetText}; ${limit} are left for '${name}': ${message}`,
        );
      }
      const reader = await readerOf(source, inFiles(files.label, name));
      readers.push(reader);
      const bytes = reader.bytes;
      left -= bytes.length;
      let shardWeightBytes = 0;
      for (const p of reader.datasetPaths('/', (q) => q === 'optimizer')) {
        const group = p.slice(0, p.lastIndexOf('/'));
        if (!entries.has(group)) {
          fail(
            `the shard '${name}' holds the dataset '${p}', but ${where} gives it no entry ` +
              `'/${group}' (its entries: ${[...entries].map((g) => `'/${g}'`).join(', ')})`,
          );
        }
        shardWeightBytes += reader.dataset(p).fileBytes;
      }
      weightBytes += shardWeightBytes;
      if (totalSize != null && weightBytes > totalSize) {
        fail(
          `the shards of ${where} declare datasets of ${weightBytes} bytes up to '${name}', more ` +
            `than its metadata.total_size, ${totalSize}`,
        );
      }
      const allowed =
        shardWeightBytes + SHARD_OVERHEAD_BYTES + SHARD_ENTRY_OVERHEAD_BYTES * entries.size;
      if (bytes.length > allowed) {
        fail(
          `the shard '${name}' holds ${bytes.length} bytes for datasets of ${shardWeightBytes}; ` +
            `expected at most ${allowed} (its datasets plus ${allowed - shardWeightBytes} for ` +
            "HDF5's structure)",
        );
      }
    }
  } catch (e) {
    // the shards opened by range so far are closed
    for (const r of readers) r.close();
    throw e;
  }
  return readers;
}

/**
 * An HDF5 file of `files`: read by range where `byRange` and the files allow it (its values then
 * read from the file as they are copied, until the reader is closed), else read whole.
 */
async function openHdf5(
  files: KerasFiles,
  name: string,
  maxBytes: number,
  byRange: boolean,
): Promise<Hdf5Reader> {
  return readerOf(await fileSource(files, name, maxBytes, byRange), inFiles(files.label, name));
}

/** A file of `files` opened for reading by range where `byRange` and the files allow it, else its bytes. */
async function fileSource(
  files: KerasFiles,
  name: string,
  maxBytes: number,
  byRange: boolean,
): Promise<Uint8Array | RandomAccessFile> {
  return byRange && files.openFile != null
    ? files.openFile(name, maxBytes)
    : files.read(name, maxBytes);
}

/** The HDF5 reader of a file's bytes or of a file read by range (closed if it cannot be read). */
async function readerOf(source: Uint8Array | RandomAccessFile, label: string): Promise<Hdf5Reader> {
  if (source instanceof Uint8Array) return Hdf5Reader.open(source, label);
  try {
    return await Hdf5Reader.openFile(source, label);
  } catch (e) {
    source.close();
    throw e;
  }
}

/**
 * Keras 3 weights of a model's files: `model.weights.h5`, or the shards `model.weights.json`
 * names (Keras 3's `save_weights(..., max_shard_size=...)` and keras-hub presets). `base` is the
 * file name without `.h5` / `.json` (`model.weights`, or keras-hub's `task.weights`).
 */
export async function readKeras3Weights(
  files: KerasFiles,
  base = 'model.weights',
  byRange = false,
): Promise<Hdf5Reader[]> {
  if (await files.has(`${base}.h5`)) {
    return [await openHdf5(files, `${base}.h5`, MAX_WEIGHTS_BYTES, byRange)];
  }
  if (await files.has(`${base}.json`)) return readShards(files, `${base}.json`, byRange);
  const npz = (await files.has(`${base}.npz`)) ? ` (it holds ${base}.npz, which is not read)` : '';
  fail(`expected ${files.label} to hold ${base}.h5 or ${base}.json${npz}`);
}

/**
 * The converter's artifacts of a Keras 3 model from its files: `config.json`, `metadata.json`
 * (for the Keras version) and its weights (see {@link readKeras3Weights}).
 */
export async function keras3FilesArtifacts(
  files: KerasFiles,
  options: LoadKerasModelOptions = {},
): Promise<tf.io.ModelArtifacts> {
  if (!(await files.has('config.json'))) {
    fail(`expected ${files.label} to hold config.json (a Keras 3 model's topology)`);
  }
  const config = await readJsonFile(files, 'config.json', CONFIG_JSON_LIMITS);
  if (!isObj(config) || !isObj(config.config)) {
    fail(
      `expected ${inFiles(files.label, 'config.json')} to hold a model config ({class_name, config})`,
    );
  }
  let kerasVersion: Json = null;
  if (await files.has('metadata.json')) {
    const meta = await readJsonFile(files, 'metadata.json', CONFIG_JSON_LIMITS);
    if (isObj(meta)) kerasVersion = meta.keras_version ?? null;
  }
  const topology: Obj = {keras_version: kerasVersion, model_config: dropKeys(config)};
  // the topology's graph is checked before the weights files are opened
  checkTopology(topology, Number.MAX_SAFE_INTEGER);
  const readers = await readKeras3Weights(files);
  return artifactsOf(topology, readers.map(keras3Weights), options);
}

/** The files of a `.keras` archive held in memory. */
export function zipFiles(bytes: Uint8Array, label: string): KerasFiles {
  const entries = zipEntries(bytes, 'a .keras file (a zip archive)');
  return {
    label,
    has: async (name) => entries.has(name),
    read: async (name, maxBytes) => {
      const entry = entries.get(name);
      if (entry == null) fail(`${label} has no entry '${name}'`);
      return zipEntryBytes(bytes, entry, maxBytes);
    },
  };
}

/** The converter's artifacts of a tf-keras 2 `.h5` full model. */
export async function keras2H5Artifacts(
  bytes: Uint8Array,
  label: string,
  options: LoadKerasModelOptions = {},
): Promise<tf.io.ModelArtifacts> {
  const reader = await Hdf5Reader.open(bytes, label);
  const attrs = reader.attrs('/');
  if (typeof attrs.model_config !== 'string' || !reader.has('/', 'model_weights')) {
    const weightsOnly = Array.isArray(attrs.layer_names) ? ' (it holds weights only)' : '';
    fail(
      `expected ${label} to be a full tf-keras 2 model (a model_config attribute and a ` +
        `model_weights group), received an HDF5 file with attributes ` +
        `[${Object.keys(attrs).join(', ')}]${weightsOnly}`,
    );
  }
  const config = parseBoundedJson(
    attrs.model_config,
    `${label}'s model_config attribute`,
    CONFIG_JSON_LIMITS,
    'loadKerasModel',
  ) as Json;
  const topology: Obj = {
    keras_version: typeof attrs.keras_version === 'string' ? attrs.keras_version : null,
    backend: typeof attrs.backend === 'string' ? attrs.backend : null,
    model_config: config,
  };
  checkTopology(topology, Number.MAX_SAFE_INTEGER);
  return artifactsOf(topology, [keras2Weights(reader)], options);
}

/**
 * The converter's artifacts of the bytes of a `.keras` file (a zip archive) or a tf-keras 2 `.h5`
 * full model (HDF5), told apart by their first bytes.
 */
export async function kerasBytesArtifacts(
  bytes: Uint8Array,
  label: string,
  options: LoadKerasModelOptions = {},
): Promise<tf.io.ModelArtifacts> {
  if (bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b) {
    return keras3FilesArtifacts(zipFiles(bytes, label), options);
  }
  if (isHdf5(bytes)) return keras2H5Artifacts(bytes, label, options);
  fail(
    `expected ${label} to be a .keras file (a zip archive, starting with "PK") or a tf-keras 2 ` +
      `.h5 model (HDF5, starting with 89 48 44 46), received ${describeStart(bytes)}`,
  );
}
