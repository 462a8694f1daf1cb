/**
 * The Chromium check of the browser tests (browser/chromium.js): without a Chromium,
 * `npm run test:browser` stops at once with one message saying what is missing and how to get it.
 */
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
let emptyDir: string;

beforeAll(() => {
  emptyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-no-chromium-'));
});
afterAll(() => fs.rmSync(emptyDir, {recursive: true, force: true}));

/** `node browser/chromium.js` under the given environment (PATH: an empty folder by default). */
function check(env: Record<string, string>) {
  return spawnSync(process.execPath, [path.join(root, 'browser', 'chromium.js')], {
    cwd: root,
    env: {PATH: emptyDir, ...env},
    encoding: 'utf8',
  });
}

function expectHowToGetIt(stderr: string) {
  expect(stderr).toContain('The browser tests need Chromium');
  expect(stderr).toContain('apt-get install chromium');
  expect(stderr).toContain('set CHROMIUM_PATH to a Chromium or Chrome binary');
  expect(stderr.trim().split('\n')).toHaveLength(2);
}

describe('the Chromium check of the browser tests', () => {
  it('names a CHROMIUM_PATH that does not exist, exits 1', () => {
    const r = check({CHROMIUM_PATH: '/nonexistent'});
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('CHROMIUM_PATH=/nonexistent is not an executable file');
    expectHowToGetIt(r.stderr);
    expect(r.stdout).toBe('');
  });

  it('says none is on PATH when CHROMIUM_PATH is not set, exits 1', () => {
    const r = check({});
    expect(r.status).toBe(1);
    expect(r.stderr).toContain(
      'CHROMIUM_PATH is not set and none of chromium, chromium-browser, google-chrome, ' +
        'google-chrome-stable is on PATH',
    );
    expectHowToGetIt(r.stderr);
  });

  it('takes a binary that runs, from CHROMIUM_PATH or from PATH', () => {
    const fake = path.join(emptyDir, 'chromium');
    fs.writeFileSync(fake, '#!/bin/sh\necho "Chromium 0.0"\n', {mode: 0o755});
    try {
      for (const env of [{CHROMIUM_PATH: fake}, {}] as Array<Record<string, string>>) {
        const r = check(env);
        expect(r.stderr).toBe('');
        expect(r.status).toBe(0);
        expect(r.stdout.trim()).toBe(fake);
      }
    } finally {
      fs.rmSync(fake);
    }
  });

  it('stops npm run test:browser before any suite runs, with that message only', () => {
    const r = spawnSync(
      process.execPath,
      [path.join(root, 'node_modules', 'jest', 'bin', 'jest.js'), '-c', 'jest.browser.config.js'],
      {cwd: root, env: {...process.env, CHROMIUM_PATH: '/nonexistent'}, encoding: 'utf8'},
    );
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('CHROMIUM_PATH=/nonexistent is not an executable file');
    expectHowToGetIt(r.stderr);
    expect(r.stderr).not.toMatch(/playwright|PASS|FAIL/);
  }, 60000);
});
