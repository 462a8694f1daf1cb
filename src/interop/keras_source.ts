/**
 * `loadKerasModel` in browsers (and the part of it Node shares): the source is a URL, the bytes
 * of a `.keras` / `.h5` file (ArrayBuffer, Uint8Array, Blob, File), or an IOHandler of a
 * converted model. Local paths are the Node entry's (load_keras_model.ts).
 */
import type * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {loadKerasModel as loadConverted} from './keras';
import type {LoadKerasModelOptions} from './keras_file';
import {fail} from './keras_json';

export type {LoadKerasModelOptions} from './keras_file';

/** What `loadKerasModel` takes. */
export type KerasModelSource = string | tf.io.IOHandler | ArrayBuffer | Uint8Array | Blob;

/** A URL (or path) naming a Keras file rather than a converted model.json, by its extension. */
export function isKerasFileName(url: string): boolean {
  const path = url.split(/[?#]/)[0].toLowerCase();
  return path.endsWith('.keras') || path.endsWith('.h5') || path.endsWith('.hdf5');
}

/** Loads the artifacts of a Keras file with the converted route's Keras semantics. */
export function loadArtifacts(artifacts: tf.io.ModelArtifacts): Promise<LayersModel> {
  return loadConverted({load: async () => artifacts});
}

/**
 * The artifacts of a `.keras` / `.h5` file's bytes. The reader (keras_file.ts, with jsfive and
 * fflate behind it) is imported on first use, so a bundle that splits chunks keeps it out of the
 * code of a page that only builds layers.
 */
async function bytesArtifacts(
  bytes: Uint8Array,
  label: string,
  options: LoadKerasModelOptions,
): Promise<tf.io.ModelArtifacts> {
  const {kerasBytesArtifacts} = await import('./keras_file');
  return kerasBytesArtifacts(bytes, label, options);
}

/**
 * The model of a `.keras` / `.h5` file's bytes: a keras-hub task or backbone (config.json's class
 * is keras-hub's) built by keras_hub_preset.ts, else the converter's route.
 */
export async function modelOfBytes(
  bytes: Uint8Array,
  label: string,
  options: LoadKerasModelOptions,
): Promise<LayersModel> {
  const {kerasHubModelOf} = await import('./keras_hub_preset');
  const hub = await kerasHubModelOf(bytes, label, options);
  return hub ?? loadArtifacts(await bytesArtifacts(bytes, label, options));
}

async function fetchBytes(url: string): Promise<Uint8Array> {
  let response: Response;
  try {
    response = await fetch(url);
  } catch (e) {
    fail(`cannot fetch ${url}: ${(e as Error).message}`);
  }
  if (!response.ok) {
    fail(
      `fetching ${url}: expected status 200, received ${response.status} ${response.statusText}`,
    );
  }
  return new Uint8Array(await response.arrayBuffer());
}

function isBlob(x: unknown): x is Blob {
  return typeof Blob !== 'undefined' && x instanceof Blob;
}

/**
 * Loads a Keras model: a `.keras` file (Keras 3) or a `.h5` full model (tf-keras 2), from a URL
 * or from its bytes, or a model converted by `tensorflowjs_converter` (a model.json URL or an
 * IOHandler).
 *
 * ```js
 * const model = await loadKerasModel('https://example.com/m.keras');
 * const model = await loadKerasModel(input.files[0]);  // a File from <input type=file>
 * ```
 */
export async function loadKerasModel(
  source: KerasModelSource,
  options: LoadKerasModelOptions = {},
): Promise<LayersModel> {
  if (source instanceof Uint8Array) {
    return modelOfBytes(source, 'the bytes given', options);
  }
  if (source instanceof ArrayBuffer) {
    return modelOfBytes(new Uint8Array(source), 'the bytes given', options);
  }
  if (isBlob(source)) {
    const name = (source as {name?: unknown}).name;
    const label = typeof name === 'string' && name !== '' ? name : 'the Blob given';
    const bytes = new Uint8Array(await source.arrayBuffer());
    return modelOfBytes(bytes, label, options);
  }
  if (typeof source === 'string' && /^https?:\/\//i.test(source) && isKerasFileName(source)) {
    return modelOfBytes(await fetchBytes(source), source, options);
  }
  if (typeof source === 'string' || (typeof source === 'object' && source != null)) {
    return loadConverted(source as string | tf.io.IOHandler);
  }
  fail(
    'expected a path, a URL, the bytes of a .keras / .h5 file (ArrayBuffer, Uint8Array, Blob) ' +
      `or an IOHandler, received ${source === null ? 'null' : typeof source}`,
  );
}
