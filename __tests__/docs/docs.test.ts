// `npm run docs` (typedoc, typedoc.config.mjs) builds the API reference, and fails on a missing
// doc: an undocumented option field, and a layer class without an `@example`, each break it.
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const typedoc = path.join(root, 'node_modules/typedoc/bin/typedoc');
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, ''); // eslint-disable-line no-control-regex

/** A copy of src/ with `edit` applied to the file `file`, and a tsconfig for it. */
function fixture(edits: Record<string, (text: string) => string>): string {
  const dir = path.join(root, '__tests__/.generated/docs_fixture');
  fs.rmSync(dir, {recursive: true, force: true});
  fs.cpSync(path.join(root, 'src'), path.join(dir, 'src'), {recursive: true});
  for (const [file, edit] of Object.entries(edits)) {
    const p = path.join(dir, 'src', file);
    const before = fs.readFileSync(p, 'utf8');
    const after = edit(before);
    expect(after).not.toBe(before); // the edit took
    fs.writeFileSync(p, after);
  }
  const base = JSON.parse(fs.readFileSync(path.join(root, 'tsconfig.json'), 'utf8'));
  const config = {
    compilerOptions: {...base.compilerOptions, rootDir: 'src', noEmit: true},
    files: ['src/index.ts'], // an include glob would skip the dot folder .generated
  };
  fs.writeFileSync(path.join(dir, 'tsconfig.json'), JSON.stringify(config));
  return dir;
}

describe('npm run docs', () => {
  it('builds docs/api/ with no warning', () => {
    const r = spawnSync('npm', ['run', 'docs'], {cwd: root, encoding: 'utf8'});
    expect(plain(r.stdout + r.stderr)).not.toMatch(/warning|error/i);
    expect(r.status).toBe(0);
    for (const page of ['index.html', 'classes/MultiHeadAttention.html']) {
      expect(fs.existsSync(path.join(root, 'docs/api', page))).toBe(true);
    }
  });

  it('fails on an Args field without a doc comment and a layer class without @example', () => {
    const dir = fixture({
      'layers/attention/multi_head_attention_args.ts': (t) =>
        t.replace('  /** Number of attention heads. */\n', ''),
      'layers/core/einsum_dense.ts': (t) => t.replace(' * @example\n', ''),
    });
    // the project's typedoc options, on the copy
    fs.writeFileSync(
      path.join(dir, 'typedoc.config.mjs'),
      `import base from ${JSON.stringify(path.join(root, 'typedoc.config.mjs'))};\n` +
        `export default {...base, entryPoints: ['src/index.ts'], tsconfig: 'tsconfig.json', ` +
        `out: 'api', emit: 'none', skipErrorChecking: true, plugin: ${JSON.stringify([
          path.join(root, 'scripts/typedoc_require_examples.mjs'),
        ])}};\n`,
    );
    const r = spawnSync(process.execPath, [typedoc, '--options', 'typedoc.config.mjs'], {
      cwd: dir,
      encoding: 'utf8',
    });
    const out = plain(r.stdout + r.stderr);
    expect(out).toMatch(
      /MultiHeadAttentionArgs\.numHeads \(Property\).* does not have any documentation/,
    );
    expect(out).toMatch(/EinsumDense \(Class\) has no @example/);
    expect(r.status).not.toBe(0);
    fs.rmSync(dir, {recursive: true, force: true});
  });
});
