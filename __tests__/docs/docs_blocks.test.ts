/**
 * Every code block of README.md and docs/*.md runs as written.
 *
 * - `js` blocks run with Node against the built package: ES modules (`import ... from`) as .mjs,
 *   the others as CommonJS .cjs. They run in a fresh folder whose node_modules holds
 *   `tfjs-attention` (this checkout) and `@tensorflow/*`, with `models/` and `__tests__/` linked in
 *   for the committed models and fixtures they read; what they save stays in that folder.
 * - `ts` blocks are compiled by tsc in a project set up as README.md says (its `tsconfig.json`
 *   block as written, `"type": "module"`), against dist/index.d.ts; the emitted .js files run.
 * - `html` blocks run in Chromium (browser/__tests__/docs_html.test.ts); here, their scripts must
 *   be ones that suite can serve.
 * - `sh` blocks that bundle (`npx esbuild app.js ...`) run on the `js` block before them.
 * - Every fence names its language, so no runnable block hides as plain text.
 *
 * Where a block says in a comment what it prints, EXPECTED holds those lines, and the output must
 * contain them.
 */
import {execFileSync, spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {blocksOf, DocBlock, docFiles, isEsm, root} from '../helpers/doc_blocks';

const RUNNABLE = new Set(['js', 'ts', 'html', 'sh']);
const DESCRIPTIVE = new Set(['text', 'python', 'json']);

/** [file, a snippet that picks one block, what its output must contain] */
const EXPECTED: [string, string, string[]][] = [
  ['docs/generation.md', 'const preprocessor = {sequenceLength: 24', ['\ntrue']],
  [
    'docs/tokenizers.md',
    "split: 'model'",
    ["[ 3, 4, 4 ] [ 'hi', ' ', ' ' ]", "[ 3, 5 ] [ 'hi', '  ' ]"],
  ],
  ['README.md', "fileSystem('my-model')", ['[ 2, 16, 32 ]']],
  ['README.md', 'const validLens = tf.tensor1d([6, 3]', ['[ 2, 6, 32 ] [ 2, 4, 6, 6 ]', '\n0\n']],
  ['README.md', "fileSystem('my-ts-model')", ['[ 1, 2, 8 ] [ 1, 2, 3 ]']],
  ['README.md', 'TransformerEncoder({intermediateDim', ['[ 1, 8, 16 ]']],
  [
    'README.md',
    'TokenAndPositionEmbedding} = require',
    [
      ['2 x 5 x 32', '2 x 4 x 6', '2 x 4 x 8', '2 x 4 x 5', '2 x 4 x 6', '2 x 5 x 4 x 16'].join(
        '\n',
      ),
      '2 x 4 x 64',
    ],
  ],
  ['README.md', "fileSystem('models/addition')", ['123+045=0168$\n907+185=1092$']],
  ['docs/training.md', "fileSystem('models/reverse')", ['[ 7, 5, 3 ]']],
  ['README.md', "loadKerasModel('m.keras')", ['[ 1, 5, 3 ]']],
  ['docs/keras.md', "loadKerasModel('m.keras'", ['weights read\n[ 1, 5, 3 ]']],
  ['docs/transformers.md', 'k3_hub_mini_gpt', ['cached decoding: yes', 'greedy loop\nok']],
  ['docs/keras_hub_models.md', 'loadKerasHubPreset(', ['gpt2_causal_lm 16\n"the quick brownfo"']],
  [
    'docs/finetuning.md',
    'finetune(preset, texts',
    ['step 5/5 loss', 'losses fall: true', 'adapters true'],
  ],
];

const blocks = docFiles().flatMap(blocksOf);
let work: string;

function link(target: string, name: string): void {
  fs.mkdirSync(path.dirname(path.join(work, name)), {recursive: true});
  fs.symlinkSync(target, path.join(work, name));
}

function where(b: DocBlock): string {
  return `${b.file}:${b.line}`;
}

function runNode(file: string, cwd: string = work): string {
  const r = spawnSync(process.execPath, [file], {cwd, encoding: 'utf8', timeout: 90000});
  if (r.status !== 0) {
    throw new Error(`${path.basename(file)} exited ${r.status}:\n${r.stderr}\n${r.stdout}`);
  }
  return r.stdout;
}

function expectedFor(b: DocBlock): string[] {
  return EXPECTED.filter(([file, snippet]) => file === b.file && b.code.includes(snippet)).flatMap(
    ([, , lines]) => lines,
  );
}

beforeAll(() => {
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-docs-'));
  link(root, 'node_modules/tfjs-attention');
  link(path.join(root, 'node_modules', '@tensorflow'), 'node_modules/@tensorflow');
  link(path.join(root, 'node_modules', '@types'), 'node_modules/@types');
  link(path.join(root, 'models'), 'models');
  link(path.join(root, '__tests__'), '__tests__');
  // the Keras quick starts load m.keras, which their Python line saves: a Keras 3.15 fixture
  link(path.join(root, 'fixtures', 'keras_files', 'functional.keras'), 'm.keras');
});

afterAll(() => fs.rmSync(work, {recursive: true, force: true}));

describe('the documentation', () => {
  it('has runnable blocks in README.md and docs/, each fence naming its language', () => {
    const unnamed = blocks.filter((b) => !RUNNABLE.has(b.lang) && !DESCRIPTIVE.has(b.lang));
    expect(unnamed.map((b) => `${where(b)} \`\`\`${b.lang}`)).toEqual([]);
    const count = (lang: string) => blocks.filter((b) => b.lang === lang).length;
    expect(count('js')).toBeGreaterThanOrEqual(7);
    expect(count('ts')).toBeGreaterThanOrEqual(1);
    expect(count('html')).toBeGreaterThanOrEqual(1);
  });

  it('states what each of its expected outputs belongs to (one block per entry)', () => {
    for (const [file, snippet] of EXPECTED) {
      const hits = blocks.filter((b) => b.file === file && b.code.includes(snippet));
      expect([file, snippet, hits.length]).toEqual([file, snippet, 1]);
    }
  });

  describe.each(blocks.filter((b) => b.lang === 'js').map((b) => [where(b), b] as const))(
    'js block %s',
    (name, block) => {
      it('runs with Node as written and prints what it says', () => {
        const file = path.join(
          work,
          `${name.replace(/[^a-z0-9]+/gi, '_')}.${isEsm(block.code) ? 'mjs' : 'cjs'}`,
        );
        fs.writeFileSync(file, block.code);
        const out = runNode(file);
        for (const line of expectedFor(block)) expect(out).toContain(line);
      });
    },
  );

  it("type-checks every ts block with README's tsconfig.json, and runs what tsc emits", () => {
    // the project README.md describes: "type": "module" in package.json, its tsconfig.json block
    // as written, nothing else; `npx tsc`, then node on the emitted .js files
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    expect(readme).toContain('`"type": "module"`');
    const configs = blocksOf('README.md').filter(
      (b) => b.lang === 'json' && b.code.includes('"compilerOptions"'),
    );
    expect(configs.length).toBe(1);
    const project = path.join(work, 'ts-project');
    fs.mkdirSync(project);
    fs.writeFileSync(path.join(project, 'package.json'), '{"type": "module"}\n');
    fs.writeFileSync(path.join(project, 'tsconfig.json'), configs[0].code);
    const tsBlocks = blocks.filter((b) => b.lang === 'ts');
    const files = tsBlocks.map((b) => {
      const file = path.join(project, `${where(b).replace(/[^a-z0-9]+/gi, '_')}.ts`);
      fs.writeFileSync(file, b.code);
      return file;
    });
    const tsc = path.join(root, 'node_modules', 'typescript', 'bin', 'tsc');
    const check = spawnSync(process.execPath, [tsc], {cwd: project, encoding: 'utf8'});
    expect(check.stdout + check.stderr).toBe('');
    expect(check.status).toBe(0);
    tsBlocks.forEach((b, i) => {
      const out = runNode(files[i].replace(/\.ts$/, '.js'), project);
      for (const line of expectedFor(b)) expect(out).toContain(line);
    });
  });

  it('bundles the bundler example for the browser as its sh block says, with no Node module', () => {
    const shIndex = blocks.findIndex(
      (b) => b.lang === 'sh' && /^npx esbuild app\.js/m.test(b.code),
    );
    expect(shIndex).toBeGreaterThan(0);
    const app = blocks[shIndex - 1];
    expect(app.lang).toBe('js');
    fs.writeFileSync(path.join(work, 'app.js'), app.code);
    const command = blocks[shIndex].code.trim().split(/\s+/);
    expect(command.slice(0, 2)).toEqual(['npx', 'esbuild']);
    execFileSync(path.join(root, 'node_modules', '.bin', 'esbuild'), command.slice(2), {
      cwd: work,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const bundle = fs.readFileSync(path.join(work, 'bundle.js'), 'utf8');
    expect(bundle).toContain('TransformerEncoder');
    expect(bundle).not.toMatch(
      /from ?"(fs|zlib|stream|util|path)"|require\("(fs|zlib|stream|util|path)"\)/,
    );
  });

  it('says "clone" before every block that needs one (files or npm scripts the package lacks)', () => {
    // the npm package holds dist/ and the docs; models/, the fixtures, the scripts and the npm
    // run scripts are only in a clone of the repository
    const cloneOnly =
      /(^|[\s'"`(=])(\.\/)?(models|fixtures|__tests__|scale|examples|bench|scripts|demo)\/|\bnpm run\b/m;
    const unsaid: string[] = [];
    const needing: string[] = [];
    for (const file of docFiles()) {
      const lines = fs.readFileSync(path.join(root, file), 'utf8').split('\n');
      for (const b of blocksOf(file)) {
        if (b.lang === 'text' || b.lang === 'json' || !cloneOnly.test(b.code)) continue;
        needing.push(where(b));
        // the block's section: from the heading above it to the block
        let start = b.line - 2;
        while (start > 0 && !/^#/.test(lines[start])) start--;
        if (!/\bclone\b/i.test(lines.slice(start, b.line - 1).join('\n'))) unsaid.push(where(b));
      }
    }
    expect(needing).toContain(
      where(blocksOf('README.md').find((b) => b.code.includes("fileSystem('models/addition')"))!),
    );
    expect(unsaid).toEqual([]);
  });

  it('runs the fine-tuning commands as written (README, the walkthrough), with their progress bar', () => {
    const runs = blocks.filter(
      (b) => b.lang === 'sh' && /^npx tfjs-attention-finetune /.test(b.code),
    );
    expect(runs.map((b) => b.file).sort()).toEqual(['README.md', 'docs/finetuning.md']);
    // as `npm install tfjs-attention` links the package's bin
    link(path.join(root, 'dist', 'finetune.cjs'), 'node_modules/.bin/tfjs-attention-finetune');
    link(path.join(root, 'examples'), 'examples');
    for (const b of runs) {
      fs.rmSync(path.join(work, 'finetuned'), {recursive: true, force: true});
      const r = spawnSync('bash', ['-c', b.code], {cwd: work, encoding: 'utf8', timeout: 120000});
      expect([where(b), r.status]).toEqual([where(b), 0]);
      expect(r.stderr).not.toMatch(/tfjs-attention-finetune: (error|failed)/);
      expect(r.stdout).toMatch(/sample before: ".*"\n/);
      expect(r.stdout).toMatch(/step 20\/20 \[=+\] loss \d+\.\d{4} · \d+ tokens\/s · 0:\d\d left/);
      expect(r.stdout).toMatch(
        /wrote finetuned\/adapters\.lora\.h5, finetuned\/preset\/, finetuned\/loss\.png/,
      );
      const files = [
        'adapters.lora.h5',
        'preset/model.weights.h5',
        'preset/config.json',
        'loss.png',
        'losses.json',
      ];
      if (b.code.includes('--checkpoint-every 10')) {
        files.push('checkpoints/step-10.lora.h5', 'checkpoints/step-20.lora.h5');
      }
      for (const f of files) {
        expect([where(b), f, fs.existsSync(path.join(work, 'finetuned', f))]).toEqual([
          where(b),
          f,
          true,
        ]);
      }
    }
  });

  it('loads html blocks only from scripts the browser suite serves', () => {
    const tfjsVersion = JSON.parse(
      fs.readFileSync(path.join(root, 'node_modules/@tensorflow/tfjs/package.json'), 'utf8'),
    ).version;
    for (const b of blocks.filter((x) => x.lang === 'html')) {
      const srcs = [...b.code.matchAll(/<script src="([^"]+)"/g)].map((m) => m[1]);
      expect(srcs.length).toBeGreaterThan(0);
      for (const src of srcs) {
        expect([
          `https://cdn.jsdelivr.net/npm/@tensorflow/tfjs@${tfjsVersion}/dist/tf.min.js`,
          'tfjs-attention.min.js',
        ]).toContain(src);
      }
    }
  });
});
