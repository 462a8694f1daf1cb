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
import {readKeras3Weights} from './keras_file';
import type {PresetConfigs} from './keras_hub_preset_configs';
import {failPreset, Opened} from './keras_hub_sources';
import {writeWeight} from './load_in_place';

type Obj = JsonObject;

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
export function declaredElements(readers: readonly Hdf5Reader[]): number {
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

/** The weights files of a preset, opened (their declared sizes read, no value). */
export interface PresetWeights {
  sources: Array<{readers: Hdf5Reader[]; prefix: string}>;
}

/**
 * Step 3: the weights files, opened: a `.keras` file's by its own paths; a preset's
 * model.weights under the task's backbone folder when there is a task, and task.weights.
 */
export async function openWeights(opened: Opened, configs: PresetConfigs): Promise<PresetWeights> {
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
