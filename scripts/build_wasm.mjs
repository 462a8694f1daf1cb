// Compiles the package's WebAssembly SIMD modules (AssemblyScript) and writes each, as base64,
// into a TypeScript file, so every bundle carries them without a separate file:
// - wasm/kernels.ts (products and the masked softmax of the layers) -> src/kernels/wasm_binary.ts
// - wasm/step_kernels.ts (the kernels of a compiled decoding step) -> src/kernels/step_kernels_binary.ts
// - wasm/step_int8_relaxed.ts (the step's int8 products from the same sources, built with relaxed
//   SIMD: ASC_FEATURE_RELAXED_SIMD picks their relaxed sums) -> src/kernels/step_int8_relaxed_binary.ts
// The entries only re-export; the kernels live by job in the folders of wasm/ (simd/, products/,
// packed/, int8/, repack/, attention/, ops/), a file used by both modules written once. Every
// file under wasm/ must be reached from an entry (no file left behind by a move), an entry must
// hold nothing but re-exports, and no function is defined twice (by name or by body).
// `--check`: compile all three and exit 1 (writing nothing) when a committed module differs.
import {readdirSync, readFileSync, writeFileSync} from 'node:fs';
import {dirname, join, relative} from 'node:path';
import {fileURLToPath} from 'node:url';

import asc from 'assemblyscript/asc';

const root = fileURLToPath(new URL('..', import.meta.url));

const MODULES = [
  {
    source: 'wasm/kernels.ts',
    out: 'src/kernels/wasm_binary.ts',
    name: 'KERNELS_WASM_BASE64',
    what: "The kernels' WebAssembly module",
  },
  {
    source: 'wasm/step_kernels.ts',
    out: 'src/kernels/step_kernels_binary.ts',
    name: 'STEP_KERNELS_WASM_BASE64',
    what: "The decoding step's WebAssembly module",
  },
  {
    source: 'wasm/step_int8_relaxed.ts',
    out: 'src/kernels/step_int8_relaxed_binary.ts',
    name: 'STEP_INT8_RELAXED_WASM_BASE64',
    what: "The decoding step's int8 products with relaxed SIMD (a WebAssembly module)",
    // the step module's int8 sources again, with i16x8.relaxed_dot_i8x16_i7x16_s
    features: ['relaxed-simd'],
  },
];

/** Every `.ts` file under `dir` (relative to the root, with forward slashes). */
function sourcesUnder(dir) {
  return readdirSync(join(root, dir), {withFileTypes: true}).flatMap((e) =>
    e.isDirectory()
      ? sourcesUnder(`${dir}/${e.name}`)
      : e.name.endsWith('.ts')
        ? [`${dir}/${e.name}`]
        : [],
  );
}

/** The files `entry` is built from: itself and every file it imports, transitively. */
function sourcesOf(entry) {
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(join(root, file), 'utf8');
    for (const [, spec] of text.matchAll(/from\s+'(\.{1,2}\/[^']+)'/g)) {
      visit(
        relative(root, join(root, dirname(file), `${spec}.ts`))
          .split('\\')
          .join('/'),
      );
    }
  };
  visit(entry);
  return seen;
}

/**
 * The layout's rules: an entry holds only comments and re-exports, and every file under wasm/ is
 * a module's source. Returns the files both of the first two modules (the layers' and the step's)
 * are built from.
 */
function checkLayout() {
  const built = MODULES.map(({source}) => sourcesOf(source));
  for (const {source} of MODULES) {
    const code = readFileSync(join(root, source), 'utf8')
      .split('\n')
      .filter((line) => line.trim() !== '' && !line.trim().startsWith('//'));
    const other = code.filter((line) => !/^export \{[^}]*\} from '\.\/[^']+';$/.test(line));
    if (other.length > 0) {
      throw new Error(
        `${source} must only re-export (export {...} from './...'), received: ${other[0].trim()}`,
      );
    }
  }
  const orphans = sourcesUnder('wasm').filter((f) => !built.some((files) => files.has(f)));
  if (orphans.length > 0) {
    throw new Error(
      `every file under wasm/ must be a module's source (imported from ${MODULES.map((m) => m.source).join(', ')}), ` +
        `received files none imports: ${orphans.join(', ')}`,
    );
  }
  const copies = copiedFunctions(sourcesUnder('wasm'));
  if (copies.length > 0) {
    throw new Error(
      `nothing may be copied between the files of wasm/ (one source, imported where needed): ` +
        `expected each function once, received ${copies.join('; ')}`,
    );
  }
  return [...built[0]].filter((f) => built[1].has(f)).sort();
}

/**
 * Top-level functions defined twice under wasm/, by name or by body (whitespace aside, name
 * aside): "name in a and b" for each.
 */
function copiedFunctions(files) {
  const byName = new Map();
  const byBody = new Map();
  const found = [];
  for (const file of files) {
    const text = readFileSync(join(root, file), 'utf8');
    for (const m of text.matchAll(/^(?:export )?function (\w+)([\s\S]*?)^\}$/gm)) {
      const [, name, rest] = m;
      const body = rest.replace(/\s+/g, ' ').trim();
      const same = byName.get(name) ?? byBody.get(body);
      if (same != null) found.push(`${name} in ${same} and ${file}`);
      byName.set(name, file);
      byBody.set(body, `${file} (${name})`);
    }
  }
  return found;
}

/** The module compiled from `source`, with the wasm `features` beyond SIMD (e.g. relaxed-simd). */
async function compile(source, features = []) {
  let wasm;
  const {error, stdout, stderr} = await asc.main(
    [
      source,
      '--outFile',
      'module.wasm',
      '--runtime',
      'stub',
      '--optimizeLevel',
      '3',
      '--shrinkLevel',
      '0',
      '--noAssert',
      '--enable',
      ['simd', ...features].join(','),
      '--initialMemory',
      '1',
      // the memory is imported: the package gives it its own memory on tfjs' cpu backend, and
      // tfjs' wasm heap on the wasm backend (kernels then read and write tensors where they are)
      '--importMemory',
      '--baseDir',
      root,
    ],
    {
      writeFile(name, contents) {
        if (name === 'module.wasm') wasm = contents;
      },
    },
  );
  if (error) {
    console.error(stderr.toString());
    throw error;
  }
  if (stdout.toString()) console.log(stdout.toString());

  // On tfjs' heap a module must write only where it is told: no data segment (id 11), no
  // memory of its own (id 5), no start function (id 8).
  const sections = [];
  for (let i = 8; i < wasm.length;) {
    const id = wasm[i++];
    let len = 0;
    for (let shift = 0; ; shift += 7) {
      const b = wasm[i++];
      len |= (b & 127) << shift;
      if (!(b & 128)) break;
    }
    sections.push(id);
    i += len;
  }
  const forbidden = sections.filter((id) => id === 5 || id === 8 || id === 11);
  if (forbidden.length > 0) {
    throw new Error(`the module of ${source} has sections ${forbidden} (memory, start or data)`);
  }
  return wasm;
}

const check = process.argv.includes('--check');
let shared;
try {
  shared = checkLayout();
} catch (e) {
  console.error(e.message);
  process.exit(1);
}
console.log(`wasm/ layout: both modules built from ${shared.join(', ')}`);
let differs = false;
for (const {source, out, name, what, features} of MODULES) {
  const wasm = await compile(source, features);
  const text = `// Generated by scripts/build_wasm.mjs from ${source} (AssemblyScript): do not edit.
/** ${what} (${wasm.length} bytes), base64. */
export const ${name} =
  '${Buffer.from(wasm).toString('base64')}';
`;
  if (check) {
    let committed = '';
    try {
      committed = readFileSync(`${root}${out}`, 'utf8');
    } catch {
      // missing: differs
    }
    if (committed !== text) {
      console.error(`${out} differs from a fresh build of ${source}`);
      differs = true;
    } else {
      console.log(`${out} matches (${wasm.length} bytes)`);
    }
  } else {
    writeFileSync(`${root}${out}`, text);
    console.log(`wrote ${out} (${wasm.length} bytes of wasm)`);
  }
}
if (differs) process.exit(1);
