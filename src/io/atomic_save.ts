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

/** A lock file that holds no live owner's pid and has not been touched for this long is stale. */
const UNREADABLE_LOCK_MS = 2000;

/**
 * Takes `<json>.lock`, waiting for a live owner; returns the release function. The lock is made
 * by hard-linking a file that already holds our pid, so a lock file is never seen empty (a kill
 * between creating it and writing the pid once left an empty lock that blocked every later save).
 */
async function lock(file: string, timeoutMs = 60000): Promise<() => Promise<void>> {
  const start = Date.now();
  const mine = `${file}.${process.pid}-${crypto.randomBytes(4).toString('hex')}.tmp`;
  await fs.promises.writeFile(mine, String(process.pid), {flag: 'wx'});
  try {
    for (;;) {
      try {
        await fs.promises.link(mine, file);
        return () => fs.promises.unlink(file).catch(() => undefined);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const text = await fs.promises.readFile(file, 'utf8').catch(() => null);
      if (text === null) continue; // released meanwhile
      const owner = /^\d+$/.test(text) ? Number(text) : 0;
      const age = await fs.promises
        .stat(file)
        .then((s) => Date.now() - s.mtimeMs)
        .catch(() => 0);
      if (owner > 0 ? !alive(owner) : age > UNREADABLE_LOCK_MS) {
        await takeOver(file, text);
        continue;
      }
      if (Date.now() - start > timeoutMs) {
        throw new Error(
          `fileSystem: ${file} has been locked by ${owner > 0 ? `process ${owner}` : 'an unreadable lock'} for ${timeoutMs} ms`,
        );
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await fs.promises.unlink(mine).catch(() => undefined);
  }
}

/**
 * Removes a stale lock whose content was `seen`: it is first renamed aside (only one waiter can
 * win that rename), then deleted if it is still the stale one, else (a fresh lock taken between
 * our read and our rename) put back.
 */
async function takeOver(file: string, seen: string): Promise<void> {
  const aside = `${file}.${process.pid}.stale`;
  const moved = await fs.promises.rename(file, aside).then(
    () => true,
    () => false,
  );
  if (!moved) return;
  const now = await fs.promises.readFile(aside, 'utf8').catch(() => null);
  if (now === seen) {
    await fs.promises.unlink(aside).catch(() => undefined);
    return;
  }
  await fs.promises.link(aside, file).catch(() => undefined);
  await fs.promises.unlink(aside).catch(() => undefined);
}

/**
 * Deletes the temporary files that killed savers left in `dir` (named `.<name>.<pid>-<tag>.tmp`
 * and `<lock>.<pid>-<tag>.tmp`, with `pid` no longer running). Called under the lock.
 */
async function removeLeftovers(dir: string): Promise<void> {
  const names = await fs.promises.readdir(dir).catch(() => [] as string[]);
  for (const name of names) {
    const m = /^\..+\.(\d+)-[0-9a-f]{12}\.tmp$|\.lock\.(\d+)-[0-9a-f]{8}\.tmp$/.exec(name);
    const pid = m === null ? 0 : Number(m[1] ?? m[2]);
    if (pid === 0 || pid === process.pid || alive(pid)) continue;
    await fs.promises.rm(path.join(dir, name), {force: true});
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
        await removeLeftovers(where.dir);
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
