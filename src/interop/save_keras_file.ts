/** Node entry of saveKerasFile: a given path is written (atomically: a temporary file renamed). */
import * as fs from 'fs';
import * as path from 'path';

import type {LayersModel} from '@tensorflow/tfjs-layers';

import {kerasFileBytes, SaveKerasFileOptions} from './keras_file_save';

function fail(message: string): never {
  throw new Error(`saveKerasFile: ${message}`);
}

/** What a path names, for messages (lstat / stat's kinds other than file, folder and link). */
function kindOf(st: fs.Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/**
 * The file to write for `file`: `file` itself, or the file a symlink there points to (written
 * through, as Keras' `model.save` writes through a link). Refuses a path that is not a string,
 * names a folder, a FIFO, a socket or a device (renaming over it would replace it), a dangling
 * link, a name not ending in `.keras` (`keras.saving.load_model` reads no other), or lies in a
 * folder that does not exist.
 */
async function checkTarget(file: unknown): Promise<string> {
  if (typeof file !== 'string' || file === '') {
    fail(
      `expected a file path (a non-empty string), received ${JSON.stringify(file) ?? typeof file}`,
    );
  }
  let target = file;
  const link = await fs.promises.lstat(file).catch(() => null);
  if (link?.isSymbolicLink()) {
    const real = await fs.promises.realpath(file).catch(() => null);
    if (real == null) fail(`cannot write ${file}: it is a symlink to a path that does not exist`);
    target = real;
  }
  const st = await fs.promises.stat(target).catch(() => null);
  if (st?.isDirectory()) fail(`expected a file path, received the folder ${file}`);
  if (st != null && !st.isFile()) {
    fail(`expected a path of a regular file, received ${file}, ${kindOf(st)}; nothing was written`);
  }
  if (!target.endsWith('.keras')) {
    fail(
      `expected a path ending in .keras (keras.saving.load_model reads no other name), ` +
        `received ${file}`,
    );
  }
  const dir = path.dirname(path.resolve(target));
  const parent = await fs.promises.stat(dir).catch(() => null);
  if (!parent?.isDirectory()) fail(`cannot write ${file}: the folder ${dir} does not exist`);
  return target;
}

/** Why the system refused a write, in words, by its error code. */
const WRITE_REFUSALS: Record<string, string> = {
  ENOENT: 'does not accept new files',
  EACCES: 'denies permission to write in it',
  EPERM: 'does not permit writing in it',
  EROFS: 'is on a read-only file system',
  ENOSPC: 'has no space left on its device',
  EDQUOT: 'is over its disk quota',
  ENOTDIR: 'lies under a path that is not a folder',
};

/**
 * The error of a failed write: the user's path and the folder's refusal (the system's message
 * names the temporary file, which the user never asked for).
 */
function writeError(file: string, e: unknown): Error {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  const dir = path.dirname(path.resolve(file));
  const why =
    code != null && WRITE_REFUSALS[code] != null
      ? `the folder ${dir} ${WRITE_REFUSALS[code]} (${code})`
      : `the system refused it (${code ?? String(e)})`;
  return new Error(
    `saveKerasFile: could not write ${file}: ${why}; expected a writable path in a folder that ` +
      'accepts new files (the file is written beside the target, then renamed to it)',
  );
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
  const target = file != null ? await checkTarget(file) : null;
  const bytes = await kerasFileBytes(model, options);
  if (file != null && target != null) {
    const temporary = path.join(
      path.dirname(target),
      `.${path.basename(target)}.${process.pid}.tmp`,
    );
    try {
      await fs.promises.writeFile(temporary, bytes);
      await fs.promises.rename(temporary, target);
    } catch (e) {
      throw writeError(file, e);
    } finally {
      await fs.promises.rm(temporary, {force: true});
    }
  }
  return bytes;
}
