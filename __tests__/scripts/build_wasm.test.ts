/**
 * scripts/build_wasm.mjs's layout rules, which `--check` (run by the kernels' tests) applies
 * before compiling: wasm/kernels.ts and wasm/step_kernels.ts only re-export, every file under
 * wasm/ is one module's source or both's, no function is written twice (by name or by body), and
 * the two modules share one source of the packed product (the 4 x 8 tile and its packing), exp
 * for x <= 0 and the heap base.
 */
import {spawnSync} from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  mkdtempSync,
  mkdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import {tmpdir} from 'node:os';
import * as path from 'node:path';

const root = path.join(__dirname, '..', '..');

/** build_wasm.mjs --check run on a copy of wasm/ changed by `change`: its exit status and output. */
function checkCopy(change: (dir: string) => void): {status: number | null; output: string} {
  const dir = mkdtempSync(path.join(tmpdir(), 'build-wasm-'));
  try {
    mkdirSync(path.join(dir, 'scripts'));
    cpSync(path.join(root, 'scripts/build_wasm.mjs'), path.join(dir, 'scripts/build_wasm.mjs'));
    cpSync(path.join(root, 'wasm'), path.join(dir, 'wasm'), {recursive: true});
    symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
    change(dir);
    const run = spawnSync(process.execPath, ['scripts/build_wasm.mjs', '--check'], {
      cwd: dir,
      encoding: 'utf8',
    });
    return {status: run.status, output: `${run.stdout}${run.stderr}`};
  } finally {
    rmSync(dir, {recursive: true, force: true});
  }
}

describe('scripts/build_wasm.mjs: the layout of wasm/', () => {
  it('both modules are built from one packed product, one exp and one heap base', () => {
    const run = spawnSync(process.execPath, ['scripts/build_wasm.mjs', '--check'], {
      cwd: root,
      encoding: 'utf8',
    });
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(
      /^wasm\/ layout: both modules built from wasm\/heap_base\.ts, wasm\/packed\/panels\.ts, wasm\/packed\/tile_4x8\.ts, wasm\/simd\/exp_neg\.ts$/m,
    );
  });

  it('a file under wasm/ that neither module imports fails the check, named', () => {
    const {status, output} = checkCopy((dir) =>
      writeFileSync(
        path.join(dir, 'wasm/packed/old_tile.ts'),
        'export function x(): i32 {\n  return 1;\n}\n',
      ),
    );
    expect(status).toBe(1);
    expect(output).toContain(
      "every file under wasm/ must be a module's source (imported from wasm/kernels.ts, wasm/step_kernels.ts, wasm/step_int8_relaxed.ts), received files none imports: wasm/packed/old_tile.ts",
    );
  });

  it('an entry file with code of its own fails the check, the line named', () => {
    const {status, output} = checkCopy((dir) =>
      appendFileSync(
        path.join(dir, 'wasm/step_kernels.ts'),
        'export function y(): i32 {\n  return 1;\n}\n',
      ),
    );
    expect(status).toBe(1);
    expect(output).toContain(
      "wasm/step_kernels.ts must only re-export (export {...} from './...'), received: export function y(): i32 {",
    );
  });

  it('a function copied into another file fails the check, by name or by body', () => {
    const tile = readFileSync(path.join(root, 'wasm/packed/tile_4x8.ts'), 'utf8');
    const body = tile.slice(tile.indexOf('export function tile4x8'));
    const byName = checkCopy((dir) =>
      appendFileSync(
        path.join(dir, 'wasm/packed/dense_rows.ts'),
        `\n${body.replace('export ', '')}`,
      ),
    );
    expect(byName.status).toBe(1);
    expect(byName.output).toContain(
      'nothing may be copied between the files of wasm/ (one source, imported where needed): expected each function once, received tile4x8 in wasm/packed/dense_rows.ts and wasm/packed/tile_4x8.ts',
    );
    const byBody = checkCopy((dir) =>
      appendFileSync(
        path.join(dir, 'wasm/packed/dense_rows.ts'),
        `\n${body.replace('export function tile4x8', 'function ownTile')}`,
      ),
    );
    expect(byBody.status).toBe(1);
    expect(byBody.output).toContain(
      'received tile4x8 in wasm/packed/dense_rows.ts (ownTile) and wasm/packed/tile_4x8.ts',
    );
  });
});
