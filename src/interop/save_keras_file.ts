/** Node entry of saveKerasFile: a given path is written (atomically: a temporary file renamed). */
import * as fs from 'fs';
import * as path from 'path';

import type {LayersModel} from '@tensorflow/tfjs-layers';

import {kerasFileBytes, SaveKerasFileOptions} from './keras_file_save';

function fail(message: string): never {
  throw new Error(`saveKerasFile: ${message}`);
}

/** Refuses a path that is not a string, names a folder, or lies in a folder that does not exist. */
async function checkTarget(file: unknown): Promise<void> {
  if (typeof file !== 'string' || file === '') {
    fail(
      `expected a file path (a non-empty string), received ${JSON.stringify(file) ?? typeof file}`,
    );
  }
  const st = await fs.promises.stat(file).catch(() => null);
  if (st?.isDirectory()) fail(`expected a file path, received the folder ${file}`);
  const dir = path.dirname(path.resolve(file));
  const parent = await fs.promises.stat(dir).catch(() => null);
  if (!parent?.isDirectory()) fail(`cannot write ${file}: the folder ${dir} does not exist`);
}

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
  if (file != null) await checkTarget(file);
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
