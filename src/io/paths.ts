/** Where a model lives on disk: its folder, its JSON file and its weights file. */
import * as fs from 'fs';
import * as path from 'path';

export interface ModelLocation {
  dir: string;
  modelJson: string;
  /** The weights file's name in `dir`: `weights.bin` for `model.json`, else `<name>.weights.bin`. */
  weightsName: string;
}

/** A folder (model.json inside), a `.json` path, or a `file://` URL. */
export function locate(target: string): ModelLocation {
  if (typeof target !== 'string' || target.length === 0) {
    throw new Error(
      `fileSystem: expected a directory or a model.json path, received ${JSON.stringify(target)}`,
    );
  }
  const p = path.resolve(target.replace(/^file:\/\//, ''));
  const modelJson = p.endsWith('.json') ? p : path.join(p, 'model.json');
  const base = path.basename(modelJson, '.json');
  return {
    dir: path.dirname(modelJson),
    modelJson,
    weightsName: base === 'model' ? 'weights.bin' : `${base}.weights.bin`,
  };
}

/** Whether `child` is `root` or inside it (compared by path segments, so `..x` is inside). */
export function isInside(root: string, child: string): boolean {
  const rel = path.relative(root, child);
  if (rel === '') return true;
  const first = rel.split(path.sep)[0];
  return first !== '..' && !path.isAbsolute(rel);
}

/**
 * `mkdir -p` without Node's recursive mkdir (which never returns under /proc): existing
 * ancestors are found first, then each missing folder is made, so a refusal comes at once.
 */
export async function makeFolder(dir: string): Promise<void> {
  const missing: string[] = [];
  let p = path.resolve(dir);
  for (;;) {
    try {
      const st = await fs.promises.stat(p);
      if (!st.isDirectory()) {
        throw new Error(`fileSystem: cannot save under ${dir}: ${p} is not a folder`);
      }
      break;
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw e;
      missing.unshift(p);
      const parent = path.dirname(p);
      if (parent === p) break;
      p = parent;
    }
  }
  for (const m of missing) {
    try {
      await fs.promises.mkdir(m);
    } catch (e) {
      const err = e as NodeJS.ErrnoException;
      if (err.code !== 'EEXIST') {
        throw new Error(`fileSystem: cannot make the folder ${m}: ${err.message}`);
      }
    }
  }
}

/** Throws unless `dir` can be made and written to (a file is created there and removed). */
export async function checkWritable(dir: string): Promise<void> {
  await makeFolder(dir);
  const probe = path.join(dir, `.write-test-${process.pid}-${Date.now()}`);
  try {
    await fs.promises.writeFile(probe, '', {flag: 'wx'});
  } catch (e) {
    throw new Error(`fileSystem: cannot write in ${dir}: ${(e as Error).message}`);
  }
  await fs.promises.unlink(probe);
}

/** Keras' own file names: `.keras` (Keras 3) and `.h5` / `.hdf5` (tf-keras 2 full models). */
const KERAS_FILE = /\.(keras|h5|hdf5)$/i;

/**
 * What a Keras 3 model folder or keras-hub preset at `dir` (config.json, no model.json) is, from
 * its config.json's `registered_name` / `module` (keras-hub's classes are `keras_hub>...`): read
 * only when small, never parsed (a substring test).
 */
async function kerasFolderKind(dir: string): Promise<'preset' | 'keras' | null> {
  const config = path.join(dir, 'config.json');
  if (fs.existsSync(path.join(dir, 'model.json'))) return null;
  const st = await fs.promises.stat(config).catch(() => null);
  if (st === null || !st.isFile()) return null;
  if (st.size > 2 ** 20) return 'keras';
  const text = await fs.promises.readFile(config, 'utf8').catch(() => '');
  return /"(registered_name|module)"\s*:\s*"keras_hub[>.]/.test(text) ? 'preset' : 'keras';
}

/**
 * What to tell a user whose model.json at `where` cannot be read because the target they named
 * is not a folder converted for tfjs: a Keras file (`loadKerasModel` reads it), a Keras 3 model
 * folder or keras-hub preset (`loadKerasModel` / `loadKerasHubPreset`), another file, or a Keras
 * file name that does not exist. Null when the target is a folder with nothing to say.
 */
export async function notAModelFolder(where: ModelLocation): Promise<string | null> {
  const target = where.dir;
  const st = await fs.promises.stat(target).catch(() => null);
  const named = JSON.stringify(target);
  if (st?.isDirectory()) {
    const kind = await kerasFolderKind(target);
    if (kind === 'preset') {
      return (
        `${target} is a keras-hub preset (config.json, no model.json), not a folder converted ` +
        `for tfjs: load it with loadKerasHubPreset(${named}) (model, tokenizer and ` +
        `preprocessor) or loadKerasModel(${named}) (the model)`
      );
    }
    if (kind === 'keras') {
      return (
        `${target} is a Keras 3 model folder (config.json, no model.json), not a folder ` +
        `converted for tfjs: load it with loadKerasModel(${named})`
      );
    }
    return null;
  }
  if (!KERAS_FILE.test(target)) {
    return st === null
      ? null
      : `${target} is a file; expected a folder holding model.json, or the path of a .json file`;
  }
  const hint = `load it with loadKerasModel(${named}), which reads .keras and .h5 files directly`;
  return st === null
    ? `${target} does not exist; a .keras or .h5 path names a Keras file, not a folder converted for tfjs: ${hint}`
    : `${target} is a Keras file, not a folder converted for tfjs: ${hint}`;
}
