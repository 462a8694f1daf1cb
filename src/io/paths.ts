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
