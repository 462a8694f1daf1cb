/**
 * scripts/build_inputs.mjs: the hash of what dist/ is built from, which scripts/build.mjs writes
 * to dist/.inputs.sha256 and jest's globalSetup compares to skip a second build of the same
 * sources. Checked on a folder of its own (what changes the hash, what does not) and on the
 * package itself (the build that ran before these suites left a matching stamp).
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {spawnSync} from 'child_process';

const root = path.resolve(__dirname, '..', '..');
const script = path.join(root, 'scripts', 'build_inputs.mjs');

/** The ES module's export `name`, called with `dir` (or read, when not a function), in a node of its own. */
function call(name: string, dir = root): unknown {
  const code =
    `import * as m from ${JSON.stringify(script)};` +
    `const v = m[${JSON.stringify(name)}];` +
    `console.log(JSON.stringify(typeof v === 'function' ? v(${JSON.stringify(dir)}) : v));`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', code], {encoding: 'utf8'});
  if (r.status !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as unknown;
}
const hash = (dir: string) => call('buildInputsHash', dir) as string;
const built = (dir: string) => call('builtFromCurrentInputs', dir) as boolean;
const STAMP = call('BUILD_STAMP') as string;

function packageLike(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'build-inputs-'));
  fs.mkdirSync(path.join(dir, 'src', 'sub'), {recursive: true});
  fs.mkdirSync(path.join(dir, 'scripts'));
  fs.writeFileSync(path.join(dir, 'src', 'a.ts'), 'export const a = 1;\n');
  fs.writeFileSync(path.join(dir, 'src', 'sub', 'b.ts'), 'export const b = 2;\n');
  fs.writeFileSync(path.join(dir, 'scripts', 'build.mjs'), '// build\n');
  fs.writeFileSync(path.join(dir, 'package.json'), '{"name": "x"}\n');
  fs.writeFileSync(path.join(dir, 'README.md'), 'not an input\n');
  return dir;
}

describe('scripts/build_inputs.mjs', () => {
  it('the hash follows every input file: content, a new file, a renamed file; not other files', () => {
    const dir = packageLike();
    const first = hash(dir);
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(hash(dir)).toBe(first);
    // a file outside the inputs does not change it
    fs.writeFileSync(path.join(dir, 'README.md'), 'changed\n');
    expect(hash(dir)).toBe(first);
    // one byte of a nested source does
    fs.writeFileSync(path.join(dir, 'src', 'sub', 'b.ts'), 'export const b = 3;\n');
    const edited = hash(dir);
    expect(edited).not.toBe(first);
    // a new source file does
    fs.writeFileSync(path.join(dir, 'src', 'c.ts'), '');
    const added = hash(dir);
    expect(added).not.toBe(edited);
    // the same bytes under another name do
    fs.renameSync(path.join(dir, 'src', 'c.ts'), path.join(dir, 'src', 'd.ts'));
    expect(hash(dir)).not.toBe(added);
    // and so does the build script
    const before = hash(dir);
    fs.writeFileSync(path.join(dir, 'scripts', 'build.mjs'), '// build, changed\n');
    expect(hash(dir)).not.toBe(before);
    fs.rmSync(dir, {recursive: true, force: true});
  });

  it('built from the current inputs only with a stamp of their hash in dist/', () => {
    const dir = packageLike();
    expect(built(dir)).toBe(false); // no dist/
    fs.mkdirSync(path.join(dir, 'dist'));
    fs.writeFileSync(path.join(dir, STAMP), `${hash(dir)}\n`);
    expect(built(dir)).toBe(true);
    fs.appendFileSync(path.join(dir, 'src', 'a.ts'), '// edited after the build\n');
    expect(built(dir)).toBe(false);
    fs.rmSync(dir, {recursive: true, force: true});
  });

  it('the build that ran before these suites left the stamp of the sources as they are', () => {
    expect(call('BUILD_INPUTS')).toEqual(expect.arrayContaining(['src', 'scripts/build.mjs']));
    expect(fs.existsSync(path.join(root, STAMP))).toBe(true);
    expect(built(root)).toBe(true);
  });
});
