/**
 * Step 2 of loading a keras-hub preset (keras_hub_preset.ts): what its configs say, read once. A
 * `save_to_preset` folder's config.json (the backbone), task.json, tokenizer.json and
 * preprocessor.json, or a `.keras` file's config.json (the task or the backbone, the tokenizer
 * inside it); each class checked to be one a registered family builds; the preprocessor's
 * settings with the family's defaults.
 */
import type {JsonObject} from '../layers/engine/contract';
import type {KerasHubFamily} from '../hub_models/family';
import {familyOfClass, kerasHubClassNames} from '../hub_models/registry';
import {isObject} from '../layers/engine/json_object';
import {CONFIG_JSON_LIMITS, parseBoundedJson} from '../io/bounded_json';
import {inFiles, MAX_JSON_BYTES} from './keras_file';
import {failPreset, PresetFiles} from './keras_hub_sources';
import {presetAssetFolder} from './keras_hub_preset_tokenizer';

type Obj = JsonObject;

/** keras-hub's preprocessor settings (its preprocessor.json), as `generateText` takes them. */
export interface KerasHubPreprocessor {
  /** The packed length (`sequence_length`), `generateText`'s default `maxLength`. */
  sequenceLength: number;
  /** Whether the start token is put first (`add_start_token`; BERT's packer always: true). */
  addStartToken: boolean;
  /** Whether the end token is put last (`add_end_token`; BERT's packer always: true). */
  addEndToken: boolean;
}

/** JSON of a preset's file, its size and depth checked first (bounded_json.ts). */
export function parsePresetJson(bytes: Uint8Array, what: string): unknown {
  const text = new TextDecoder('utf-8').decode(bytes);
  return parseBoundedJson(text, what, CONFIG_JSON_LIMITS, 'loadKerasHubPreset');
}

async function readJson(files: PresetFiles, name: string): Promise<Obj> {
  if (!(await files.has(name))) failPreset(`missing file ${name} in ${files.label}`);
  const json = parsePresetJson(await files.read(name, MAX_JSON_BYTES), inFiles(files.label, name));
  if (!isObject(json) || typeof json.class_name !== 'string' || !isObject(json.config)) {
    failPreset(
      `expected ${inFiles(files.label, name)} to hold a serialized object {class_name, config}`,
    );
  }
  return json;
}

/** The known keras-hub class of a serialized object, or an error listing the known ones. */
function knownClass(json: Obj, where: string): string {
  const cls = json.class_name as string;
  if (!kerasHubClassNames().includes(cls)) {
    failPreset(
      `${where} holds the class ${JSON.stringify(cls)}, which is not implemented (expected one ` +
        `of ${kerasHubClassNames().join(', ')})`,
    );
  }
  return cls;
}

/** The family of a known class (knownClass checked it). */
const familyOf = (cls: string) => familyOfClass(cls) as KerasHubFamily;

/** The preprocessor settings of a serialized keras-hub preprocessor (the family's defaults). */
export function preprocessorOf(
  json: Obj | null,
  family: KerasHubFamily,
): KerasHubPreprocessor | null {
  if (json == null) return null;
  const c = json.config as Obj;
  const length = c.sequence_length;
  if (!(typeof length === 'number' && Number.isInteger(length) && length > 0)) {
    failPreset(
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
 * What a preset's configs say, read once: the class to build, its family and configs, and the
 * tokenizer's and preprocessor's serialized objects.
 */
export interface PresetConfigs {
  /** The keras-hub class built (the task when there is one, else the backbone). */
  className: string;
  family: KerasHubFamily;
  /** The serialized object `buildKerasHubModel` is given (config.json, or task.json). */
  json: Obj;
  /** The backbone's config (the size check reads it). */
  backboneConfig: Obj;
  /** The class the size check names (a preset's config.json, or the `.keras` file's class). */
  sizedClass: string;
  tokenizerJson: Obj | null;
  /** The folder of the tokenizer's assets in the preset. */
  tokenizerFolder: string;
  preprocessorJson: Obj | null;
}

/** Step 2 of a `.keras` file: config.json is the task or the backbone, the tokenizer inside it. */
export async function kerasFileConfigs(files: PresetFiles): Promise<PresetConfigs> {
  const config = await readJson(files, 'config.json');
  const cls = knownClass(config, inFiles(files.label, 'config.json'));
  const family = familyOf(cls);
  const isTask = cls !== family.backbone;
  const inner = config.config as Obj;
  const backboneJson = isTask ? inner.backbone : config;
  if (!isObject(backboneJson) || !isObject(backboneJson.config)) {
    failPreset(
      `expected ${inFiles(files.label, 'config.json')}'s ${cls} to hold its backbone's config`,
    );
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
    tokenizerJson,
    // Keras 3 saves a layer's assets under its attribute path in the model
    tokenizerFolder: 'assets/preprocessor/tokenizer',
    preprocessorJson,
  };
}

/** Step 2 of a `save_to_preset` folder: config.json (backbone), task.json, tokenizer.json, preprocessor.json. */
export async function presetConfigs(files: PresetFiles): Promise<PresetConfigs> {
  const config = await readJson(files, 'config.json');
  const backboneCls = knownClass(config, inFiles(files.label, 'config.json'));
  const family = familyOf(backboneCls);
  if (backboneCls !== family.backbone) {
    failPreset(
      `expected ${inFiles(files.label, 'config.json')} to hold a backbone, received the task ${backboneCls}`,
    );
  }
  const task = (await files.has('task.json')) ? await readJson(files, 'task.json') : null;
  const taskCls = task == null ? null : knownClass(task, inFiles(files.label, 'task.json'));
  if (taskCls != null && familyOf(taskCls) !== family) {
    failPreset(`${files.label}: task.json's ${taskCls} does not take config.json's ${backboneCls}`);
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
    tokenizerJson,
    tokenizerFolder,
    preprocessorJson,
  };
}
