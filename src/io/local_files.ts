/**
 * Reading a Keras file or the named files of a Keras model folder (an unzipped `.keras`, a folder
 * of Keras 3 shards) from disk, without trusting the names: a file name must be a plain name
 * inside the folder, resolve (links followed) to a regular file inside the folder's real path,
 * and be no larger than the reader allows, all checked before a byte is read.
 */
import * as fs from 'fs';
import * as path from 'path';

import {isInside} from './paths';

function fail(message: string): never {
  throw new Error(`loadKerasModel: ${message}`);
}

/** A regular file's bytes (links followed), refused above `maxBytes` before reading. */
export async function readLocalFile(file: string, maxBytes: number): Promise<Uint8Array> {
  let st: fs.Stats;
  try {
    st = await fs.promises.stat(file);
  } catch (e) {
    fail(`cannot read ${file}: ${(e as Error).message}`);
  }
  if (!st.isFile()) fail(`expected ${file} to be a regular file`);
  if (st.size > maxBytes) {
    fail(`${file} holds ${st.size} bytes, more than the ${maxBytes} allowed`);
  }
  const data = await fs.promises.readFile(file);
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/** The files of a folder, by plain names only (the shape of interop's KerasFiles). */
export function folderFiles(dir: string): {
  label: string;
  has(name: string): Promise<boolean>;
  read(name: string, maxBytes: number): Promise<Uint8Array>;
} {
  const resolve = async (name: string): Promise<string | null> => {
    if (name.length === 0 || /[/\\\0]/.test(name) || name === '..' || name === '.') {
      fail(`refusing the file name ${JSON.stringify(name)}: expected a plain name inside ${dir}`);
    }
    const joined = path.join(dir, name);
    let real: string;
    try {
      real = await fs.promises.realpath(joined);
    } catch {
      return null;
    }
    const root = await fs.promises.realpath(dir);
    if (!isInside(root, real)) {
      fail(`refusing ${joined}: it is a link to ${real}, outside the model folder ${dir}`);
    }
    return real;
  };
  return {
    label: dir,
    has: async (name) => (await resolve(name)) != null,
    read: async (name, maxBytes) => {
      const real = await resolve(name);
      if (real == null) fail(`${dir} has no file ${name}`);
      return readLocalFile(real, maxBytes);
    },
  };
}
