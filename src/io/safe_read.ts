/**
 * Reading a model's weights without trusting its model.json: every path must resolve (symlinks
 * followed) to a regular file inside the model folder, no file twice, and the files' sizes must
 * add up to exactly what the manifest declares, all checked before a byte is read. A recorded
 * SHA-256 picks the weights that belong to the JSON (see atomic_save.ts).
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';

import type * as tf from '@tensorflow/tfjs-core';

import type {WeightsSink, WeightsTarget} from './model_folder';
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

/** One checked weights file and the size it had when checked. */
export interface WeightsFile {
  file: string;
  size: number;
}

/** The checked weights of a manifest: entries in manifest order and the files that hold them. */
export interface WeightsPlan {
  specs: tf.io.WeightsManifestEntry[];
  files: WeightsFile[];
  /** Bytes of all files together, which is also what the entries declare. */
  total: number;
}

/**
 * Checks a manifest's weights files before a byte is read: each path resolves to a regular file
 * inside the folder, no file is listed twice, and the files hold exactly the declared bytes.
 */
export async function planWeights(
  dir: string,
  manifest: tf.io.WeightsManifestConfig,
  modelJson: string,
): Promise<WeightsPlan> {
  const root = await fs.promises.realpath(dir);
  const specs = manifest.flatMap((g) => g.weights);
  const declared = specs.reduce((n, s) => n + entryBytes(s), 0);
  const files: WeightsFile[] = [];
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
  return {specs, files, total};
}

/** Bytes read from disk at a time while streaming weights. */
export const CHUNK_BYTES = 4 << 20;

/** Reads `files` in order, chunk by chunk, into `sink`; the SHA-256 of it all when asked. */
async function streamFiles(
  files: WeightsFile[],
  sink: WeightsSink,
  hash: boolean,
): Promise<string | null> {
  const digest = hash ? crypto.createHash('sha256') : null;
  const total = files.reduce((n, f) => n + f.size, 0);
  const chunk = new Uint8Array(Math.max(1, Math.min(CHUNK_BYTES, total)));
  let offset = 0;
  for (const {file, size} of files) {
    const handle = await fs.promises.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      let at = 0;
      while (at < size) {
        const want = Math.min(chunk.length, size - at);
        let got = 0;
        while (got < want) {
          const {bytesRead} = await handle.read(chunk, got, want - got, at + got);
          if (bytesRead === 0) {
            fail(`${file} is shorter than the ${size} bytes it had when checked`);
          }
          got += bytesRead;
        }
        const bytes = chunk.subarray(0, want);
        digest?.update(bytes);
        sink(bytes, offset + at);
        at += want;
      }
    } finally {
      await handle.close();
    }
    offset += size;
  }
  return digest == null ? null : digest.digest('hex');
}

/**
 * Streams the checked weights of `plan` into a target that `open` makes, a chunk at a time (no
 * file is held whole in memory). With a recorded checksum the target is returned only when the
 * bytes it received match it; on a mismatch the target is discarded and, for an interrupted save
 * (the weights replaced but not yet the JSON), the `<file>.prev` it left is streamed into a new
 * target, which must match too.
 */
export async function streamWeights<T extends WeightsTarget>(
  dir: string,
  plan: WeightsPlan,
  modelJson: string,
  expectedSha256: string | null,
  open: () => T | Promise<T>,
): Promise<T> {
  const attempt = async (files: WeightsFile[]): Promise<T | null> => {
    const target = await open();
    let digest: string | null;
    try {
      digest = await streamFiles(files, target.write, expectedSha256 != null);
    } catch (e) {
      target.discard();
      throw e;
    }
    if (expectedSha256 == null || digest === expectedSha256) return target;
    target.discard();
    return null;
  };
  const first = await attempt(plan.files);
  if (first != null) return first;
  const {files, total} = plan;
  const prev = files.length === 1 ? `${files[0].file}.prev` : null;
  const st = prev ? await fs.promises.lstat(prev).catch(() => null) : null;
  if (prev == null || st == null || !st.isFile() || st.size !== total) {
    fail(
      `the weights in ${dir} do not match ${modelJson} (checksum), and no earlier weights were kept`,
    );
  }
  const second = await attempt([{file: prev, size: total}]);
  if (second == null) fail(`the weights in ${dir} do not match ${modelJson} (checksum)`);
  return second;
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
  const plan = await planWeights(dir, manifest, modelJson);
  const {data} = await streamWeights(dir, plan, modelJson, expectedSha256, () => {
    const target = {
      data: new Uint8Array(plan.total),
      write: (bytes: Uint8Array, at: number) => target.data.set(bytes, at),
      discard: () => {
        target.data = new Uint8Array(0);
      },
    };
    return target;
  });
  return {specs: plan.specs, data: data.buffer as ArrayBuffer};
}
