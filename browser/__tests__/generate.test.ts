/**
 * The committed causal language model models/addition in the browser: loaded over http with
 * tf.loadLayersModel, it generates (greedy, token by token) the same tokens on webgl (SwiftShader
 * WebGL2, float32 textures) and webgpu (SwiftShader WebGPU) as on the page's cpu backend and as
 * Node's cpu backend, and the answers are right.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';
import {Browser} from 'playwright-core';

import * as A from '../../src';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const {start} = require('../server.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

const models = path.resolve(__dirname, '..', '..', 'models');
const meta = JSON.parse(fs.readFileSync(path.join(models, 'addition', 'model.json'), 'utf8'))
  .userDefinedMetadata as {
  vocabulary: string;
  maxLen: number;
  promptLen: number;
  padId: number;
  endId: number;
};

// 48 problems, prompts `aaa+bbb=` right-padded to maxLen
const problems: Array<[number, number]> = Array.from({length: 48}, (_, i) => [
  (i * 337 + 11) % 1000,
  (i * 571 + 97) % 1000,
]);
const pad = (n: number, w: number) => String(n).padStart(w, '0');
const prompts = problems.map(([a, b]) => [
  ...`${pad(a, 3)}+${pad(b, 3)}=`.split('').map((c) => meta.vocabulary.indexOf(c)),
  ...new Array(meta.maxLen - meta.promptLen).fill(meta.padId),
]);

let browser: Browser;
let server: {url: string; close: () => Promise<void>};

beforeAll(async () => {
  server = await start();
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

async function generateInPage(backend: string): Promise<{backend: string; ids: number[][]}> {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error('page error:', e.message));
  try {
    await page.goto(server.url);
    await page.waitForFunction(
      () => typeof (window as unknown as {tfAttention?: unknown}).tfAttention === 'object',
    );
    return await page.evaluate(
      async ({backend, prompts, meta}) => {
        const w = window as unknown as {tf: typeof tf; tfAttention: typeof A};
        await w.tf.setBackend(backend);
        await w.tf.ready();
        const model = await w.tf.loadLayersModel(`${location.origin}/models/addition/model.json`);
        const out = await w.tfAttention.generate(model, prompts, {
          maxLength: meta.maxLen,
          endId: meta.endId,
          padId: meta.padId,
        });
        // read asynchronously: webgpu's synchronous read is unreliable in this Chromium
        return {backend: w.tf.getBackend(), ids: (await out.array()) as number[][]};
      },
      {backend, prompts, meta},
    );
  } finally {
    await page.close();
  }
}

describe('browser: generation with models/addition', () => {
  it('gives the same tokens on webgl and webgpu as on cpu (and as Node), and the right sums', async () => {
    await tf.setBackend('cpu');
    const model = await tf.loadLayersModel(A.fileSystem(path.join(models, 'addition')));
    const node = (
      await A.generate(model, prompts, {
        maxLength: meta.maxLen,
        endId: meta.endId,
        padId: meta.padId,
      })
    ).arraySync();
    const cpu = await generateInPage('cpu');
    const webgl = await generateInPage('webgl');
    const webgpu = await generateInPage('webgpu');
    expect(cpu.backend).toBe('cpu');
    expect(webgl.backend).toBe('webgl');
    expect(webgpu.backend).toBe('webgpu');
    expect(webgl.ids).toEqual(cpu.ids);
    expect(webgpu.ids).toEqual(cpu.ids);
    expect(cpu.ids).toEqual(node);
    const text = webgl.ids.map((r) => r.map((i) => meta.vocabulary[i]).join(''));
    const ok = text.filter((t, i) => {
      const [a, b] = problems[i];
      return t === `${pad(a, 3)}+${pad(b, 3)}=${pad(a + b, 4)}$`;
    }).length;
    expect(ok / problems.length).toBeGreaterThanOrEqual(0.9);
  });
});
