/**
 * Reading a model's weights without trusting its model.json: every path must resolve (symlinks
 * followed) to a regular file inside the model folder, no file twice, and the files' sizes must
 * add up to exactly what the manifest declares, all checked before a byte is read. A recorded
 * SHA-256 picks the weights that belong to the JSON (see atomic_save.ts).
 */
import * as fs from 'fs';
import * as path from 'path';

import type * as tf from '@tensorflow/tfjs-core';

import {sha256} from './atomic_save';
import {isInside} from './paths';
import {entryBytes} from './weight_bytes';

function fail(message: string): never {
  throw new Error(`fileSystem: ${message}`);
}

/** Checks the manifest's form, returning its groups typed. */
export function checkManifest(manifest: unknown, modelJson: string): tf.io.WeightsManifestConfig {
  if (!Array.isArray(manifest)) {
    fail(
      `${modelJson}: expected weightsManifest to be a list of groups, received ${typeof manifest}`,
    );
  }
  manifest.forEach((g, i) => {
    const group = g as {paths?: unknown; weights?: unknown};
    if (group == null || typeof group !== 'object')
      fail(`${modelJson}: weights group ${i} is not an object`);
    if (!Array.isArray(group.paths) || !group.paths.every((p) => typeof p === 'string')) {
      fail(
        `${modelJson}: expected the paths of weights group ${i} to be a list of file names, ` +
          `received ${JSON.stringify(group.paths)}`,
      );
    }
    if (!Array.isArray(group.weights)) {
      fail(
        `${modelJson}: expected the weights of group ${i} to be a list, received ${JSON.stringify(group.weights)}`,
      );
    }
  });
  return manifest as tf.io.WeightsManifestConfig;
}

/** A manifest path as a real file path inside the folder's real path, or an error. */
async function resolveWeightsFile(root: string, dir: string, relative: string): Promise<string> {
  if (relative.length === 0 || path.isAbsolute(relative) || /^[a-z][a-z0-9+.-]*:/i.test(relative)) {
    fail(`refusing weights path ${JSON.stringify(relative)}: expected a path relative to ${dir}`);
  }
  const joined = path.resolve(dir, relative);
  if (!isInside(dir, joined)) {
    fail(`refusing weights path ${JSON.stringify(relative)}: it leaves the model folder ${dir}`);
  }
  let real: string;
  try {
    real = await fs.promises.realpath(joined);
  } catch (e) {
    fail(`cannot read weights file ${joined}: ${(e as Error).message}`);
  }
  if (!isInside(root, real)) {
    fail(
      `refusing weights path ${JSON.stringify(relative)}: it is a link to ${real}, outside the model folder ${dir}`,
    );
  }
  const st = await fs.promises.stat(real);
  if (!st.isFile()) {
    fail(`refusing weights path ${JSON.stringify(relative)}: ${real} is not a regular file`);
  }
  return real;
}

async function readWhole(file: string, size: number): Promise<Uint8Array> {
  const handle = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
  try {
    const out = new Uint8Array(size);
    let at = 0;
    while (at < size) {
      const {bytesRead} = await handle.read(out, at, size - at, at);
      if (bytesRead === 0) fail(`${file} is shorter than the ${size} bytes it had when checked`);
      at += bytesRead;
    }
    return out;
  } finally {
    await handle.close();
  }
}

/**
 * The weights of a manifest, concatenated in manifest order.
 *
 * @param expectedSha256 the JSON's record of the weights' checksum, if any; on a mismatch the
 *   `<file>.prev` left by an interrupted save is used when it matches.
 */
export async function readWeights(
  dir: string,
  manifest: tf.io.WeightsManifestConfig,
  modelJson: string,
  expectedSha256: string | null,
): Promise<{specs: tf.io.WeightsManifestEntry[]; data: ArrayBuffer}> {
  const root = await fs.promises.realpath(dir);
  const specs = manifest.flatMap((g) => g.weights);
  const declared = specs.reduce((n, s) => n + entryBytes(s), 0);
  const files: Array<{file: string; size: number}> = [];
  const seen = new Set<string>();
  for (const relative of manifest.flatMap((g) => g.paths)) {
    const file = await resolveWeightsFile(root, dir, relative);
    if (seen.has(file)) fail(`${modelJson} lists the weights file ${relative} more than once`);
    seen.add(file);
    files.push({file, size: (await fs.promises.stat(file)).size});
  }
  const total = files.reduce((n, f) => n + f.size, 0);
  if (total !== declared) {
    fail(
      `${modelJson} declares ${declared} bytes of weights, but its weights files hold ${total} ` +
        `(${files.map((f) => `${path.basename(f.file)}: ${f.size}`).join(', ') || 'no file'})`,
    );
  }
  const read = async (list: typeof files) => {
    const data = new Uint8Array(total);
    let at = 0;
    for (const f of list) {
      data.set(await readWhole(f.file, f.size), at);
      at += f.size;
    }
    return data;
  };
  let data = await read(files);
  if (expectedSha256 != null && sha256(data) !== expectedSha256) {
    // an interrupted save: the weights were replaced but not yet the JSON
    const prev = files.length === 1 ? `${files[0].file}.prev` : null;
    const st = prev ? await fs.promises.lstat(prev).catch(() => null) : null;
    if (prev == null || st == null || !st.isFile() || st.size !== total) {
      fail(
        `the weights in ${dir} do not match ${modelJson} (checksum), and no earlier weights were kept`,
      );
    }
    data = await read([{file: prev, size: total}]);
    if (sha256(data) !== expectedSha256)
      fail(`the weights in ${dir} do not match ${modelJson} (checksum)`);
  }
  return {specs, data: data.buffer as ArrayBuffer};
}
