/** Node entry of saveKerasFile: a given path is written (atomically: a temporary file renamed). */
import * as fs from 'fs';
import * as path from 'path';

import type {LayersModel} from '@tensorflow/tfjs-layers';

import {kerasFileBytes, SaveKerasFileOptions} from './keras_file_save';

/**
 * Saves `model` as a `.keras` file that `keras.saving.load_model` reads; writes it to `file`
 * when given, and returns its bytes.
 *
 * ```js
 * await saveKerasFile(model, 'model.keras');
 * ```
 */
export async function saveKerasFile(
  model: LayersModel,
  file?: string,
  options: SaveKerasFileOptions = {},
): Promise<Uint8Array> {
  const bytes = await kerasFileBytes(model, options);
  if (file != null) {
    const temporary = path.join(path.dirname(file), `.${path.basename(file)}.${process.pid}.tmp`);
    try {
      await fs.promises.writeFile(temporary, bytes);
      await fs.promises.rename(temporary, file);
    } finally {
      await fs.promises.rm(temporary, {force: true});
    }
  }
  return bytes;
}
