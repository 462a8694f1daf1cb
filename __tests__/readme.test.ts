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
    expect(pkg.scripts.train).toBeDefined();
    expect(pkg.scripts.test).toBe('jest');
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
