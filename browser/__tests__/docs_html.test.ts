/**
 * The html blocks of README.md and docs/ run as written in Chromium: the page is the block, its
 * tfjs CDN script is answered with this checkout's tf.min.js (no network), and its
 * `tfjs-attention.min.js` is the built bundle (with the two modules it imports to read Keras
 * files). The README's script-tag block prints the backend, the output shape and the causal
 * attention weights of head 1, which are checked here; its Keras block gets a .keras file picked
 * in its file input (the Keras 3.15 fixture the Node quick start loads as m.keras) and must print
 * the model's output shape.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {Browser} from 'playwright-core';

import {blocksOf, docFiles, root} from '../../__tests__/helpers/doc_blocks';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const {start} = require('../server.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

const htmlBlocks = docFiles()
  .flatMap(blocksOf)
  .filter((b) => b.lang === 'html');
const tfjsMin = path.join(root, 'node_modules', '@tensorflow', 'tfjs', 'dist', 'tf.min.js');
const isKeras = (code: string) => code.includes('loadKerasModel');
const kerasFile = path.join(root, 'fixtures', 'keras_files', 'functional.keras');

let browser: Browser;
let work: string;

beforeAll(async () => {
  browser = await launchChromium();
  work = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-html-'));
});

afterAll(async () => {
  await browser?.close();
  fs.rmSync(work, {recursive: true, force: true});
});

it('finds the html blocks', () => {
  expect(htmlBlocks.length).toBeGreaterThanOrEqual(1);
});

it('the README has both: a script-tag block and a Keras file block', () => {
  const readme = htmlBlocks.filter((b) => b.file.endsWith('README.md'));
  expect(readme.filter((b) => isKeras(b.code)).length).toBe(1);
  expect(readme.filter((b) => !isKeras(b.code)).length).toBeGreaterThanOrEqual(1);
});

async function openBlock(name: string, code: string) {
  const page_ = path.join(work, `${name.replace(/[^a-z0-9]+/gi, '_')}.html`);
  fs.writeFileSync(page_, `<!doctype html>\n<meta charset="utf-8">\n${code}`);
  const server = await start({
    '/': page_,
    '/tfjs-attention.min.js': path.join(root, 'dist', 'tfjs-attention.min.js'),
    '/tfjs-attention-fflate.mjs': path.join(root, 'dist', 'tfjs-attention-fflate.mjs'),
    '/tfjs-attention-jsfive.mjs': path.join(root, 'dist', 'tfjs-attention-jsfive.mjs'),
  });
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));
  await page.route('https://cdn.jsdelivr.net/**', (route) =>
    route.request().url().endsWith('/@tensorflow/tfjs@4.22.0/dist/tf.min.js')
      ? route.fulfill({path: tfjsMin, contentType: 'text/javascript'})
      : route.abort(),
  );
  await page.goto(server.url);
  return {page, errors, server};
}

describe.each(
  htmlBlocks.filter((b) => isKeras(b.code)).map((b) => [`${b.file}:${b.line}`, b] as const),
)('html block %s (a Keras file)', (name, block) => {
  it('runs in Chromium as written: the picked .keras file predicts [1, 5, 3]', async () => {
    const {page, errors, server} = await openBlock(name, block.code);
    try {
      await page.setInputFiles('input[type=file]', kerasFile);
      await page.waitForFunction(() => document.getElementById('out')?.textContent !== '', null, {
        timeout: 60000,
      });
      expect(errors).toEqual([]);
      expect(await page.textContent('#out')).toBe('output 1,5,3');
    } finally {
      await page.close();
      await server.close();
    }
  });
});

describe.each(
  htmlBlocks.filter((b) => !isKeras(b.code)).map((b) => [`${b.file}:${b.line}`, b] as const),
)('html block %s', (name, block) => {
  it('runs in Chromium as written: causal weights of head 1 on the default backend', async () => {
    const {page, errors, server} = await openBlock(name, block.code);
    try {
      await page.waitForFunction(() => document.getElementById('out')?.textContent !== '', null, {
        timeout: 60000,
      });
      const text = (await page.textContent('#out')) as string;
      expect(errors).toEqual([]);
      const m = /^(webgl|cpu|wasm|webgpu): output 1,3,8, head 1: (.*)$/.exec(text);
      expect(m).not.toBeNull();
      const w = JSON.parse((m as RegExpExecArray)[2]) as number[][][][];
      const rows = w[0][0];
      expect(rows.length).toBe(3);
      rows.forEach((row, i) => {
        expect(row.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 5);
        row.forEach((v, j) => {
          if (j > i) expect(v).toBe(0); // causal: no weight on later keys
        });
      });
      expect(rows[0][0]).toBeCloseTo(1, 6);
    } finally {
      await page.close();
      await server.close();
    }
  });
});
