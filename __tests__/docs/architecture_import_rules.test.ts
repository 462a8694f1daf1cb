/**
 * The import rules ARCHITECTURE.md states ("Layers of the package"): its table "folder | may
 * import" is parsed from the page, and every relative import of every file under src/ (imports,
 * type imports, re-exports, require and dynamic import, comments skipped) is checked against it.
 * The section's file table is checked too: every path it names exists; and its diagram draws every
 * folder of the table.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as ts from 'typescript';

const ROOT = path.join(__dirname, '..', '..');
const SRC = path.join(ROOT, 'src');
/** The folder of the files directly in src/ (index.ts, browser.ts, public_api.ts). */
const TOP = './';

/** The text of one `## ` section of a markdown page, without its heading. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n## ${heading}\n`);
  if (start < 0) throw new Error(`ARCHITECTURE.md: expected a section '## ${heading}', found none`);
  const body = markdown.slice(start + heading.length + 5);
  const end = body.indexOf('\n## ');
  return end < 0 ? body : body.slice(0, end);
}

/** The rows of the markdown table whose header row is `header`, as cells. */
function tableRows(text: string, header: string): string[][] {
  const lines = text.split('\n');
  const at = lines.findIndex((l) => l.trim() === header);
  if (at < 0) throw new Error(`ARCHITECTURE.md: expected a table '${header}', found none`);
  const rows: string[][] = [];
  for (const line of lines.slice(at + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

const codeSpans = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1]);

/** folder -> the folders it may import (`kernels/`, ..., `./` for the files directly in src/). */
function parseRules(markdown: string): Map<string, Set<string>> {
  const rules = new Map<string, Set<string>>();
  const rows = tableRows(section(markdown, 'Layers of the package'), '| folder | may import |');
  for (const [folder, allowed] of rows) {
    const [name, ...more] = codeSpans(folder);
    if (name === undefined || more.length > 0 || rules.has(name)) {
      throw new Error(`ARCHITECTURE.md: expected one new folder per row, received '${folder}'`);
    }
    rules.set(name, new Set(codeSpans(allowed)));
  }
  return rules;
}

/** Every .ts file under src/, relative to src/ with '/' separators. */
function sourceFiles(dir = SRC): string[] {
  return fs.readdirSync(dir, {withFileTypes: true}).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return e.name.endsWith('.ts') ? [path.relative(SRC, full).split(path.sep).join('/')] : [];
  });
}

/** The folder a path relative to src/ belongs to: its first segment, or `./`. */
const folderOf = (file: string) => (file.includes('/') ? `${file.split('/')[0]}/` : TOP);

/** The relative module specifiers of a file's source (comments skipped, type imports kept). */
function relativeImports(source: string): string[] {
  return ts
    .preProcessFile(source, true, true)
    .importedFiles.map((f) => f.fileName)
    .filter((name) => name.startsWith('.'));
}

/** Each relative import of `file` (relative to src/) that the rules forbid, with the reason. */
function violations(rules: Map<string, Set<string>>, file: string, source: string): string[] {
  const from = folderOf(file);
  const allowed = rules.get(from);
  if (!allowed) return [`${file}: its folder ${from} has no row in the table`];
  const out: string[] = [];
  for (const spec of relativeImports(source)) {
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
    if (target.startsWith('../')) {
      out.push(`${file} imports '${spec}': expected a module under src/, received ${target}`);
      continue;
    }
    const to = folderOf(target);
    if (!allowed.has(to)) {
      out.push(
        `${file} imports '${spec}' (${to}): expected ${from} to import only ` +
          `${[...allowed].join(', ')}, received ${to}`,
      );
    }
  }
  return out;
}

const architecture = fs.readFileSync(path.join(ROOT, 'ARCHITECTURE.md'), 'utf8');
const rules = parseRules(architecture);
const files = sourceFiles();
const checkAll = (r: Map<string, Set<string>>, read: (f: string) => string) =>
  files.flatMap((f) => violations(r, f, read(f)));
const readSrc = (f: string) => fs.readFileSync(path.join(SRC, f), 'utf8');

describe('import rules of ARCHITECTURE.md', () => {
  it('has a row for every folder under src/ (and ./ for its files), and none for another', () => {
    const folders = fs
      .readdirSync(SRC, {withFileTypes: true})
      .filter((e) => e.isDirectory())
      .map((e) => `${e.name}/`);
    expect([...rules.keys()].sort()).toEqual([...folders, TOP].sort());
    // every folder a row allows is a row too
    for (const allowed of rules.values()) {
      for (const f of allowed) expect([...rules.keys()]).toContain(f);
    }
    expect(files.length).toBeGreaterThan(80);
  });

  it("the section's diagram draws every folder of the table", () => {
    const diagram = /```\n([\s\S]*?)```/.exec(section(architecture, 'Layers of the package'));
    expect(diagram).not.toBeNull();
    // the folders drawn: a word ending in '/' at the start of a line or after an arrow
    const drawn = new Set(
      [...(diagram as RegExpExecArray)[1].matchAll(/(?:^|[─←→┘┴┤│]\s*|\s{2})([a-z_]+\/)/gm)].map(
        (m) => m[1],
      ),
    );
    const rows = [...rules.keys()].filter((f) => f !== TOP);
    expect([...drawn].filter((f) => rows.includes(f)).sort()).toEqual(rows.sort());
  });

  it('every relative import of every file under src/ obeys the table', () => {
    expect(checkAll(rules, readSrc)).toEqual([]);
    // the scan sees the imports: the package's index reaches layers/, interop/ reaches io/
    expect(relativeImports(readSrc('index.ts'))).toContain('./layers/register');
    expect(relativeImports(readSrc('interop/keras.ts'))).toContain('../io/topology_guard');
  });

  it('states the rules of the page: nothing imports train/, io/ only layers/ (contracts), kernels/ nothing else', () => {
    for (const [folder, allowed] of rules) {
      if (folder !== 'train/') expect([folder, allowed.has('train/')]).toEqual([folder, false]);
    }
    const row = (f: string) => [...(rules.get(f) ?? [])].sort();
    expect(row('io/')).toEqual(['io/', 'layers/']);
    expect(row('kernels/')).toEqual(['kernels/']);
    expect(row('ops/')).toEqual(['kernels/', 'ops/']);
    expect(row('layers/')).toEqual(['kernels/', 'layers/', 'ops/']);
  });

  it('reports a forbidden import added to a file (in memory), naming it', () => {
    const withImport = (file: string, spec: string) => (f: string) =>
      f === file ? `${readSrc(f)}\nimport {x} from '${spec}';\n` : readSrc(f);
    expect(checkAll(rules, withImport('kernels/flags.ts', '../ops/masking'))).toEqual([
      "kernels/flags.ts imports '../ops/masking' (ops/): expected kernels/ to import only " +
        'kernels/, received ops/',
    ]);
    expect(checkAll(rules, withImport('io/paths.ts', '../interop/keras'))).toHaveLength(1);
    expect(checkAll(rules, withImport('layers/register.ts', '../interop/keras'))).toHaveLength(1);
    expect(checkAll(rules, withImport('index.ts', './train/train'))).toHaveLength(1);
    expect(checkAll(rules, withImport('ops/einsum.ts', '../../package.json'))).toEqual([
      "ops/einsum.ts imports '../../package.json': expected a module under src/, received " +
        '../package.json',
    ]);
    // a type import and a re-export are imports too; a commented-out one is not
    const added = (text: string) => (f: string) =>
      f === 'ops/einsum.ts' ? `${readSrc(f)}\n${text}\n` : readSrc(f);
    expect(
      checkAll(rules, added("import type {Shape} from '../layers/engine/shapes';")),
    ).toHaveLength(1);
    expect(checkAll(rules, added("export * from '../generate/generate';"))).toHaveLength(1);
    expect(checkAll(rules, added("const m = require('../interop/keras');"))).toHaveLength(1);
    expect(checkAll(rules, added("// import {x} from '../generate/generate';"))).toEqual([]);
    // a folder without a row
    const noIo = new Map([...rules].filter(([k]) => k !== 'io/'));
    expect(checkAll(noIo, readSrc)).toContain(
      'io/paths.ts: its folder io/ has no row in the table',
    );
  });

  it('reads the rules from the page: a row changed on the page changes the verdict', () => {
    const stricter = architecture.replace(
      '| `interop/` | `interop/`, `io/`, `hub_models/`, `tokenizers/`, `layers/`, `ops/`, `kernels/` |',
      '| `interop/` | `interop/`, `hub_models/`, `tokenizers/`, `layers/`, `ops/`, `kernels/` |',
    );
    expect(stricter).not.toBe(architecture);
    const found = checkAll(parseRules(stricter), readSrc);
    expect(found.length).toBeGreaterThan(0);
    expect(found.every((v) => v.startsWith('interop/') && v.includes('(io/)'))).toBe(true);
  });

  it("the section's file table names files that exist", () => {
    const rows = tableRows(section(architecture, 'Layers of the package'), '| file | holds |');
    expect(rows.length).toBeGreaterThan(20);
    const missing: string[] = [];
    for (const [cell] of rows) {
      for (const p of codeSpans(cell)) {
        // paths of src/ are written from src/ (`ops/masking.ts`); others from the root
        const candidates = [path.join(SRC, p), path.join(ROOT, p)];
        const exists = (c: string) =>
          p.includes('*')
            ? fs
                .readdirSync(path.dirname(c))
                .some((n) =>
                  new RegExp(`^${path.basename(c).replace(/\./g, '\\.').replace('*', '.*')}$`).test(
                    n,
                  ),
                )
            : fs.existsSync(c);
        if (!candidates.some((c) => fs.existsSync(path.dirname(c)) && exists(c))) missing.push(p);
      }
    }
    expect(missing).toEqual([]);
  });
});
