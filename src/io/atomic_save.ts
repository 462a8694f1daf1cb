/**
 * Saving a model so that a crash, a kill or a second writer never leaves a mix (the discipline of
 * SQLite and git: write aside, fsync, rename):
 * 1. the weights and the JSON are written to unique temporary files in the target folder and
 *    fsynced; the JSON records the weights' SHA-256;
 * 2. under a lock file (one saver per folder across processes; a dead owner's lock is taken
 *    over), the current weights file is hard-linked as `<weights>.prev`, the new weights are
 *    renamed over it, then the new JSON over the old one, and `.prev` is removed.
 * A reader that finds the JSON's checksum not matching the weights (a kill between the two
 * renames) uses `.prev`, which matches the old JSON: it always sees the old or the new model.
 * Renames replace symlinks rather than writing through them. Saves to one folder from one
 * process are queued.
 */
import * as crypto from 'crypto';
import * as fs from 'fs';
import * as path from 'path';

import {makeFolder, ModelLocation} from './paths';

const queues = new Map<string, Promise<unknown>>();

/** Runs `job` after every earlier job for the same folder in this process. */
function queued<T>(key: string, job: () => Promise<T>): Promise<T> {
  const previous = queues.get(key) ?? Promise.resolve();
  const run = previous.then(job, job);
  const settled = run.then(
    () => undefined,
    () => undefined,
  );
  queues.set(key, settled);
  void settled.then(() => {
    if (queues.get(key) === settled) queues.delete(key);
  });
  return run;
}

export function sha256(data: Uint8Array): string {
  return crypto.createHash('sha256').update(data).digest('hex');
}

async function writeSynced(file: string, data: Uint8Array | string): Promise<void> {
  const handle = await fs.promises.open(file, 'wx');
  try {
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes `<json>.lock` (O_EXCL), waiting for a live owner; returns the release function. */
async function lock(file: string, timeoutMs = 60000): Promise<() => Promise<void>> {
  const start = Date.now();
  for (;;) {
    try {
      await fs.promises.writeFile(file, String(process.pid), {flag: 'wx'});
      return () => fs.promises.unlink(file).catch(() => undefined);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const owner = Number(await fs.promises.readFile(file, 'utf8').catch(() => ''));
      if (Number.isInteger(owner) && owner > 0 && !alive(owner)) {
        // a killed saver's lock: taken aside by a rename only one waiter can win, then deleted
        // if it is still the dead owner's (else it was a fresh lock: put it back)
        const aside = `${file}.${process.pid}.stale`;
        if (
          await fs.promises.rename(file, aside).then(
            () => true,
            () => false,
          )
        ) {
          const now = Number(await fs.promises.readFile(aside, 'utf8').catch(() => ''));
          if (now === owner) await fs.promises.unlink(aside).catch(() => undefined);
          else
            await fs.promises.link(aside, file).then(
              () => fs.promises.unlink(aside),
              () => undefined,
            );
        }
        continue;
      }
      if (Date.now() - start > timeoutMs) {
        throw new Error(
          `fileSystem: ${file} has been locked by process ${owner} for ${timeoutMs} ms`,
        );
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

async function isRegularFile(p: string): Promise<boolean> {
  try {
    return (await fs.promises.lstat(p)).isFile();
  } catch {
    return false;
  }
}

/** Writes `json(checksum)` and `weights` at `where`, atomically as described above. */
export function saveModelFiles(
  where: ModelLocation,
  weights: Uint8Array,
  json: (weightsSha256: string) => string,
): Promise<void> {
  return queued(where.modelJson, async () => {
    const st = await fs.promises.stat(where.modelJson).catch(() => null);
    if (st?.isDirectory()) {
      throw new Error(`fileSystem: cannot save to ${where.modelJson}: it is a folder`);
    }
    await makeFolder(where.dir);
    const tag = `${process.pid}-${crypto.randomBytes(6).toString('hex')}`;
    const weightsFile = path.join(where.dir, where.weightsName);
    const tmpWeights = path.join(where.dir, `.${where.weightsName}.${tag}.tmp`);
    const tmpJson = path.join(where.dir, `.${path.basename(where.modelJson)}.${tag}.tmp`);
    try {
      await writeSynced(tmpWeights, weights);
      await writeSynced(tmpJson, json(sha256(weights)));
      const release = await lock(`${where.modelJson}.lock`);
      try {
        const prev = `${weightsFile}.prev`;
        await fs.promises.rm(prev, {force: true});
        if (await isRegularFile(weightsFile)) await fs.promises.link(weightsFile, prev);
        await fs.promises.rename(tmpWeights, weightsFile);
        await fs.promises.rename(tmpJson, where.modelJson);
        await fs.promises.rm(prev, {force: true});
        const dir = await fs.promises.open(where.dir, 'r');
        await dir.sync().catch(() => undefined);
        await dir.close();
      } finally {
        await release();
      }
    } finally {
      await fs.promises.rm(tmpWeights, {force: true});
      await fs.promises.rm(tmpJson, {force: true});
    }
  });
}
