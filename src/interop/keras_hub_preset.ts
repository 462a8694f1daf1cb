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
import {checkWeightsFit, weightCounts} from '../kernels/backend_capacity';
import {stepKernelsReady} from '../kernels/step_kernels';
import {setArenaOf, weightArenaFor, withWeightArena} from '../kernels/weight_arena';
import type {BuiltKerasHubModel} from '../hub_models/build';
import type {HubWeightReader, KerasHubFamily} from '../hub_models/family';
import {isObject} from '../layers/engine/json_object';
import {isDisposed, shareLayers} from '../layers/engine/shared_layers';
import type {Tokenizer} from '../tokenizers/tokenizer';
import type {TokenizerSplit} from '../tokenizers/byte_pair';
import {MAX_JSON_BYTES} from './keras_file';
import {
  KerasHubPreprocessor,
  kerasFileConfigs,
  parsePresetJson,
  preprocessorOf,
  presetConfigs,
} from './keras_hub_preset_configs';
import type {PresetConfigs} from './keras_hub_preset_configs';
import {tokenizerOf} from './keras_hub_preset_tokenizer';
import {
  checkImpliedSize,
  closeWeights,
  configsFromWeights,
  declaredElements,
  hubWeightReaders,
  openWeights,
} from './keras_hub_preset_weights';
import {
  failPreset as fail,
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
export type {KerasHubPreprocessor} from './keras_hub_preset_configs';

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
  /**
   * `'int8'`: a float32 preset becomes an int8 model as it loads (Keras' `quantize("int8")`:
   * every Dense, EinsumDense and embedding table that takes it), each weight quantized while it
   * streams in from its file: the float32 model is never held (peak: the int8 model and one float
   * weight). An int8 preset loads as int8 without it (and refuses it). `'int4'`: likewise, Keras'
   * `quantize("int4")` (grouped, block 128, with zero points: ops/int4.ts).
   */
  quantize?: 'int8' | 'int4';
}

type Obj = JsonObject;

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

interface Built {
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

function buildModel(
  cls: string,
  config: Obj,
  weights: Map<string, HubWeightReader>,
  quantize: 'int8' | 'int4' | undefined,
) {
  try {
    return buildKerasHubParts(cls, config, weights, {quantize});
  } catch (e) {
    fail((e as Error).message);
  }
}

/**
 * A keras-hub preset (a `save_to_preset` folder or a keras-hub `.keras` file) read as one
 * pipeline, each step once: (1) the sources opened (`openPreset`, by the caller); (2) the
 * configs read (`kerasFileConfigs` / `presetConfigs`, keras_hub_preset_configs.ts); (3) the
 * weights files opened (declared sizes only: `openWeights`, keras_hub_preset_weights.ts); (4) the
 * implied size checked by the family's own formula (`checkImpliedSize`); (5) the family built and
 * its weights streamed from their files into its variables (`hubWeightReaders`,
 * `buildKerasHubParts`); then the caller makes the tokenizer (keras_hub_preset_tokenizer.ts) and
 * preprocessor (`loadKerasHubPreset`).
 */
async function load(opened: Opened, options: LoadKerasHubPresetOptions): Promise<Built> {
  const {files} = opened;
  const read = opened.kerasFile ? await kerasFileConfigs(files) : await presetConfigs(files);
  const datasets = await openWeights(opened, read);
  let parts: ReturnType<typeof buildModel>;
  let configs: PresetConfigs;
  try {
    configs = configsFromWeights(read, datasets, files.label);
    const declared = declaredElements(datasets);
    checkImpliedSize(
      configs.family,
      configs.sizedClass,
      configs.backboneConfig,
      declared,
      files.label,
    );
    // before any weight is allocated: the backend can hold them
    // (quantized while loading: the kernels and tables, 2-D and up, as int8, or as int4 bytes)
    const halve = (shape: number[]) => [Math.ceil(shape.reduce((p, x) => p * x, 1) / 2)];
    checkWeightsFit(
      'loadKerasHubPreset',
      files.label,
      weightCounts(
        datasets.map(({dataset: d}) =>
          options.quantize != null && d.shape.length >= 2
            ? {...d, dtype: 'bool', shape: options.quantize === 'int4' ? halve(d.shape) : d.shape}
            : d,
        ),
      ),
    );
    // the weights stream from their files into the model's variables as it is bound: on cpu
    // and tfjs-node into a weight arena, where the compiled step reads them without a copy
    // (quantized while loading: the quantizer makes the tensors)
    const readers = hubWeightReaders(datasets, options.onProgress);
    const arena =
      options.quantize == null ? weightArenaFor(datasets.map(({dataset: d}) => d)) : null;
    if (arena != null) await stepKernelsReady(); // the step module's base: where the arena starts
    const build = () => buildModel(configs.className, configs.json, readers, options.quantize);
    parts = arena == null ? build() : withWeightArena(arena, build);
    if (arena != null && arena.held > 0) setArenaOf(parts.model, arena);
  } finally {
    closeWeights(datasets);
  }
  return {
    parts,
    className: configs.className,
    family: configs.family,
    backbone: configs.className === configs.family.backbone ? parts.model : null,
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
  const quantize = (options as LoadKerasHubPresetOptions).quantize;
  if (quantize !== undefined && quantize !== 'int8' && quantize !== 'int4') {
    fail(
      `expected options.quantize to be 'int8' or 'int4' (or left out), received ${JSON.stringify(quantize)}`,
    );
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
    // keras-hub's packer adds no start token where the tokenizer has none (Qwen's: start_value None)
    const startless = preprocessor != null && tokenizer != null && tokenizer.startTokenId == null;
    return presetOf(
      built,
      tokenizer,
      startless ? {...preprocessor, addStartToken: false} : preprocessor,
    );
  } catch (e) {
    built.parts.model.dispose();
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
  const {model} = built.parts;
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
    const config = parsePresetJson(
      await files.read('config.json', MAX_JSON_BYTES),
      `${label}/config.json`,
    );
    if (!isKerasHubObject(config)) return null;
    const kerasFile = source instanceof Uint8Array;
    return (await load({files, kerasFile}, options)).parts.model;
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
