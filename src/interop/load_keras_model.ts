/**
 * Node entry of loadKerasModel: local paths (and file:// URLs) of `.keras` / `.h5` files, Keras
 * model folders and converted model.json folders; everything else as in browsers
 * (keras_source.ts).
 */
import * as fs from 'fs';
import * as path from 'path';

import type {LayersModel} from '@tensorflow/tfjs-layers';

import {loadKerasModel as loadConverted} from './keras';
import {checkInt4Scales} from '../layers/core/quantize_model';
import {keras3FilesArtifacts, LoadKerasModelOptions, MAX_WEIGHTS_BYTES} from './keras_file';
import {kerasHubModelOf} from './keras_hub_preset';
import {fail} from './keras_json';
import {
  isKerasFileName,
  KerasModelSource,
  loadArtifacts,
  loadKerasModel as loadAnywhere,
  modelOfBytes,
} from './keras_source';
import {fileSystem} from '../io/file_system';
import {folderFiles, readLocalFile} from '../io/local_files';

export type {LoadKerasModelOptions} from './keras_file';
export type {KerasModelSource} from './keras_source';

async function loadPath(target: string, options: LoadKerasModelOptions): Promise<LayersModel> {
  const p = path.resolve(target.replace(/^file:\/\//, ''));
  const st = await fs.promises.stat(p).catch(() => null);
  if (st == null && isKerasFileName(p)) fail(`cannot read ${p}: no such file`);
  if (st?.isDirectory()) {
    // a converted model (model.json) or a Keras 3 folder (config.json + weights)
    const has = (name: string) => fs.existsSync(path.join(p, name));
    if (!has('model.json') && has('config.json')) {
      // a keras-hub preset folder (config.json's class is keras-hub's), else a Keras 3 folder
      const hub = await kerasHubModelOf({folder: p}, p, options);
      return hub ?? loadArtifacts(await keras3FilesArtifacts(folderFiles(p), options));
    }
    if (!has('model.json')) {
      fail(
        `expected the folder ${p} to hold config.json (a Keras 3 model or keras-hub preset) or ` +
          'model.json (a converted model), received neither',
      );
    }
    return loadConverted(fileSystem(p));
  }
  if (st?.isFile() && !p.toLowerCase().endsWith('.json')) {
    return modelOfBytes(await readLocalFile(p, MAX_WEIGHTS_BYTES), p, options);
  }
  return loadConverted(fileSystem(p));
}

/**
 * Loads a Keras model: a Keras 3 `.keras` file or a tf-keras 2 `.h5` full model, read directly
 * (no converter), from a path, a URL or its bytes (ArrayBuffer, Uint8Array, Blob, File); a folder
 * holding `config.json` and Keras 3 weights (`model.weights.h5`, or `model.weights.json` and its
 * shards); a keras-hub preset folder or keras-hub `.keras` file (its task, else its backbone,
 * built by `buildKerasHubModel`; `loadKerasHubPreset` gives the tokenizer too); or a model
 * converted by `tensorflowjs_converter` (its folder, model.json path or URL, or any IOHandler).
 *
 * ```js
 * const model = await loadKerasModel('m.keras');
 * const model = await loadKerasModel('converted/model.json');
 * ```
 */
export async function loadKerasModel(
  source: KerasModelSource,
  options: LoadKerasModelOptions = {},
): Promise<LayersModel> {
  if (source === '') {
    fail(
      'expected a path, a URL, the bytes of a .keras / .h5 file (ArrayBuffer, Uint8Array, Blob) ' +
        'or an IOHandler, received an empty string',
    );
  }
  const model =
    typeof source === 'string' &&
    (source.startsWith('file://') || !/^[a-z][a-z0-9+.-]*:\/\//i.test(source))
      ? await loadPath(source, options)
      : await loadAnywhere(source, options);
  try {
    // int4 layers' scales: Keras writes positive finite ones (int8's are checked as they load)
    checkInt4Scales(model, 'loadKerasModel');
  } catch (e) {
    model.dispose();
    throw e;
  }
  return model;
}
