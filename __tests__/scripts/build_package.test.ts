/** The built package, used as a user would: plain Node require / import, types, browser bundle. */
import {execFileSync, spawnSync} from 'child_process';
import * as os from 'os';
import * as fs from 'fs';
import {builtinModules} from 'module';
import * as path from 'path';
import * as ts from 'typescript';

const root = path.resolve(__dirname, '..', '..');

function node(args: string[]): string {
  return execFileSync(process.execPath, args, {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

// dist/ is built by jest's globalSetup (__tests__/helpers/global_setup.js).
describe('the built package', () => {
  it('has the files the exports map names', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
    const entry = pkg.exports['.'];
    for (const file of [entry.types, entry.import, entry.require, pkg.unpkg]) {
      expect(fs.existsSync(path.join(root, file))).toBe(true);
    }
    // installs from a git URL build dist/ (which git does not hold) through `prepare`
    expect(pkg.scripts.prepare).toBe('node scripts/build.mjs');
    expect(pkg.peerDependencies['@tensorflow/tfjs-core']).toBe('^4.22.0');
    expect(pkg.peerDependencies['@tensorflow/tfjs-layers']).toBe('^4.22.0');
    // index.d.ts re-exports the shared list (public_api.d.ts) and adds the Node-only names
    const dts = ['dist/index.d.ts', 'dist/public_api.d.ts']
      .map((f) => fs.readFileSync(path.join(root, f), 'utf8'))
      .join('\n');
    expect(dts).toMatch(/export \* from '\.\/public_api'/);
    for (const name of [
      'MultiHeadAttention',
      'DotProductAttention',
      'Attention',
      'AdditiveAttention',
      'EinsumDense',
      'einsum',
      'maskedSoftmax',
      'sequenceMask',
      'fileSystem',
      'layers',
    ]) {
      expect(dts).toMatch(new RegExp(`\\b${name}\\b`));
    }
  });

  it("works from a plain Node script with require('tfjs-attention'), registering the layers", () => {
    const out = node([
      '-e',
      `const tf = require('@tensorflow/tfjs');
       const A = require('tfjs-attention');
       (async () => {
         const x = tf.input({shape: [4, 8]});
         const y = A.layers.multiHeadAttention({numHeads: 2, keyDim: 4, name: 'mha'}).apply(x);
         const model = tf.model({inputs: x, outputs: y});
         let saved;
         await model.save(tf.io.withSaveHandler(async (a) => { saved = a; return {modelArtifactsInfo: {}}; }));
         const loaded = await tf.loadLayersModel(tf.io.fromMemory(saved));
         const z = tf.ones([2, 4, 8]);
         const d = tf.max(tf.abs(tf.sub(model.predict(z), loaded.predict(z)))).dataSync()[0];
         console.log(JSON.stringify({shape: loaded.outputs[0].shape, diff: d, cls: loaded.getLayer('mha').getClassName(), einsum: A.einsum('ij->ji', tf.ones([2, 3])).shape}));
       })();`,
    ]);
    const result = JSON.parse(out.trim().split('\n').pop() as string);
    expect(result).toEqual({
      shape: [null, 4, 8],
      diff: 0,
      cls: 'MultiHeadAttention',
      einsum: [3, 2],
    });
  });

  it('works as an ES module', () => {
    const file = path.join(root, 'dist', 'esm-probe.mjs');
    fs.writeFileSync(
      file,
      `import * as tf from '@tensorflow/tfjs';
       import {MultiHeadAttention, maskedSoftmax} from 'tfjs-attention';
       const y = new MultiHeadAttention({numHeads: 1, keyDim: 2}).apply(tf.ones([1, 3, 4]));
       const w = maskedSoftmax(tf.ones([1, 1, 4]), tf.tensor1d([2], 'int32'));
       console.log(JSON.stringify({shape: y.shape, w: Array.from(w.dataSync())}));`,
    );
    try {
      const out = node([file]);
      expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual({
        shape: [1, 3, 4],
        w: [0.5, 0.5, 0, 0],
      });
    } finally {
      fs.rmSync(file);
    }
  });

  // The full run (npm pack, npm install of the tarball, an app with tfjs bundled by esbuild and
  // run in Chromium) is browser/__tests__/bundle.test.ts (npm run test:browser); here, without a
  // browser: what the tarball holds, and what a bundler takes from the package for the browser.
  it('packs dist/ without the CLI type files, with LICENSE', () => {
    const [{files}] = JSON.parse(
      execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
        cwd: root,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      }),
    ) as Array<{files: Array<{path: string}>}>;
    const paths = files.map((f) => f.path);
    for (const file of ['LICENSE', 'package.json', 'dist/browser.mjs', 'dist/index.mjs']) {
      expect(paths).toContain(file);
    }
    expect(paths.filter((p) => p.startsWith('dist/train/'))).toEqual([]);
    expect(paths.filter((p) => p.startsWith('src/'))).toEqual([]);
    // the build's record of its inputs (scripts/build_inputs.mjs) stays out of the tarball
    expect(paths.filter((p) => p.includes('.inputs.sha256'))).toEqual([]);
  });

  it("bundles for the browser through the 'browser' export condition (esbuild, no Node-only module)", () => {
    // an app's node_modules with the package linked in; tfjs left external (the app's own)
    const app = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-app-'));
    try {
      fs.mkdirSync(path.join(app, 'node_modules'));
      fs.symlinkSync(root, path.join(app, 'node_modules', 'tfjs-attention'));
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const esbuild = require('esbuild') as typeof import('esbuild');
      const result = esbuild.buildSync({
        stdin: {
          contents: `import {MultiHeadAttention, TransformerEncoder} from 'tfjs-attention';
                     globalThis.layers = [MultiHeadAttention, TransformerEncoder];`,
          resolveDir: app,
        },
        bundle: true,
        platform: 'browser',
        format: 'iife',
        external: ['@tensorflow/*'],
        metafile: true,
        write: false,
        logLevel: 'silent',
        absWorkingDir: app,
      });
      // the package's files in the bundle: its browser build only, with its split chunks (the
      // Keras file reader, behind import(), and what it shares) and the reader's libraries
      const inputs = result.metafile.inputs;
      const ours = path.join(root, 'dist', 'browser.mjs');
      const others = Object.keys(inputs)
        .map((f) => path.resolve(app, f))
        .filter((f) => f !== ours && f !== path.join(app, '<stdin>'));
      expect(Object.keys(inputs).map((f) => path.resolve(app, f))).toContain(ours);
      for (const f of others) {
        expect(f).toMatch(/dist\/browser-chunks\/[\w-]+\.mjs$|node_modules\/(fflate|jsfive)\//);
      }
      const oursKey = Object.keys(inputs).find((f) => path.resolve(app, f) === ours) as string;
      expect(
        [...new Set(inputs[oursKey].imports.map((i) => i.path))].filter(
          (p) => !p.includes('browser-chunks'),
        ),
      ).toEqual(['@tensorflow/tfjs-core', '@tensorflow/tfjs-layers']);
      const bundle = result.outputFiles[0].text;
      expect(bundle).not.toMatch(/require\("(fs|zlib|stream|util|path|pngjs)"\)/);
      expect(bundle).toContain('TransformerEncoder');
    } finally {
      fs.rmSync(app, {recursive: true, force: true});
    }
  });

  it('ships a browser bundle that reads tfjs from the global tf and defines tfAttention', () => {
    const out = node([
      '-e',
      `globalThis.tf = require('@tensorflow/tfjs');
       require('vm').runInThisContext(require('fs').readFileSync('dist/tfjs-attention.min.js', 'utf8'));
       const att = new tfAttention.DotProductAttention();
       const y = att.apply([tf.ones([1, 2, 3]), tf.ones([1, 4, 3])]);
       console.log(JSON.stringify({shape: y.shape, registered: !!tf.serialization.SerializationMap.getMap().classNameMap.MultiHeadAttention, fs: 'fileSystem' in tfAttention}));`,
    ]);
    expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual({
      shape: [1, 2, 3],
      registered: true,
      fs: false,
    });
  });
});

/** A module specifier's package name: '@scope/name/sub/path' -> '@scope/name', 'name/x' -> 'name'. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

interface SourceImport {
  file: string;
  pkg: string;
  /** inside a try block: the code handles the package being absent (an optional load) */
  optional: boolean;
}

/**
 * The packages src/ loads at run time, from the TypeScript syntax tree (comments and doc
 * examples are not code): `import ... from`, `export ... from`, `import 'x'`, `require('x')` and
 * `import('x')` with a literal name. `import type` is left out: the build erases it.
 */
function runtimeImports(dir: string): SourceImport[] {
  const found: SourceImport[] = [];
  const builtins = new Set(builtinModules);
  for (const entry of fs.readdirSync(dir, {recursive: true, withFileTypes: true})) {
    if (!entry.isFile() || !/\.ts$/.test(entry.name) || entry.name.endsWith('.d.ts')) continue;
    const file = path.join(entry.parentPath, entry.name);
    const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest);
    const add = (specifier: string, node: ts.Node) => {
      if (specifier.startsWith('.') || specifier.startsWith('node:')) return;
      if (builtins.has(specifier.split('/')[0])) return;
      let optional = false;
      for (let n: ts.Node = node; n.parent; n = n.parent) {
        if (ts.isTryStatement(n.parent) && n.parent.tryBlock === n) optional = true;
      }
      found.push({file: path.relative(root, file), pkg: packageOf(specifier), optional});
    };
    const visit = (node: ts.Node): void => {
      if (
        (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
        node.moduleSpecifier &&
        ts.isStringLiteral(node.moduleSpecifier)
      ) {
        const typeOnly = ts.isImportDeclaration(node)
          ? (node.importClause?.isTypeOnly ?? false)
          : node.isTypeOnly;
        if (!typeOnly) add(node.moduleSpecifier.text, node);
      } else if (
        ts.isCallExpression(node) &&
        (node.expression.kind === ts.SyntaxKind.ImportKeyword ||
          (ts.isIdentifier(node.expression) && node.expression.text === 'require')) &&
        node.arguments.length === 1 &&
        ts.isStringLiteral(node.arguments[0])
      ) {
        add(node.arguments[0].text, node);
      }
      ts.forEachChild(node, visit);
    };
    // parent pointers for the try-block check
    const setParents = (node: ts.Node): void =>
      ts.forEachChild(node, (child) => {
        (child as {parent: ts.Node}).parent = node;
        setParents(child);
      });
    setParents(source);
    visit(source);
  }
  return found;
}

describe("the package's dependencies", () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
    peerDependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  const imports = runtimeImports(path.join(root, 'src'));

  it('finds the imports it is meant to find (fflate behind import(), the CLI loading tfjs)', () => {
    const keys = imports.map((i) => `${i.pkg} ${i.file}${i.optional ? ' (optional)' : ''}`);
    expect(keys).toContain('fflate src/io/zip_entries.ts');
    expect(keys).toContain('pngjs src/viz/heatmap_png.ts');
    expect(keys).toContain('@tensorflow/tfjs src/train/cli.ts (optional)');
    // a doc example in a comment is not an import
    expect(imports.map((i) => i.pkg)).not.toContain('tfjs-attention');
  });

  it('declares only runtime dependencies that src/ imports', () => {
    const imported = new Set(imports.map((i) => i.pkg));
    const unused = Object.keys(pkg.dependencies ?? {}).filter((d) => !imported.has(d));
    // a package only a script or a test uses belongs in devDependencies
    expect({'dependencies that src/ never imports': unused}).toEqual({
      'dependencies that src/ never imports': [],
    });
  });

  it('declares every package src/ imports as a dependency or a peer dependency', () => {
    const declared = new Set([
      ...Object.keys(pkg.dependencies ?? {}),
      ...Object.keys(pkg.peerDependencies ?? {}),
    ]);
    // an import inside a try block is an optional load: the code says what to install
    const undeclared = imports
      .filter((i) => !i.optional && !declared.has(i.pkg))
      .map((i) => `${i.pkg} (${i.file})`);
    expect({'imports of undeclared packages': [...new Set(undeclared)]}).toEqual({
      'imports of undeclared packages': [],
    });
  });

  it('declares each package once: no runtime dependency is also a dev or peer dependency', () => {
    const dev = new Set(Object.keys(pkg.devDependencies ?? {}));
    const peer = new Set(Object.keys(pkg.peerDependencies ?? {}));
    const twice = Object.keys(pkg.dependencies ?? {}).filter((d) => dev.has(d) || peer.has(d));
    expect(twice).toEqual([]);
  });
});

describe('installing the checkout', () => {
  const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string | undefined>;
  };
  it('has no npm config that npm does not know (every npm command would warn about it)', () => {
    const r = spawnSync('npm', ['pkg', 'get', 'name'], {cwd: root, encoding: 'utf8'});
    expect(r.status).toBe(0);
    // the project's .npmrc only: a user's own ~/.npmrc is not this repository's business
    expect(r.stderr).not.toMatch(/Unknown project config/);
  });

  it("runs no dependency's install script (onnxruntime-node's downloads CUDA without a flag)", () => {
    // the install script of the onnxruntime-node installed here: with no flag set it downloads
    // the CUDA libraries on linux/x64 (and fails where nuget.org is unreachable)
    const clean = Object.fromEntries(
      Object.entries(process.env).filter(
        ([k]) => !/onnxruntime|^npm_config_ignore_scripts$/i.test(k),
      ),
    );
    const out = execFileSync(
      process.execPath,
      [
        '-e',
        `const u = require('onnxruntime-node/script/install-utils.js');
         const m = require('onnxruntime-node/script/install-metadata.js');
         console.log(JSON.stringify({flag: u.parseInstallFlag() ?? null, linux: m.requirements['linux/x64']}));`,
      ],
      {cwd: root, env: clean, encoding: 'utf8'},
    );
    expect(JSON.parse(out.trim().split('\n').pop() as string)).toEqual({
      flag: null,
      linux: ['cuda12'],
    });
    // so the checkout's .npmrc turns install scripts off, under a key npm knows
    const r = spawnSync('npm', ['config', 'get', 'ignore-scripts'], {
      cwd: root,
      env: clean,
      encoding: 'utf8',
    });
    expect(r.stdout.trim()).toBe('true');
    // and `npm run train` (whose pretrain would not run) builds dist/ itself
    expect(pkg.scripts.train).toMatch(/^node scripts\/build\.mjs && /);
    expect(pkg.scripts.pretrain).toBeUndefined();
  });
});
