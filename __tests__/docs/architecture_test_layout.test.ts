/**
 * The test layout ARCHITECTURE.md states ("Tests"): __tests__/ mirrors src/. Every `*.test.ts`
 * under __tests__/ lies in the folder of its subject — `__tests__/<folder>/` for `src/<folder>/`,
 * `__tests__/bench/`, `browser/`, `demo/`, `scripts/` for those folders of the repository,
 * `__tests__/docs/` for the docs (README.md and the other pages, docs/, examples/) — and is named
 * for a file or folder there: `<name>.test.ts`, or `<name>_<aspect>.test.ts` for one side of a
 * large subject. helpers/, fixtures/ and types/ hold what tests share and read; nothing else
 * under __tests__/ is other than a test.
 */
import * as fs from 'fs';
import * as path from 'path';

const ROOT = path.join(__dirname, '..', '..');
const TESTS = path.join(ROOT, '__tests__');

/** Folders of __tests__/ that hold no tests: shared code, data, type checks, generated files. */
const SUPPORT = new Set(['helpers', 'fixtures', 'types', '.generated']);
/** Folders of the repository besides src/ whose code tests run (the builds, the benchmark, the
 * browser runner's checks, the demo server). */
const ROOT_FOLDERS = new Set(['bench', 'browser', 'demo', 'scripts']);
/** The docs' folders: docs/ (its pages, and typedoc's API reference: `npm run docs`) and
 * examples/ (the scripts the README's walkthroughs run). */
const DOC_FOLDERS = ['docs', 'examples'];

/** Every file under `dir`, relative to __tests__/ with '/' separators, SUPPORT folders skipped. */
function testFiles(dir = TESTS): string[] {
  return fs.readdirSync(dir, {withFileTypes: true}).flatMap((e) => {
    const full = path.join(dir, e.name);
    const rel = path.relative(TESTS, full).split(path.sep).join('/');
    if (e.isDirectory()) return dir === TESTS && SUPPORT.has(e.name) ? [] : testFiles(full);
    return [rel];
  });
}

/** The names a test of `dir` may take: its files without extensions, its folders, its own name. */
function namesIn(dir: string): string[] {
  const own = path.basename(dir);
  return [own, ...fs.readdirSync(dir).map((n) => n.replace(/\..*$/, ''))].filter((n) => n !== '');
}

/** The names a docs test may take: the pages at the root and in docs/, and the docs' folders. */
function docNames(): string[] {
  const pages = (dir: string) =>
    fs
      .readdirSync(dir)
      .filter((n) => n.endsWith('.md'))
      .map((n) => n.slice(0, -3).toLowerCase());
  return [...pages(ROOT), ...pages(path.join(ROOT, 'docs')), ...DOC_FOLDERS];
}

/** What is wrong with where the test file `rel` (relative to __tests__/) lies, or null. */
function misplaced(rel: string): string | null {
  if (!rel.endsWith('.test.ts')) {
    return (
      `__tests__/${rel}: expected only *.test.ts outside ${[...SUPPORT].join('/, ')}/, ` +
      `received another file (code tests share belongs in helpers/)`
    );
  }
  const folder = path.posix.dirname(rel);
  const base = path.posix.basename(rel, '.test.ts');
  const first = folder.split('/')[0];
  let names: string[];
  let where: string;
  if (first === 'docs') {
    if (folder !== 'docs') {
      return `__tests__/${rel}: expected the docs' tests directly in __tests__/docs/, received a folder under it`;
    }
    names = docNames();
    where = 'the docs (README.md and the other pages, docs/*.md, examples/)';
  } else {
    const source = ROOT_FOLDERS.has(first)
      ? path.join(ROOT, folder)
      : path.join(ROOT, 'src', folder === '.' ? '' : folder);
    where = path.relative(ROOT, source).split(path.sep).join('/') + '/';
    if (!fs.existsSync(source) || !fs.statSync(source).isDirectory()) {
      return (
        `__tests__/${rel}: expected a folder of __tests__/ that mirrors a folder of src/ ` +
        `(or ${[...ROOT_FOLDERS].join('/, ')}/, docs/), received '${folder}/', and ${where} does not exist`
      );
    }
    names = namesIn(source);
  }
  if (names.some((n) => base === n || base.startsWith(`${n}_`))) return null;
  return (
    `__tests__/${rel}: expected a name for a file or folder of ${where} ` +
    `('<name>.test.ts' or '<name>_<aspect>.test.ts'), received '${base}'`
  );
}

describe('__tests__/ mirrors src/', () => {
  it('every test file lies in the folder of its subject and is named for a file or folder there', () => {
    const files = testFiles();
    expect(files.filter((f) => f.endsWith('.test.ts')).length).toBeGreaterThan(90);
    expect(files.map(misplaced).filter((m) => m !== null)).toEqual([]);
  });

  it('names what is wrong: a folder src/ lacks, a name src/ lacks, a file that is no test', () => {
    expect(misplaced('generate/compiled_step_int8.test.ts')).toBeNull();
    expect(misplaced('docs/readme_image.test.ts')).toBeNull();
    expect(misplaced('scripts/build_package.test.ts')).toBeNull();
    expect(misplaced('session_review.test.ts')).toBe(
      '__tests__/session_review.test.ts: expected a name for a file or folder of src/ ' +
        "('<name>.test.ts' or '<name>_<aspect>.test.ts'), received 'session_review'",
    );
    expect(misplaced('decoding/step.test.ts')).toMatch(
      /^__tests__\/decoding\/step\.test\.ts: expected a folder of __tests__\/ that mirrors a folder of src\/ .*received 'decoding\/', and src\/decoding\/ does not exist$/,
    );
    expect(misplaced('docs/keras/x.test.ts')).toMatch(/received a folder under it$/);
    expect(misplaced('hub_families_fixture.ts')).toMatch(/expected only \*\.test\.ts outside/);
  });
});
