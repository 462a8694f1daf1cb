/** Node entry of loadKerasModel: local paths (and file:// URLs) load through fileSystem. */
import type * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {loadKerasModel as loadFrom} from './keras';
import {fileSystem} from '../io/file_system';

/**
 * Loads a Keras model converted by `tensorflowjs_converter` (tf-keras 2 and Keras 3), from a
 * folder or model.json path, a `file://` / `http(s)://` URL, or any IOHandler.
 *
 * ```js
 * const model = await loadKerasModel('converted/model.json');
 * ```
 */
export function loadKerasModel(source: string | tf.io.IOHandler): Promise<LayersModel> {
  if (
    typeof source === 'string' &&
    (source.startsWith('file://') || !/^[a-z][a-z0-9+.-]*:\/\//i.test(source))
  ) {
    return loadFrom(fileSystem(source));
  }
  return loadFrom(source);
}
