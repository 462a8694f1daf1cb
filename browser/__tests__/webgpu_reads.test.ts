/**
 * On webgpu the package never reads a GPU tensor synchronously (tfjs-backend-webgpu's synchronous
 * read can return wrong values in this Chromium): a `cacheUpdateIndex` given as a tensor is
 * refused with an error that says to pass a number, and the same call with a number works and
 * matches the page's cpu backend.
 */
import * as tf from '@tensorflow/tfjs';
import {Browser, Page} from 'playwright-core';

import * as A from '../../src';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const {start} = require('../server.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

let browser: Browser;
let server: {url: string; close: () => Promise<void>};
let page: Page;

beforeAll(async () => {
  server = await start();
  browser = await launchChromium();
  page = await browser.newPage();
  await page.goto(server.url);
  await page.waitForFunction(
    () => typeof (window as unknown as {tfAttention?: unknown}).tfAttention === 'object',
  );
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

/** One cached call of MultiHeadAttention at position 2, on `backend`, index as a number or tensor. */
function cachedCall(
  backend: string,
  indexAs: 'number' | 'tensor',
): Promise<{backend: string; error: string | null; out: number[][][] | null}> {
  return page.evaluate(
    async ({backend, indexAs}) => {
      const w = window as unknown as {tf: typeof tf; tfAttention: typeof A};
      await w.tf.setBackend(backend);
      await w.tf.ready();
      const tfp = w.tf;
      const mha = new w.tfAttention.MultiHeadAttention({numHeads: 2, keyDim: 4, seed: 7});
      const x = tfp.tensor3d([[[0.1, -0.2, 0.3, 0.4]]]); // [1, 1, 4]: position 2 of a sequence
      const cache = tfp.tensor(
        Array.from({length: 2 * 4 * 2 * 4}, (_, i) => Math.sin(i)),
        [1, 2, 4, 2, 4],
      );
      const index = indexAs === 'number' ? 2 : tfp.scalar(2, 'int32');
      try {
        const [y] = mha.apply(x, {cache, cacheUpdateIndex: index, useCausalMask: true}) as [
          tf.Tensor,
          tf.Tensor,
        ];
        return {backend: tfp.getBackend(), error: null, out: (await y.array()) as number[][][]};
      } catch (e) {
        return {backend: tfp.getBackend(), error: (e as Error).message, out: null};
      }
    },
    {backend, indexAs},
  );
}

it('refuses a tensor cacheUpdateIndex on webgpu, saying to pass a number', async () => {
  const r = await cachedCall('webgpu', 'tensor');
  expect(r.backend).toBe('webgpu');
  expect(r.error).toMatch(/on webgpu, cacheUpdateIndex must be a number, not a tensor/);
});

it('takes a number on webgpu, with the output of the cpu backend (tensor or number there)', async () => {
  const gpu = await cachedCall('webgpu', 'number');
  const cpuNumber = await cachedCall('cpu', 'number');
  const cpuTensor = await cachedCall('cpu', 'tensor');
  expect([gpu.error, cpuNumber.error, cpuTensor.error]).toEqual([null, null, null]);
  expect(cpuTensor.out).toEqual(cpuNumber.out);
  const a = (gpu.out as number[][][]).flat(2);
  const b = (cpuNumber.out as number[][][]).flat(2);
  expect(a.length).toBe(4);
  a.forEach((v, i) => expect(Math.abs(v - b[i])).toBeLessThan(2e-4));
});
