/**
 * README.md and docs/ stay true: the set-up commands first, only npm scripts that exist, the
 * Transformers walkthrough as examples/ runs it, a fidelity table that covers every fixture, and
 * links that lead to files. (Their code blocks run in docs_blocks.test.ts.)
 */
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {docFiles} from '../helpers/doc_blocks';

const root = path.resolve(__dirname, '..', '..');
const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');
const userDocs = docFiles();
const allDocs = [
  ...userDocs,
  'ARCHITECTURE.md',
  'SECURITY.md',
  'CHANGELOG.md',
  'bench/README.md',
  'fixtures/README.md',
];
const fixtures = path.join(__dirname, '..', 'fixtures');

describe('README', () => {
  it('starts with the two set-up commands, and package.json has them', () => {
    const head = readme.slice(0, 800);
    expect(head).toContain('npm install && npm run train');
    expect(head).toContain('npm test');
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    expect(pkg.scripts.train).toBe('node scripts/build.mjs && node dist/train.cjs'); // builds first
    // npm test runs the unit project; the integration project runs apart, and .ci/run runs both
    expect(pkg.scripts.test).toBe('jest --selectProjects unit');
    expect(pkg.scripts['test:integration']).toBe('jest --selectProjects integration');
    expect(read('.ci/run')).toContain('npm run test:integration -- --json');
    expect(readme).toContain('`npm run test:integration`');
  });

  it('says why no install script runs, next to the set-up commands', () => {
    // scripts/build_package.test.ts checks that .npmrc turns install scripts off and that train builds first
    const note = readme.indexOf('`ignore-scripts=true`');
    expect(note).toBeGreaterThan(readme.indexOf('npm install && npm run train'));
    expect(note).toBeLessThan(readme.indexOf('## Install'));
  });

  it('states the test count and time in the sentence .ci/run checks against its own run', () => {
    const m = /About ([\d,]+) tests in about (\d+) minutes on 2 cores/.exec(readme);
    expect(m).not.toBeNull();
    const tests = Number((m as RegExpExecArray)[1].replace(/,/g, ''));
    const minutes = Number((m as RegExpExecArray)[2]);
    // .ci/run runs the check on its jest report
    expect(read('.ci/run')).toContain('node scripts/readme_test_count.mjs "$report/jest.json"');
    // the check, on jest reports made up here: one that agrees with README, and ones that do not
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-readme-count-'));
    const check = (total: number, seconds: number, readmeFile = 'README.md') => {
      const report = path.join(dir, 'jest.json');
      const start = 1_700_000_000_000;
      fs.writeFileSync(
        report,
        JSON.stringify({
          numTotalTests: total,
          startTime: start,
          testResults: [
            {startTime: start, endTime: start + (seconds * 1000) / 2},
            {startTime: start + 1000, endTime: start + seconds * 1000},
          ],
        }),
      );
      const script = path.join(root, 'scripts', 'readme_test_count.mjs');
      const r = spawnSync(process.execPath, [script, report, path.join(root, readmeFile)], {
        encoding: 'utf8',
      });
      return {status: r.status, out: r.stdout + r.stderr};
    };
    try {
      expect(check(tests, minutes * 60).status).toBe(0);
      expect(check(Math.round(tests * 1.05), minutes * 60 * 1.5).status).toBe(0);
      const fewer = check(Math.round(tests * 0.8), minutes * 60);
      expect(fewer.status).toBe(1);
      expect(fewer.out).toMatch(/README\.md is off in the count/);
      // a slower run is a warning, not a failure: CI's machine may be loaded
      const slower = check(tests, minutes * 60 * 3);
      expect(slower.status).toBe(0);
      expect(slower.out).toMatch(/README\.md is off in the time.*a warning/);
      // a README without the sentence cannot be checked, and says so
      const noClaim = check(tests, minutes * 60, 'SECURITY.md');
      expect(noClaim.status).toBe(2);
      expect(noClaim.out).toMatch(/expected a sentence "About N tests in about M minutes/);
    } finally {
      fs.rmSync(dir, {recursive: true, force: true});
    }
  });

  it('names only npm scripts that exist', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const named = allDocs.flatMap((file) =>
      [...read(file).matchAll(/npm run ([a-z][a-z:-]*)/g)].map((m) => `${file}: ${m[1]}`),
    );
    const missing = named.filter((n) => pkg.scripts[n.split(': ')[1]] === undefined);
    expect(missing).toEqual([]);
    const names = new Set(named.map((n) => n.split(': ')[1]));
    for (const script of ['train', 'build', 'bench', 'test:browser', 'docs', 'demo']) {
      expect([...names]).toContain(script);
    }
  });

  it("shows the Transformers walkthrough's Node code exactly as examples/ runs it", () => {
    const doc = read('docs/transformers.md');
    const start = doc.indexOf('<!-- transformers-example:start -->');
    const end = doc.indexOf('<!-- transformers-example:end -->');
    expect(start).toBeGreaterThan(0);
    const block = doc.slice(start, end).split('```js\n')[1].split('```')[0].trim();
    const example = fs.readFileSync(path.join(root, 'examples', 'keras_gpt_generate.js'), 'utf8');
    expect(block.length).toBeGreaterThan(300);
    expect(example).toContain(block);
  });

  it('has a fidelity table row for every fixture case', () => {
    const doc = read('docs/fidelity.md');
    const table = doc.slice(
      doc.indexOf('<!-- fidelity:start -->'),
      doc.indexOf('<!-- fidelity:end -->'),
    );
    const rows = new Set([...table.matchAll(/^\| `([a-z0-9_]+)` \|/gm)].map((m) => m[1]));
    const cases = [
      ...fs.readdirSync(path.join(fixtures, 'keras')),
      ...fs.readdirSync(path.join(fixtures, 'tfjs_to_keras')),
      ...JSON.parse(fs.readFileSync(path.join(fixtures, 'reference.json'), 'utf8')).cases.map(
        (c: {case: string}) => c.case,
      ),
    ];
    expect(cases.length).toBeGreaterThan(25);
    expect([...rows].sort()).toEqual([...cases].sort());
  });

  it('tells a newcomer what the blocks assume: d2l, esbuild, the min.js file, a clone', () => {
    // "d2l" is expanded before (or where) it is first used
    const d2l = readme.indexOf('d2l');
    expect(readme.indexOf('Dive into Deep Learning')).toBeGreaterThan(0);
    expect(readme.indexOf('Dive into Deep Learning')).toBeLessThan(d2l + 200);
    expect(readme).toContain('https://d2l.ai');
    // no reference to material a user does not have
    expect(readme).not.toMatch(/seed notebook/i);
    // the bundler command is preceded by how to install esbuild
    const bundle = readme.indexOf('npx esbuild app.js');
    expect(readme.lastIndexOf('npm install --save-dev esbuild', bundle)).toBeGreaterThan(
      readme.lastIndexOf('```js', bundle),
    );
    // the script tag's file: where it is in the package
    const tag = readme.indexOf('<script src="tfjs-attention.min.js">');
    expect(readme.lastIndexOf('node_modules/tfjs-attention/dist/tfjs-attention.min.js', tag)).toBe(
      readme.lastIndexOf('node_modules/tfjs-attention/dist/tfjs-attention.min.js'),
    );
    expect(readme.lastIndexOf('node_modules/tfjs-attention/dist/', tag)).toBeGreaterThan(0);
    // the Generation block reads models/, which only a clone has, and says so
    const generation = readme.indexOf("fileSystem('models/addition')");
    const before = readme.slice(readme.lastIndexOf('## Generation', generation), generation);
    expect(before).toMatch(/not in the npm package/);
    expect(before).toMatch(/clone/);
  });

  it('links only to files that exist', () => {
    const broken: string[] = [];
    for (const file of allDocs) {
      for (const m of read(file).matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)) {
        const target = m[1];
        if (/^[a-z]+:/.test(target)) continue; // URLs
        if (target.startsWith('docs/api/') || target.startsWith('api/')) continue; // npm run docs
        if (!fs.existsSync(path.join(root, path.dirname(file), target))) {
          broken.push(`${file}: ${target}`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
