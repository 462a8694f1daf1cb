/**
 * `.keras` files written in JavaScript: a model built with this package (or loaded by it) as the
 * zip Keras 3 saves (`metadata.json`, `config.json`, `model.weights.h5`, stored), which
 * `keras.saving.load_model` reads with keras-hub imported where the model uses its layers. The
 * config and the weight paths are those of {@link toKeras3Artifacts} (the Keras 3 export); the
 * weights file is written by io/hdf5_writer.ts and the zip by io/zip_writer.ts.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {Hdf5Dtype, Hdf5Group, writeHdf5} from '../io/hdf5_writer';
import {writeZip} from '../io/zip_writer';
import {contractOf} from '../layers/engine/contract';
import {mergedNamedWeights} from '../layers/core/lora_model';
import {Keras3ExportOptions, toKeras3Artifacts} from './keras3_export';

/** The Keras version the config is written for (metadata.json's keras_version). */
export const KERAS_FILE_VERSION = '3.15.1';

/** Options of {@link saveKerasFile}. */
export interface SaveKerasFileOptions extends Keras3ExportOptions {
  /** The date recorded in metadata.json and the zip entries; default now. */
  date?: Date;
}

function fail(message: string): never {
  throw new Error(`saveKerasFile: ${message}`);
}

const HDF5_TYPES: Partial<Record<tf.DataType, Hdf5Dtype>> = {
  float32: 'float32',
  int32: 'int32',
  bool: 'int8',
};

/** Keras' `date_saved`: `%Y-%m-%d@%H:%M:%S`, in UTC (Keras writes local time) so that a file does not depend on the time zone. */
function kerasDate(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return (
    `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())}@` +
    `${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`
  );
}

/**
 * tfjs-layers' classes that Keras 3 has under the same name (tfjs' abstract classes left out;
 * checked against Keras 3.15's `keras.layers`, which has no ThresholdedReLU, RandomHeight or
 * RandomWidth).
 */
const TFJS_KERAS_CLASSES = new Set(
  (
    'Activation Add AlphaDropout Average AveragePooling1D AveragePooling2D AveragePooling3D ' +
    'BatchNormalization CategoryEncoding CenterCrop Concatenate Conv1D Conv2D ' +
    'Conv2DTranspose Conv3D Conv3DTranspose Cropping2D Dense DepthwiseConv2D Dot ' +
    'Dropout ELU EinsumDense Embedding Flatten GaussianDropout GaussianNoise ' +
    'GlobalAveragePooling1D GlobalAveragePooling2D GlobalMaxPooling1D GlobalMaxPooling2D ' +
    'InputLayer LayerNormalization LeakyReLU Masking MaxPooling1D MaxPooling2D MaxPooling3D ' +
    'Maximum Minimum MultiHeadAttention Multiply PReLU Permute ReLU ' +
    'RepeatVector Rescaling Reshape Resizing SeparableConv2D Softmax SpatialDropout1D ' +
    'UpSampling2D ZeroPadding2D'
  ).split(' '),
);

/**
 * tfjs' classes Keras 3.15 has but cannot load as this writer lays them out: the recurrent layers'
 * weights live under their cell in Keras 3 ("Layer 'lstm' expected 0 variables, but received 3"),
 * and the wrappers' inner layer is a nested config Keras deserializes differently ("could not be
 * deserialized").
 */
const NOT_WRITTEN_AS_KERAS = new Set(
  'Bidirectional ConvLSTM2D GRU LSTM SimpleRNN TimeDistributed'.split(' '),
);

/** tfjs activations that Keras 3 names alike but computes otherwise. */
const OTHER_ACTIVATIONS: Readonly<Record<string, string>> = {
  hardSigmoid:
    "tfjs' hardSigmoid is clip(0.2 x + 0.5, 0, 1); Keras 3's hard_sigmoid is relu6(x + 3) / 6",
};

/** Refuses what is not a layers model, and a layer of a class Keras has none for. */
function checkSavable(model: unknown): void {
  if (
    model == null ||
    typeof model !== 'object' ||
    typeof (model as LayersModel).save !== 'function' ||
    !Array.isArray((model as LayersModel).layers)
  ) {
    fail(
      'expected a tf.LayersModel (a functional tf.model), received ' +
        (model === null ? 'null' : typeof model),
    );
  }
  const named = model as LayersModel;
  for (const [what, name] of [
    ['model', named.name],
    ...named.layers.map((l) => ['layer', l.name]),
  ]) {
    checkKerasName(what, name);
  }
  for (const layer of named.layers) {
    const cls = layer.getClassName();
    if (NOT_WRITTEN_AS_KERAS.has(cls)) {
      fail(
        `layer '${layer.name}' is a ${cls}, which this writer does not lay out as Keras 3 does ` +
          '(recurrent layers keep their weights under a cell; wrappers nest their layer); Keras ' +
          'could not load the file back. Save the model with model.save (tfjs) instead',
      );
    }
    const activation = (layer.getConfig() as {activation?: unknown}).activation;
    if (typeof activation === 'string' && OTHER_ACTIVATIONS[activation] != null) {
      fail(
        `layer '${layer.name}' uses the activation '${activation}', which Keras 3 would load as ` +
          `another function (${OTHER_ACTIVATIONS[activation]}): its predictions would differ`,
      );
    }
    if (!TFJS_KERAS_CLASSES.has(cls) && contractOf(cls) == null && !isModelClass(cls)) {
      fail(
        `layer '${layer.name}' is a ${cls}, which Keras has no class for (expected tfjs' ` +
          "built-in layers or this package's); Keras could not load the file back",
      );
    }
  }
}

/**
 * Refuses a name Keras 3.15 refuses: `keras.Operation` (every layer, the model too) takes a
 * string without `/` (its weight paths are `/`-separated), else load_model fails.
 */
function checkKerasName(what: string, name: string): void {
  if (typeof name !== 'string' || name.includes('/')) {
    fail(
      `the ${what} name ${JSON.stringify(name)} holds '/', which Keras 3 refuses in a name ` +
        '(keras.Operation: "Argument `name` must be a string and cannot contain character `/`"); ' +
        `expected a name without '/': rename the ${what} before saving`,
    );
  }
}

/** A nested model (refused, with its own message, by the export). */
const isModelClass = (cls: string) =>
  cls === 'Model' || cls === 'Functional' || cls === 'Sequential';

/** The model's save artifacts (topology, weight specs and bytes), as `model.save` gives them. */
async function artifactsOf(model: LayersModel): Promise<tf.io.ModelArtifacts> {
  // LoRA's adapters merged into their kernels, A and B left out, as Keras saves them
  const merged = mergedNamedWeights(model);
  if (merged != null) {
    try {
      const {data, specs} = await tf.io.encodeWeights(merged.named);
      return {
        modelTopology: model.toJSON(null, false) as tf.io.ModelArtifacts['modelTopology'],
        weightSpecs: specs,
        weightData: data,
        format: 'layers-model',
      };
    } finally {
      merged.dispose();
    }
  }
  let saved: tf.io.ModelArtifacts | null = null;
  await model.save(
    tf.io.withSaveHandler(async (a) => {
      saved = a;
      return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
    }),
  );
  return saved ?? fail('the model gave no artifacts to save');
}

/** int32 values (little-endian) as int8 bytes; a value outside [-128, 127] is an error. */
function int8Bytes(int32: Uint8Array, name: string): Uint8Array {
  const view = new DataView(int32.buffer, int32.byteOffset, int32.byteLength);
  const out = new Uint8Array(int32.length / 4);
  for (let i = 0; i < out.length; i++) {
    const v = view.getInt32(i * 4, true);
    if (v < -128 || v > 127) {
      fail(`the int8 weight '${name}' holds ${v} at index ${i}; expected values in [-128, 127]`);
    }
    out[i] = v & 0xff;
  }
  return out;
}

/** The weights of Keras 3 artifacts as HDF5 groups: each name `a/b/c` a dataset `c` in `a/b`. */
function weightsTree(artifacts: tf.io.ModelArtifacts): Hdf5Group {
  const specs = artifacts.weightSpecs ?? [];
  const raw = artifacts.weightData;
  const data = new Uint8Array(
    raw == null
      ? new ArrayBuffer(0)
      : tf.io.concatenateArrayBuffers(Array.isArray(raw) ? raw : [raw]),
  );
  const root: Hdf5Group = {};
  let offset = 0;
  for (const spec of specs) {
    const dtype = HDF5_TYPES[spec.dtype];
    if (dtype == null || spec.quantization != null) {
      fail(
        `weight '${spec.name}' is ${spec.quantization ? 'quantized ' : ''}${spec.dtype}; expected float32 or int32`,
      );
    }
    const bytes = spec.shape.reduce((n, d) => n * d, 1) * (spec.dtype === 'bool' ? 1 : 4);
    if (offset + bytes > data.length) {
      fail(`the weights hold ${data.length} bytes, fewer than their specs declare`);
    }
    // Keras 3 int8 weights: the export gives them as bytes (tfjs' one-byte dtype `bool`,
    // ops/int8.ts), or as int32; Keras stores int8
    const int8 =
      (spec.dtype === 'bool' || spec.dtype === 'int32') && spec.name.startsWith('layers/');
    const values =
      spec.dtype === 'int32' && int8
        ? int8Bytes(data.subarray(offset, offset + bytes), spec.name)
        : data.slice(offset, offset + bytes);
    const parts = spec.name.split('/');
    let group = root;
    for (const part of parts.slice(0, -1)) {
      const next = group[part] ?? (group[part] = {});
      if ('data' in next && next.data instanceof Uint8Array) {
        fail(`weight '${spec.name}' lies under another weight`);
      }
      group = next as Hdf5Group;
    }
    const leaf = parts[parts.length - 1];
    if (group[leaf] != null) fail(`weight '${spec.name}' is written twice`);
    group[leaf] = {shape: spec.shape, dtype: int8 ? 'int8' : dtype, data: values};
    offset += bytes;
  }
  return root;
}

/**
 * The bytes of a `.keras` file of `model` (Keras 3's zip: metadata.json, config.json,
 * model.weights.h5), which `keras.saving.load_model` reads, predicting what the model predicts.
 * The model must be one {@link toKeras3Artifacts} exports (a functional model of the package's
 * layers and tfjs' built-ins); its refusals are this function's.
 */
export async function kerasFileBytes(
  model: LayersModel,
  options: SaveKerasFileOptions = {},
): Promise<Uint8Array> {
  checkSavable(model);
  const {date = new Date(), ...exportOptions} = options;
  // the export's refusals (a nested model, valid lengths, ...) are this function's
  const keras3 = await toKeras3Artifacts(await artifactsOf(model), exportOptions).catch(
    (e: unknown) => {
      const message = e instanceof Error ? e.message : String(e);
      throw new Error(message.replace(/^toKeras3Artifacts: /, 'saveKerasFile: '));
    },
  );
  const text = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
  return writeZip(
    [
      {
        name: 'metadata.json',
        data: text({keras_version: KERAS_FILE_VERSION, date_saved: kerasDate(date)}),
      },
      {name: 'config.json', data: text(keras3.modelTopology)},
      {name: 'model.weights.h5', data: writeHdf5(weightsTree(keras3))},
    ],
    date,
  );
}

/**
 * Saves `model` as a `.keras` file: returns its bytes (a download in the browser) and, given a
 * path, also writes them there (Node). Keras reads it back with
 * `keras.saving.load_model('model.keras')` (and `import keras_hub` first where the model uses
 * keras-hub's layers).
 *
 * ```js
 * const bytes = await saveKerasFile(model); // Uint8Array
 * ```
 */
export async function saveKerasFile(
  model: LayersModel,
  path?: string,
  options: SaveKerasFileOptions = {},
): Promise<Uint8Array> {
  if (path != null) fail('a path is written in Node only; in the browser, save the returned bytes');
  return kerasFileBytes(model, options);
}
