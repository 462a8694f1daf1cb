// The typed `apply` overloads, seen by a user: __tests__/types/apply_types.ts is compiled with
// `tsc --noEmit --strict` against the built declarations (dist/index.d.ts, from jest's
// globalSetup). Its `@ts-expect-error` lines prove wrong usages are rejected: tsc fails on a
// directive that has no error under it.
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const root = path.resolve(__dirname, '..');

describe('typed apply in the built declarations', () => {
  it('dist/index.d.ts keeps fileSystem() save / load non-optional', () => {
    const dts = fs.readFileSync(path.join(root, 'dist/io/file_system.d.ts'), 'utf8');
    expect(dts).toMatch(
      /\bsave\(artifacts: tf\.io\.ModelArtifacts\): Promise<tf\.io\.SaveResult>;/,
    );
    expect(dts).toMatch(/\bload\(\): Promise<tf\.io\.ModelArtifacts>;/);
  });

  it('__tests__/types/apply_types.ts compiles with tsc --strict, its expected errors included', () => {
    const tsc = require.resolve('typescript/bin/tsc');
    let output = '';
    try {
      execFileSync(
        process.execPath,
        [tsc, '--noEmit', '--strict', '-p', '__tests__/types/tsconfig.json'],
        {cwd: root, encoding: 'utf8', stdio: 'pipe'},
      );
    } catch (e) {
      const err = e as {stdout?: string; stderr?: string};
      output = `${err.stdout ?? ''}${err.stderr ?? ''}` || String(e);
    }
    expect(output).toBe('');
  });
});
