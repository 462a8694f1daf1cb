/**
 * Saving a model so that a crash, a kill or a second writer never leaves a mix (the discipline of
 * SQLite and git: write aside, fsync, rename):
 * 1. the weights and the JSON are written to unique temporary files in the target folder and
 *    fsynced; the JSON records the weights' SHA-256;
 * 2. under a lock file (one saver per folder across processes; a stale lock, whose owner is dead
 *    or whose pid was reused after a restart, is taken over; every wait is bounded), the current weights file is hard-linked as `<weights>.prev`, the new weights are
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

/**
 * When process `pid` started (ms since the epoch), from Linux's /proc (`starttime` in clock ticks
 * of 1/100 s after `btime`); null where /proc does not say.
 */
async function startedAt(pid: number): Promise<number | null> {
  try {
    const stat = await fs.promises.readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[19]); // field 22 of the line; fields[0] is field 3 (state)
    const btime = /^btime (\d+)$/m.exec(await fs.promises.readFile('/proc/stat', 'utf8'));
    if (btime === null || !Number.isFinite(ticks)) return null;
    return Number(btime[1]) * 1000 + ticks * 10;
  } catch {
    return null;
  }
}

/** A lock file that holds no live owner's pid and has not been touched for this long is stale. */
const UNREADABLE_LOCK_MS = 2000;
/** Slack between a lock's mtime and its owner's start time (clock ticks, whole-second btime). */
const START_SLACK_MS = 2000;
const DEFAULT_LOCK_TIMEOUT_MS = 60000;

/**
 * The lock files this process holds now, shared by every copy of this module loaded in the
 * process (a CommonJS and an ES module copy, test runners' module registries): a lock naming our
 * pid that is not in it was left by an earlier process with the same pid (a container restart
 * gives the new process the old one's pid), so it is stale.
 */
const HELD: Set<string> = ((globalThis as Record<symbol, unknown>)[
  Symbol.for('tfjs-attention.heldSaveLocks')
] ??= new Set<string>()) as Set<string>;

/** Why the lock file `file` (a regular file holding `text`, modified at `mtimeMs`) is stale, or null. */
async function staleReason(file: string, text: string, mtimeMs: number): Promise<string | null> {
  const owner = /^\d+$/.test(text) ? Number(text) : 0;
  if (owner === 0) {
    return Date.now() - mtimeMs > UNREADABLE_LOCK_MS ? 'holds no pid' : null;
  }
  if (owner === process.pid)
    return HELD.has(file) ? null : 'names this process, which does not hold it';
  if (!alive(owner)) return `process ${owner} is not running`;
  const started = await startedAt(owner);
  if (started !== null && mtimeMs + START_SLACK_MS < started) {
    return `process ${owner} started after the lock was written (a restart reused its pid)`;
  }
  return null;
}

/** Options of {@link lock} and {@link saveModelFiles}. */
export interface LockOptions {
  /** How long to wait for a lock held by someone else before failing (ms; default 60000). */
  lockTimeoutMs?: number;
}

/**
 * Takes `<json>.lock`, waiting for a live owner; returns the release function. The lock is made
 * by hard-linking a file that already holds our pid, so a lock file is never seen empty (a kill
 * between creating it and writing the pid once left an empty lock that blocked every later save).
 * A lock is stale, and taken over, when its owner is not running, when its owner's pid is ours
 * (or another process's that started after the lock was written: pids reused after a restart,
 * pid 1 in a container), when it holds no pid for UNREADABLE_LOCK_MS, or when it is a symlink
 * (never made here; unlinking it leaves its target alone) that old. Anything else at that path
 * (a folder, a file that cannot be read) is waited for like a live lock: every wait ends after
 * `lockTimeoutMs` with an error.
 */
export async function lock(
  file: string,
  {lockTimeoutMs = DEFAULT_LOCK_TIMEOUT_MS}: LockOptions = {},
): Promise<() => Promise<void>> {
  const start = Date.now();
  const mine = `${file}.${process.pid}-${crypto.randomBytes(4).toString('hex')}.tmp`;
  await fs.promises.writeFile(mine, String(process.pid), {flag: 'wx'});
  try {
    for (;;) {
      try {
        await fs.promises.link(mine, file);
        HELD.add(file);
        return async () => {
          HELD.delete(file);
          await fs.promises.unlink(file).catch(() => undefined);
        };
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      }
      const st = await fs.promises.lstat(file).catch(() => null);
      if (st === null) continue; // released meanwhile
      let holder: string;
      if (st.isFile()) {
        const text = await fs.promises.readFile(file, 'utf8').catch(() => null);
        if (text !== null) {
          const stale = await staleReason(file, text, st.mtimeMs);
          if (stale !== null) {
            await takeOver(file, text);
            continue;
          }
          holder = text === '' ? 'an empty lock file' : `process ${text}`;
        } else {
          holder = 'a lock file that cannot be read';
        }
      } else if (st.isSymbolicLink()) {
        if (Date.now() - st.mtimeMs > UNREADABLE_LOCK_MS) {
          await takeOver(file, null);
          continue;
        }
        holder = 'a symlink (not a lock file this package makes)';
      } else {
        holder = `a ${st.isDirectory() ? 'folder' : 'non-regular file'} (not a lock file this package makes; remove it if no other program is using it)`;
      }
      if (Date.now() - start > lockTimeoutMs) {
        throw new Error(
          `fileSystem: cannot save: ${file} has been held by ${holder} for ${lockTimeoutMs} ms; ` +
            `expected the lock to be released or its owner to exit`,
        );
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  } finally {
    await fs.promises.unlink(mine).catch(() => undefined);
  }
}

/**
 * Removes a stale lock whose content was `seen` (null: a symlink): it is first renamed aside
 * (only one waiter can win that rename), then deleted if it is still the stale one, else (a fresh
 * lock taken between our read and our rename) put back. Unlinking a symlink never touches its
 * target.
 */
async function takeOver(file: string, seen: string | null): Promise<void> {
  const aside = `${file}.${process.pid}-${crypto.randomBytes(4).toString('hex')}.stale`;
  const moved = await fs.promises.rename(file, aside).then(
    () => true,
    () => false,
  );
  if (!moved) return;
  const st = await fs.promises.lstat(aside).catch(() => null);
  const now =
    st === null || st.isSymbolicLink()
      ? null
      : st.isFile()
        ? await fs.promises.readFile(aside, 'utf8').catch(() => undefined)
        : undefined;
  if (st !== null && now === seen) {
    await fs.promises.unlink(aside).catch(() => undefined);
    return;
  }
  if (st?.isDirectory()) {
    await fs.promises.rename(aside, file).catch(() => undefined);
    return;
  }
  if (st?.isFile()) await fs.promises.link(aside, file).catch(() => undefined);
  await fs.promises.unlink(aside).catch(() => undefined);
}

/**
 * Deletes the temporary files that killed savers left in `dir` (named `.<name>.<pid>-<tag>.tmp`,
 * `<lock>.<pid>-<tag>.tmp`, and `<lock>.<pid>-<tag>.stale`: a stale lock moved aside by a saver
 * killed before it unlinked it, with `pid` no longer running). Called under the lock. Only
 * regular files and symlinks are removed (unlinked: a link's target is never touched); a folder
 * with such a name was not made here and is left alone.
 */
async function removeLeftovers(dir: string): Promise<void> {
  const entries = await fs.promises
    .readdir(dir, {withFileTypes: true})
    .catch(() => [] as fs.Dirent[]);
  for (const entry of entries) {
    const name = entry.name;
    const m = /^\..+\.(\d+)-[0-9a-f]{12}\.tmp$|\.lock\.(\d+)-[0-9a-f]{8}\.(?:tmp|stale)$/.exec(
      name,
    );
    const pid = m === null ? 0 : Number(m[1] ?? m[2]);
    if (pid === 0 || pid === process.pid || alive(pid)) continue;
    if (!entry.isFile() && !entry.isSymbolicLink()) continue;
    await fs.promises.unlink(path.join(dir, name)).catch(() => undefined);
  }
}

/**
 * Clears `<weights>.prev` before the old weights are linked there: a file or symlink is unlinked;
 * a folder (never made here) is moved aside to `<weights>.prev.<tag>.stray`, contents untouched,
 * so that it cannot make every save fail.
 */
async function clearPrev(prev: string): Promise<void> {
  const st = await fs.promises.lstat(prev).catch(() => null);
  if (st === null) return;
  if (st.isDirectory()) {
    const aside = `${prev}.${crypto.randomBytes(4).toString('hex')}.stray`;
    await fs.promises.rename(prev, aside);
    return;
  }
  await fs.promises.unlink(prev);
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
  options: LockOptions = {},
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
      const release = await lock(`${where.modelJson}.lock`, options);
      try {
        await removeLeftovers(where.dir);
        const prev = `${weightsFile}.prev`;
        await clearPrev(prev);
        if (await isRegularFile(weightsFile)) await fs.promises.link(weightsFile, prev);
        await fs.promises.rename(tmpWeights, weightsFile);
        await fs.promises.rename(tmpJson, where.modelJson);
        await clearPrev(prev);
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
