/**
 * `loadKerasHubPreset`: a keras-hub preset (a `save_to_preset` folder, or a keras-hub task /
 * backbone `.keras` file) read in JavaScript: the backbone or task built from its config by
 * `buildKerasHubModel` with the file's weights by Keras 3 path, the tokenizer from
 * `tokenizer.json` and its assets, the preprocessor's settings. Also the route `loadKerasModel`
 * takes for keras-hub folders and `.keras` files (`kerasHubModelOf*`).
 *
 * Safety as for `.keras` files (SECURITY.md): only the files named here are read (config.json,
 * task.json, preprocessor.json, tokenizer.json, the weights files and the tokenizer's own
 * assets), each size checked before it is read; the weights files' declared sizes are checked
 * against the size the config implies before the model is built.
 */
import type {LayersModel} from '@tensorflow/tfjs-layers';
import * as tfl from '@tensorflow/tfjs-layers';

import type {JsonObject} from '../layers/engine/contract';
import {snakeCase} from '../layers/engine/contract';
import {buildKerasHubParts} from '../hub_models/build';
import type {BuiltKerasHubModel} from '../hub_models/build';
import {impliedValues} from '../hub_models/family';
import type {HubWeightReader, KerasHubFamily} from '../hub_models/family';
import {familyOfClass, kerasHubClassNames} from '../hub_models/registry';
import {isObject} from '../layers/engine/json_object';
import {isDisposed, shareLayers} from '../layers/engine/shared_layers';
import {CONFIG_JSON_LIMITS, parseBoundedJson} from '../io/bounded_json';
import {Hdf5Reader} from '../io/hdf5_datasets';
import type {Tokenizer} from '../tokenizers/tokenizer';
import type {TokenizerSplit} from '../tokenizers/byte_pair';
import {inFiles, MAX_JSON_BYTES, readKeras3Weights} from './keras_file';
import {writeWeight} from './load_in_place';
import {
  DEFAULT_MAX_TOKENIZER_FILE_BYTES,
  presetTokenizerClass,
  presetTokenizerClasses,
  readDeclaredAssets,
  tokenizerAssetFolder,
  tokenizerFromPreset,
  utf8Text,
} from './load_tokenizer';
import {
  folderFiles,
  isZip,
  KerasHubPresetSource,
  nodeFs,
  Opened,
  openPreset,
  PresetFiles,
  zipFiles,
} from './keras_hub_sources';

export type {KerasHubPresetSource, PresetFile} from './keras_hub_sources';

/** keras-hub's preprocessor settings (its preprocessor.json), as `generateText` takes them. */
export interface KerasHubPreprocessor {
  /** The packed length (`sequence_length`), `generateText`'s default `maxLength`. */
  sequenceLength: number;
  /** Whether the start token is put first (`add_start_token`; BERT's packer always: true). */
  addStartToken: boolean;
  /** Whether the end token is put last (`add_end_token`; BERT's packer always: true). */
  addEndToken: boolean;
}

/** What {@link loadKerasHubPreset} gives. */
export interface KerasHubPreset {
  /** The task (GPT2CausalLM, BertTextClassifier, Llama3CausalLM) when the preset has one, else the backbone. */
  model: LayersModel;
  /**
   * The backbone: its inputs -> its outputs. With a task, a model over the task's own layers (no
   * second copy of the weights), made when first read: once read, it keeps the layers it uses
   * alive until it is disposed too (dispose both, in any order, or call `dispose()`). Never read,
   * it holds nothing, and `model.dispose()` frees every weight. Reading it after `model` was
   * disposed is an error. A preset without a task: `model` itself.
   */
  readonly backbone: LayersModel;
  /** The preset's tokenizer, null when it has none (a backbone saved alone). */
  tokenizer: Tokenizer | null;
  /** The preprocessor's settings, null when it has none. */
  preprocessor: KerasHubPreprocessor | null;
  /**
   * Frees every weight of the preset: disposes `model`, and `backbone` if it was read (either
   * may have been disposed already; a second call does nothing).
   */
  dispose(): void;
}

/** Options of {@link loadKerasHubPreset}. */
export interface LoadKerasHubPresetOptions {
  /** Called with the fraction (0 to 1, never decreasing) of the weights read so far. */
  onProgress?: (fraction: number) => void;
  /** The fetch used for URLs. Default the global `fetch`. */
  fetch?: (url: string) => Promise<Response>;
  /**
   * The tokenizer's split: `keras-hub` (default), keras-hub's ids; `model`, the original model's
   * regex (Hugging Face's ids). docs/tokenizers.md.
   */
  split?: TokenizerSplit;
}

type Obj = JsonObject;

function fail(message: string): never {
  throw new Error(`loadKerasHubPreset: ${message}`);
}

/** JSON of a preset's file, its size and depth checked first (bounded_json.ts). */
function parseJson(bytes: Uint8Array, what: string): unknown {
  const text = new TextDecoder('utf-8').decode(bytes);
  return parseBoundedJson(text, what, CONFIG_JSON_LIMITS, 'loadKerasHubPreset');
}

async function readJson(files: PresetFiles, name: string): Promise<Obj> {
  if (!(await files.has(name))) fail(`missing file ${name} in ${files.label}`);
  const json = parseJson(await files.read(name, MAX_JSON_BYTES), inFiles(files.label, name));
  if (!isObject(json) || typeof json.class_name !== 'string' || !isObject(json.config)) {
    fail(`expected ${inFiles(files.label, name)} to hold a serialized object {class_name, config}`);
  }
  return json;
}

// ---------------------------------------------------------------------------------------------
// weights

/**
 * Every weight of Keras 3 weights files by path (`layers/dense/vars/0`, the optimizer's left
 * out), as readers of their datasets: nothing is read here. Binding the model writes each
 * dataset's values from its file straight into its variable (`writeWeight`, load_in_place.ts:
 * the variable's own memory where the backend allows), one weight at a time, so that the weights
 * are never held twice (the file and the model, no map of every weight's values between).
 * `prefix` is put before each path. Reports progress over the bytes written, from 0 (now).
 */
export function hubWeightReaders(
  sources: ReadonlyArray<{readers: readonly Hdf5Reader[]; prefix: string}>,
  onProgress?: (fraction: number) => void,
): Map<string, HubWeightReader> {
  const all = sources.flatMap(({readers, prefix}) =>
    readers.flatMap((reader) =>
      reader
        .datasetPaths('/', (p) => p === 'optimizer')
        .map((p) => ({name: prefix + p, reader, dataset: reader.dataset(p)})),
    ),
  );
  const total = all.reduce((n, d) => n + d.dataset.bytes, 0);
  const out = new Map<string, HubWeightReader>();
  onProgress?.(0);
  if (total === 0) onProgress?.(1);
  let at = 0;
  for (const {name, reader, dataset} of all) {
    const {shape, dtype} = dataset;
    out.set(name, {
      shape,
      dtype,
      read() {
        const bytes = new Uint8Array(dataset.bytes);
        reader.copy(dataset, bytes, 0);
        return dtype === 'int32' ? new Int32Array(bytes.buffer) : new Float32Array(bytes.buffer);
      },
      write(variable) {
        writeWeight(variable, shape, dtype, (bytes, offset) => reader.copy(dataset, bytes, offset));
        at += dataset.bytes;
        onProgress?.(at / total);
      },
    });
  }
  return out;
}

/** Elements a weights file declares, from its datasets' shapes (nothing read). */
function declaredElements(readers: readonly Hdf5Reader[]): number {
  let n = 0;
  for (const r of readers) {
    for (const p of r.datasetPaths('/', (q) => q === 'optimizer')) {
      n += r.dataset(p).shape.reduce((a, d) => a * d, 1);
    }
  }
  return n;
}

/**
 * Refuses a config that implies far more weights than the files declare, before the model (whose
 * weights the config sizes) is built: the family's own formula (its `weightTerms`, a lower bound
 * of its weights). A config the family's checks refuse is left to building, which says why.
 */
function checkImpliedSize(
  family: KerasHubFamily,
  cls: string,
  backbone: Obj,
  declared: number,
  label: string,
): void {
  const implied = impliedValues(family, backbone);
  if (implied != null && !(implied <= declared)) {
    fail(
      `${label}: the ${cls} config implies at least ${implied} weight values, but its weights ` +
        `files declare ${declared}; refused before building the model`,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// the model

/** The known keras-hub class of a serialized object, or an error listing the known ones. */
function knownClass(json: Obj, where: string): string {
  const cls = json.class_name as string;
  if (!kerasHubClassNames().includes(cls)) {
    fail(
      `${where} holds the class ${JSON.stringify(cls)}, which is not implemented (expected one ` +
        `of ${kerasHubClassNames().join(', ')})`,
    );
  }
  return cls;
}

/** The family of a known class (knownClass checked it). */
const familyOf = (cls: string) => familyOfClass(cls) as KerasHubFamily;

/**
 * The backbone of a built task, as a model over the task's own layers (the backbone's outputs as
 * the family built them); it holds one more reference to each layer, so disposing either model
 * keeps the other's weights.
 */
function backboneView(built: Built): LayersModel {
  const {model, backboneOutputs} = built.parts;
  return shareLayers(
    tfl.model({
      inputs: model.inputs,
      outputs: backboneOutputs,
      name: snakeCase(built.family.backbone),
    }),
  );
}

/** The preprocessor settings of a serialized keras-hub preprocessor (the family's defaults). */
function preprocessorOf(json: Obj | null, family: KerasHubFamily): KerasHubPreprocessor | null {
  if (json == null) return null;
  const c = json.config as Obj;
  const length = c.sequence_length;
  if (!(typeof length === 'number' && Number.isInteger(length) && length > 0)) {
    fail(
      `expected the preprocessor's sequence_length to be a whole number > 0, received ${JSON.stringify(length)}`,
    );
  }
  const flag = (k: string, fallback: boolean) =>
    typeof c[k] === 'boolean' ? (c[k] as boolean) : fallback;
  return {
    sequenceLength: length,
    addStartToken: flag('add_start_token', family.preprocessor.addStartToken),
    addEndToken: flag('add_end_token', family.preprocessor.addEndToken),
  };
}

/**
 * The tokenizer of a serialized tokenizer whose assets are in `folder` of `files`: the assets its
 * class declares, read through the preset's own source (the one its configs and weights come from).
 */
async function tokenizerOf(
  json: Obj,
  files: PresetFiles,
  folder: string,
  split?: TokenizerSplit,
): Promise<Tokenizer> {
  const cls = json.class_name as string;
  const tokenizerClass = presetTokenizerClass(cls);
  if (tokenizerClass == null) {
    fail(
      `the tokenizer class ${JSON.stringify(cls)} is not implemented (expected one of ` +
        `${presetTokenizerClasses()
          .map((c) => c.className)
          .join(', ')})`,
    );
  }
  const assets = await readDeclaredAssets(tokenizerClass, folder, async (path) => {
    if (!(await files.has(path))) {
      fail(`${cls} needs the asset ${path}, which is missing from ${files.label}`);
    }
    const text = utf8Text(await files.read(path, DEFAULT_MAX_TOKENIZER_FILE_BYTES));
    return text ?? fail(`${inFiles(files.label, path)} is not valid UTF-8`);
  });
  try {
    return tokenizerFromPreset(json, assets, {split});
  } catch (e) {
    // the assets' errors, named by their place in the preset
    return fail(
      `${inFiles(files.label, folder)}: ${(e as Error).message.replace(/^loadTokenizer: /, '')}`,
    );
  }
}

/** The assets folder of a tokenizer in a preset: `assets/<config_file stem>`. */
function presetAssetFolder(tokenizer: Obj): string {
  const config = tokenizer.config as Obj;
  return (
    tokenizerAssetFolder(config) ??
    fail(
      `expected the tokenizer's config_file to be a plain file name, received ` +
        `${JSON.stringify(config.config_file)}`,
    )
  );
}

/**
 * What a preset's configs say, read once: the class to build, its family and configs, and the
 * tokenizer's and preprocessor's serialized objects.
 */
interface PresetConfigs {
  /** The keras-hub class built (the task when there is one, else the backbone). */
  className: string;
  family: KerasHubFamily;
  /** The serialized object `buildKerasHubModel` is given (config.json, or task.json). */
  json: Obj;
  /** The backbone's config (the size check reads it). */
  backboneConfig: Obj;
  /** The class the size check names (a preset's config.json, or the `.keras` file's class). */
  sizedClass: string;
  /** Whether the preset has a task. */
  isTask: boolean;
  tokenizerJson: Obj | null;
  /** The folder of the tokenizer's assets in the preset. */
  tokenizerFolder: string;
  preprocessorJson: Obj | null;
}

/** The weights files of a preset, opened (their declared sizes read, no value). */
interface PresetWeights {
  sources: Array<{readers: Hdf5Reader[]; prefix: string}>;
}

interface Built {
  model: LayersModel;
  /** The model and the backbone's outputs inside it. */
  parts: BuiltKerasHubModel;
  /** The keras-hub class of `model`. */
  className: string;
  family: KerasHubFamily;
  backbone: LayersModel | null;
  tokenizerJson: Obj | null;
  tokenizerFolder: string;
  preprocessorJson: Obj | null;
}

function buildModel(cls: string, config: Obj, weights: Map<string, HubWeightReader>) {
  try {
    return buildKerasHubParts(cls, config, weights);
  } catch (e) {
    fail((e as Error).message);
  }
}

/** Step 2 of a `.keras` file: config.json is the task or the backbone, the tokenizer inside it. */
async function kerasFileConfigs(files: PresetFiles): Promise<PresetConfigs> {
  const config = await readJson(files, 'config.json');
  const cls = knownClass(config, inFiles(files.label, 'config.json'));
  const family = familyOf(cls);
  const isTask = cls !== family.backbone;
  const inner = config.config as Obj;
  const backboneJson = isTask ? inner.backbone : config;
  if (!isObject(backboneJson) || !isObject(backboneJson.config)) {
    fail(`expected ${inFiles(files.label, 'config.json')}'s ${cls} to hold its backbone's config`);
  }
  const preprocessorJson = isTask && isObject(inner.preprocessor) ? inner.preprocessor : null;
  const tokenizerJson =
    preprocessorJson != null && isObject((preprocessorJson.config as Obj).tokenizer)
      ? ((preprocessorJson.config as Obj).tokenizer as Obj)
      : null;
  return {
    className: cls,
    family,
    json: config,
    backboneConfig: backboneJson.config,
    sizedClass: cls,
    isTask,
    tokenizerJson,
    // Keras 3 saves a layer's assets under its attribute path in the model
    tokenizerFolder: 'assets/preprocessor/tokenizer',
    preprocessorJson,
  };
}

/** Step 2 of a `save_to_preset` folder: config.json (backbone), task.json, tokenizer.json, preprocessor.json. */
async function presetConfigs(files: PresetFiles): Promise<PresetConfigs> {
  const config = await readJson(files, 'config.json');
  const backboneCls = knownClass(config, inFiles(files.label, 'config.json'));
  const family = familyOf(backboneCls);
  if (backboneCls !== family.backbone) {
    fail(
      `expected ${inFiles(files.label, 'config.json')} to hold a backbone, received the task ${backboneCls}`,
    );
  }
  const task = (await files.has('task.json')) ? await readJson(files, 'task.json') : null;
  const taskCls = task == null ? null : knownClass(task, inFiles(files.label, 'task.json'));
  if (taskCls != null && familyOf(taskCls) !== family) {
    fail(`${files.label}: task.json's ${taskCls} does not take config.json's ${backboneCls}`);
  }
  // the tokenizer's and preprocessor's files are read and checked before the model is built, so
  // that a broken one refuses the preset without building (and leaking) its weights
  const tokenizerJson = (await files.has('tokenizer.json'))
    ? await readJson(files, 'tokenizer.json')
    : null;
  const tokenizerFolder = tokenizerJson == null ? '' : presetAssetFolder(tokenizerJson);
  const preprocessorJson = (await files.has('preprocessor.json'))
    ? await readJson(files, 'preprocessor.json')
    : null;
  return {
    className: taskCls ?? backboneCls,
    family,
    // task.json holds the backbone's config too (keras-hub's loader builds the task from it)
    json: task ?? config,
    backboneConfig: config.config as Obj,
    sizedClass: backboneCls,
    isTask: task != null,
    tokenizerJson,
    tokenizerFolder,
    preprocessorJson,
  };
}

/**
 * Step 3: the weights files, opened: a `.keras` file's by its own paths; a preset's
 * model.weights under the task's backbone folder when there is a task, and task.weights.
 */
async function openWeights(opened: Opened, configs: PresetConfigs): Promise<PresetWeights> {
  const {files} = opened;
  if (opened.kerasFile) return {sources: [{readers: await readKeras3Weights(files), prefix: ''}]};
  const readers = await readKeras3Weights(files, 'model.weights');
  const taskReaders =
    configs.isTask &&
    ((await files.has('task.weights.h5')) || (await files.has('task.weights.json')))
      ? await readKeras3Weights(files, 'task.weights')
      : [];
  const prefix = configs.isTask ? `layers/${snakeCase(configs.family.backbone)}/` : '';
  return {
    sources: [
      {readers, prefix},
      {readers: taskReaders, prefix: ''},
    ],
  };
}

/**
 * A keras-hub preset (a `save_to_preset` folder or a keras-hub `.keras` file) read as one
 * pipeline, each step once: (1) the sources opened (`openPreset`, by the caller); (2) the
 * configs read (`kerasFileConfigs` / `presetConfigs`); (3) the weights files opened (declared
 * sizes only: `openWeights`); (4) the implied size checked by the family's own formula
 * (`checkImpliedSize`); (5) the family built and its weights streamed from their files into
 * its variables (`hubWeightReaders`, `buildKerasHubParts`); then the caller makes the tokenizer and preprocessor (`loadKerasHubPreset`).
 */
async function load(opened: Opened, options: LoadKerasHubPresetOptions): Promise<Built> {
  const {files} = opened;
  const configs = opened.kerasFile ? await kerasFileConfigs(files) : await presetConfigs(files);
  const weights = await openWeights(opened, configs);
  const declared = weights.sources.reduce((n, s) => n + declaredElements(s.readers), 0);
  checkImpliedSize(
    configs.family,
    configs.sizedClass,
    configs.backboneConfig,
    declared,
    files.label,
  );
  // the weights stream from their files into the model's variables as it is bound
  const readers = hubWeightReaders(weights.sources, options.onProgress);
  const parts = buildModel(configs.className, configs.json, readers);
  return {
    model: parts.model,
    parts,
    className: configs.className,
    family: configs.family,
    backbone: configs.isTask ? null : parts.model,
    tokenizerJson: configs.tokenizerJson,
    tokenizerFolder: configs.tokenizerFolder,
    preprocessorJson: configs.preprocessorJson,
  };
}

function checkOptions(options: unknown): void {
  if (options == null || typeof options !== 'object') {
    fail(
      'expected options to be an object such as {onProgress, fetch}, received ' +
        (options === null ? 'null' : typeof options),
    );
  }
  for (const key of ['fetch', 'onProgress'] as const) {
    const f = (options as LoadKerasHubPresetOptions)[key];
    if (f != null && typeof f !== 'function') {
      fail(`expected options.${key} to be a function, received ${typeof f}`);
    }
  }
  const split = (options as LoadKerasHubPresetOptions).split;
  if (split !== undefined && split !== 'keras-hub' && split !== 'model') {
    fail(`expected options.split to be 'keras-hub' or 'model', received ${JSON.stringify(split)}`);
  }
}

/**
 * Loads a keras-hub preset: a `save_to_preset` folder (config.json, model.weights.h5, task.json
 * and task.weights.h5 where keras-hub writes them, preprocessor.json, tokenizer.json,
 * assets/tokenizer/...) or a keras-hub task / backbone `.keras` file (`causal_lm.save('x.keras')`,
 * its tokenizer in the file's assets). `model` is the task (GPT2CausalLM, BertTextClassifier,
 * Llama3CausalLM) when there is one, else the backbone.
 *
 * Sources: a folder or `.keras` path (Node); a URL (the preset folder's base, or a `.keras`
 * file's); a `.keras` file's bytes (ArrayBuffer, Uint8Array, Blob, File); the files of a dropped
 * folder (`File[]` or a `FileList`: each file's `webkitRelativePath`, else its name, is its path;
 * a common top folder is dropped); or a `Map` from the path inside the preset to its bytes.
 *
 * ```js
 * const preset = await loadKerasHubPreset('gpt2_preset/');
 * const [text] = await generateText(preset, 'The quick brown fox', {maxLength: 32});
 * ```
 */
export async function loadKerasHubPreset(
  source: KerasHubPresetSource,
  options: LoadKerasHubPresetOptions = {},
): Promise<KerasHubPreset> {
  checkOptions(options);
  const opened = await openPreset(source, options.fetch);
  const built = await load(opened, options);
  try {
    const preprocessor = preprocessorOf(built.preprocessorJson, built.family);
    const tokenizer =
      built.tokenizerJson == null
        ? null
        : await tokenizerOf(
            built.tokenizerJson,
            opened.files,
            built.tokenizerFolder,
            options.split,
          );
    return presetOf(built, tokenizer, preprocessor);
  } catch (e) {
    built.model.dispose();
    throw e;
  }
}

/**
 * The preset of a built model: `backbone` a view made when first read (the view adds a reference
 * to each layer it uses, which `model.dispose()` alone would keep), `dispose` for both.
 */
function presetOf(
  built: Built,
  tokenizer: Tokenizer | null,
  preprocessor: KerasHubPreprocessor | null,
): KerasHubPreset {
  const {model} = built;
  let view: LayersModel | null = built.backbone;
  return {
    model,
    get backbone(): LayersModel {
      if (view == null) {
        if (isDisposed(model)) {
          fail(
            `the preset's backbone was read after its model was disposed (model.dispose() freed ` +
              `every weight, the backbone's too); expected backbone to be read before ` +
              `model.dispose(), or preset.dispose() to free both`,
          );
        }
        view = backboneView(built);
      }
      return view;
    },
    tokenizer,
    preprocessor,
    dispose() {
      if (view != null && view !== model && !isDisposed(view)) view.dispose();
      if (!isDisposed(model)) model.dispose();
    },
  };
}

/**
 * `loadKerasModel`'s route for keras-hub: the task (or backbone) of a `.keras` file's bytes or of
 * a preset's files, or null when config.json is not a keras-hub class (a plain Keras model).
 */
export async function kerasHubModelOf(
  source: Uint8Array | {folder: string},
  label: string,
  options: LoadKerasHubPresetOptions = {},
): Promise<LayersModel | null> {
  try {
    let files: PresetFiles;
    if (source instanceof Uint8Array) {
      if (!isZip(source)) return null;
      files = zipFiles(source, label);
    } else {
      files = folderFiles(await nodeFs(source.folder), source.folder);
    }
    if (!(await files.has('config.json'))) return null;
    const config = parseJson(
      await files.read('config.json', MAX_JSON_BYTES),
      `${label}/config.json`,
    );
    if (!isKerasHubObject(config)) return null;
    const kerasFile = source instanceof Uint8Array;
    return (await load({files, kerasFile}, options)).model;
  } catch (e) {
    // the caller is loadKerasModel: its errors say so
    if (e instanceof Error && e.message.startsWith('loadKerasHubPreset: ')) {
      e.message = `loadKerasModel: ${e.message.slice('loadKerasHubPreset: '.length)}`;
    }
    throw e;
  }
}

/** Whether a serialized object is keras-hub's (`registered_name` `keras_hub>...`, or its module). */
function isKerasHubObject(json: unknown): boolean {
  if (!isObject(json)) return false;
  const registered = json.registered_name;
  const module = json.module;
  return (
    (typeof registered === 'string' && registered.startsWith('keras_hub>')) ||
    (typeof module === 'string' && /^keras_hub(\.|$)/.test(module))
  );
}
