/** README.md stays true: the set-up commands and a fidelity table that covers every fixture. */
import * as fs from 'fs';
import * as path from 'path';

const root = path.resolve(__dirname, '..');
const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
const fixtures = path.join(__dirname, 'fixtures');

describe('README', () => {
  it('starts with the two set-up commands, and package.json has them', () => {
    const head = readme.slice(0, 800);
    expect(head).toContain('npm install && npm run train');
    expect(head).toContain('npm test');
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    expect(pkg.scripts.train).toBe('node dist/train.cjs');
    expect(pkg.scripts.pretrain).toContain('build'); // npm run train builds first
    expect(pkg.scripts.test).toBe('jest');
  });

  it('names only npm scripts that exist', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const docs = [readme, fs.readFileSync(path.join(root, 'ARCHITECTURE.md'), 'utf8')].join('\n');
    const named = new Set([...docs.matchAll(/npm run ([a-z][a-z:-]*)/g)].map((m) => m[1]));
    const missing = [...named].filter((n) => pkg.scripts[n] === undefined);
    expect(missing).toEqual([]);
    expect([...named]).toEqual(expect.arrayContaining(['train', 'build', 'bench', 'test:browser']));
  });

  it("shows the Transformers walkthrough's Node code exactly as examples/ runs it", () => {
    const start = readme.indexOf('<!-- transformers-example:start -->');
    const end = readme.indexOf('<!-- transformers-example:end -->');
    expect(start).toBeGreaterThan(0);
    const block = readme.slice(start, end).split('```js\n')[1].split('```')[0].trim();
    const example = fs.readFileSync(path.join(root, 'examples', 'keras_gpt_generate.js'), 'utf8');
    expect(block.length).toBeGreaterThan(300);
    expect(example).toContain(block);
  });

  it('has a fidelity table row for every fixture case', () => {
    const table = readme.slice(
      readme.indexOf('<!-- fidelity:start -->'),
      readme.indexOf('<!-- fidelity:end -->'),
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
});
