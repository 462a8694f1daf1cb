/**
 * Steps 3 to 5 of loading a keras-hub preset (keras_hub_preset.ts), its weights: the weights files
 * opened (their declared sizes, no value read), the size the backbone's config implies checked
 * against them by the family's own formula, and a reader of each dataset that writes its values
 * straight into the variable the family binds it to.
 */
import type {JsonObject} from '../layers/engine/contract';
import {snakeCase} from '../layers/engine/contract';
import {impliedValues} from '../hub_models/family';
import type {HubWeightReader, KerasHubFamily} from '../hub_models/family';
import {Hdf5Reader} from '../io/hdf5_datasets';
import type {Hdf5Dataset} from '../io/hdf5_datasets';
import {readKeras3Weights} from './keras_file';
import type {PresetConfigs} from './keras_hub_preset_configs';
import {failPreset, Opened} from './keras_hub_sources';
import {writeWeight} from './load_in_place';

type Obj = JsonObject;

/** One weight of a preset's weights files: its path and dataset (declared, no value read). */
export interface PresetDataset {
  /** Its Keras 3 path (`layers/dense/vars/0`), under the model's folder for a task's backbone. */
  name: string;
  reader: Hdf5Reader;
  dataset: Hdf5Dataset;
}

/**
 * Every weight of a preset's datasets by path, as readers: nothing is read here. Binding the
 * model writes each dataset's values from its file straight into its variable (`writeWeight`,
 * load_in_place.ts: the variable's own memory where the backend allows), one weight at a time, so
 * that the weights are never held twice (the file and the model, no map of every weight's values
 * between). Reports progress over the bytes written, from 0 (now).
 */
export function hubWeightReaders(
  datasets: readonly PresetDataset[],
  onProgress?: (fraction: number) => void,
): Map<string, HubWeightReader> {
  const total = datasets.reduce((n, d) => n + d.dataset.bytes, 0);
  const out = new Map<string, HubWeightReader>();
  onProgress?.(0);
  if (total === 0) onProgress?.(1);
  let at = 0;
  for (const {name, reader, dataset} of datasets) {
    const {shape, dtype} = dataset;
    out.set(name, {
      shape,
      dtype,
      read() {
        const bytes = new Uint8Array(dataset.bytes);
        reader.copy(dataset, bytes, 0);
        if (dtype === 'bool') return new Int8Array(bytes.buffer);
        return dtype === 'int32' ? new Int32Array(bytes.buffer) : new Float32Array(bytes.buffer);
      },
      readInto(out) {
        reader.copy(dataset, out, 0);
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

/**
 * Step 3b: the configs as the family reads them from the weights files (`configFromWeights`: an
 * option keras-hub leaves out of the config that its weights decide, such as keras-hub 0.32's
 * Llama `tie_word_embeddings`), the note said once (console.warn); the configs as they are when
 * the family reads nothing. A config that no reading fits is refused with the family's reason.
 */
export function configsFromWeights(
  configs: PresetConfigs,
  datasets: readonly PresetDataset[],
  label: string,
): PresetConfigs {
  const {family} = configs;
  const read = family.configFromWeights;
  if (read == null) return configs;
  const isTask = configs.className !== family.backbone;
  const prefix = isTask ? `layers/${snakeCase(family.backbone)}/` : '';
  const shapes = new Map<string, readonly number[]>();
  for (const d of datasets) {
    if (d.name.startsWith(prefix)) shapes.set(d.name.slice(prefix.length), d.dataset.shape);
  }
  const complete = (config: Obj) => {
    try {
      return read(config, shapes);
    } catch (e) {
      failPreset(`${label}: ${(e as Error).message}`);
    }
  };
  const sized = complete(configs.backboneConfig);
  // the built class's own copy of the backbone config (task.json's, a .keras file's)
  const inner = configs.json.config as Obj;
  const built = isTask ? ((inner.backbone as Obj).config as Obj) : inner;
  const completed = complete(built);
  if (sized == null && completed == null) return configs;
  console.warn(`loadKerasHubPreset: ${label}: ${(completed ?? sized)?.note}`);
  const builtConfig = completed?.config ?? built;
  const json = isTask
    ? {
        ...configs.json,
        config: {...inner, backbone: {...(inner.backbone as Obj), config: builtConfig}},
      }
    : {...configs.json, config: builtConfig};
  return {...configs, json, backboneConfig: sized?.config ?? configs.backboneConfig};
}

/** Closes the files the datasets' readers read by range (each reader once). */
export function closeWeights(datasets: readonly PresetDataset[]): void {
  for (const reader of new Set(datasets.map((d) => d.reader))) reader.close();
}

/**
 * The values the datasets declare, from their shapes (nothing read), an upper bound: an int8
 * dataset counts twice, as it may hold int4 values two to a byte.
 */
export const declaredElements = (datasets: readonly PresetDataset[]): number =>
  datasets.reduce(
    (n, d) => n + d.dataset.shape.reduce((a, x) => a * x, 1) * (d.dataset.dtype === 'bool' ? 2 : 1),
    0,
  );

/**
 * Refuses a config that implies far more weights than the files declare, before the model (whose
 * weights the config sizes) is built: the family's own formula (its `weightTerms`, a lower bound
 * of its weights). A config the family's checks refuse is left to building, which says why.
 */
export function checkImpliedSize(
  family: KerasHubFamily,
  cls: string,
  backbone: Obj,
  declared: number,
  label: string,
): void {
  const implied = impliedValues(family, backbone);
  if (implied != null && !(implied <= declared)) {
    failPreset(
      `${label}: the ${cls} config implies at least ${implied} weight values, but its weights ` +
        `files declare ${declared}; refused before building the model`,
    );
  }
}

/**
 * Step 3: the weights files, opened, and their datasets listed once (the optimizer's left out): a
 * `.keras` file's by its own paths; a preset's model.weights under the task's backbone folder
 * when there is a task, and task.weights.
 */
export async function openWeights(
  opened: Opened,
  configs: PresetConfigs,
): Promise<PresetDataset[]> {
  const {files} = opened;
  const isTask = configs.className !== configs.family.backbone;
  const sources: Array<[Hdf5Reader[], string]> = [];
  if (opened.kerasFile) {
    sources.push([await readKeras3Weights(files), '']);
  } else {
    const prefix = isTask ? `layers/${snakeCase(configs.family.backbone)}/` : '';
    // read by range where the files allow it (Node's folders): the values go from the file to
    // the variables, never all held in memory (the readers keep the files open: closeWeights)
    sources.push([await readKeras3Weights(files, 'model.weights', true), prefix]);
    try {
      if (
        isTask &&
        ((await files.has('task.weights.h5')) || (await files.has('task.weights.json')))
      ) {
        sources.push([await readKeras3Weights(files, 'task.weights', true), '']);
      }
    } catch (e) {
      for (const [readers] of sources) readers.forEach((r) => r.close());
      throw e;
    }
  }
  return sources.flatMap(([readers, prefix]) =>
    readers.flatMap((reader) =>
      reader
        .datasetPaths('/', (p) => p === 'optimizer')
        .map((p) => ({name: prefix + p, reader, dataset: reader.dataset(p)})),
    ),
  );
}
