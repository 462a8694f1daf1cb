/**
 * Loading a hostile file in a child process with a time and a memory limit: a loader that hangs
 * or allocates what the file declares is killed (and the test fails on that) instead of taking
 * the machine down. The child runs the package bundled from src/ by esbuild (once per test file),
 * so it tests the working tree, not dist/.
 */
import {spawnSync} from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

import * as esbuild from 'esbuild';

const root = path.join(__dirname, '..', '..');
let bundle: string | null = null;
let bundleDir: string | null = null;

// the bundle is removed when the test file is done
afterAll(() => {
  if (bundleDir != null) fs.rmSync(bundleDir, {recursive: true, force: true});
  bundle = bundleDir = null;
});

/**
 * src/index.ts bundled to a temporary CommonJS file under node_modules/.cache (so that tfjs,
 * left out of the bundle, resolves from the package's node_modules).
 */
function bundled(): string {
  if (bundle != null) return bundle;
  const cache = path.join(root, 'node_modules', '.cache');
  fs.mkdirSync(cache, {recursive: true});
  const dir = fs.mkdtempSync(path.join(cache, 'bounded-load-'));
  bundleDir = dir;
  const out = path.join(dir, 'index.cjs');
  esbuild.buildSync({
    entryPoints: [path.join(root, 'src', 'index.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'es2019',
    outfile: out,
    logLevel: 'error',
    external: [
      '@tensorflow/tfjs-core',
      '@tensorflow/tfjs-layers',
      '@tensorflow/tfjs',
      '@tensorflow/tfjs-node',
      '@tensorflow/tfjs-backend-wasm',
      'pngjs',
    ],
  });
  bundle = out;
  return out;
}

/** What the child reports, or how it ended when it reported nothing. */
export interface BoundedResult {
  ok?: boolean;
  message?: string;
  weights?: number;
  /** Peak resident memory of the child. */
  maxRssMiB?: number;
  /** Set when the child printed nothing: its exit status, signal and the end of its stderr. */
  died?: string;
}

/**
 * Runs `fn` (`loadKerasModel`, `loadKerasHubPreset`) of the package on `source` in a child with
 * a V8 heap of `heapMiB`, 4 GB of address space and `timeoutMs` (all generous: the point is to
 * stop a runaway loader, not to time a good one; assert on `maxRssMiB` and the message).
 */
export function loadBounded(
  fn: 'loadKerasModel' | 'loadKerasHubPreset',
  source: string,
  {heapMiB = 384, timeoutMs = 60_000}: {heapMiB?: number; timeoutMs?: number} = {},
): BoundedResult {
  const child = path.join(__dirname, 'load_child.js');
  // the address space too (typed arrays live outside V8's heap): 4 GB, as kernels_memory_limit
  const r = spawnSync(
    'bash',
    [
      '-c',
      'ulimit -v 4000000 && exec "$0" "$@"',
      process.execPath,
      `--max-old-space-size=${heapMiB}`,
      child,
      bundled(),
      fn,
      source,
    ],
    {encoding: 'utf8', timeout: timeoutMs, cwd: root},
  );
  if (r.stdout) return JSON.parse(r.stdout) as BoundedResult;
  return {died: `status ${r.status}, signal ${r.signal}: ${r.stderr.slice(-400)}`};
}
