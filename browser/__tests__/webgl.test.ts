/**
 * Browser tests in Debian's headless Chromium (WebGL2 and WebGPU through SwiftShader), driven by
 * playwright-core: the numeric scenarios of browser/scenarios.js on the page's webgl, webgpu and
 * cpu backends against Node's cpu results, training, saving and loading through
 * localstorage:// and indexeddb://, and all of it again with WEBGL_RENDER_FLOAT32_ENABLED=false
 * (half-float textures, as on many phones).
 *
 * Tolerances: webgl float32 1e-4 (abs and rel; GPU sums in another order), page cpu 1e-5,
 * webgl half float 2e-2 abs (fp16 has 11 significand bits), webgpu 2e-4 abs and 1e-4 rel
 * (measured: 1.04e-4 on GroupQueryAttention over RotaryEmbedding, whose sin / cos are off by up
 * to 1.9e-4 on SwiftShader's WebGPU at arguments up to 35; at most 2.4e-7 elsewhere).
 *
 * The page code reads results only asynchronously (array() / data()): tfjs-backend-webgpu's
 * synchronous read (dataSync / arraySync of a tensor on the GPU) copies through WebGPU canvases,
 * and in this Chromium it returns wrong values and then loses the device.
 */
import * as tf from '@tensorflow/tfjs';
import {Browser, Page} from 'playwright-core';

import * as A from '../../src';
import {expectClose} from '../../__tests__/helpers/close';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const scenarios = require('../scenarios.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const {start} = require('../server.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

type Nested = number | Nested[];
let browser: Browser;
let server: {url: string; close: () => Promise<void>};
const nodeResults: Record<string, Nested[]> = {};

async function pageFor(flags: Record<string, boolean>): Promise<Page> {
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.error('page error:', e.message));
  await page.goto(server.url);
  await page.waitForFunction(
    () => typeof (window as unknown as {scenarios?: unknown}).scenarios === 'object',
  );
  await page.evaluate((f) => {
    const w = window as unknown as {tf: typeof tf};
    for (const [k, v] of Object.entries(f)) w.tf.env().set(k, v);
  }, flags);
  return page;
}

async function runInPage(
  page: Page,
  backend: string,
  name: string,
): Promise<{backend: string; result: Nested[]; precision: number}> {
  return page.evaluate(
    async ({backend, name}) => {
      const w = window as unknown as {
        tf: typeof tf;
        tfAttention: typeof A;
        scenarios: {numeric: Record<string, (t: unknown, a: unknown) => Promise<Nested[]>>};
      };
      await w.tf.setBackend(backend);
      await w.tf.ready();
      const result = await w.scenarios.numeric[name](w.tf, w.tfAttention);
      return {
        backend: w.tf.getBackend(),
        result,
        precision:
          w.tf.getBackend() === 'webgl' && !w.tf.env().getBool('WEBGL_RENDER_FLOAT32_ENABLED')
            ? 16
            : 32,
      };
    },
    {backend, name},
  );
}

beforeAll(async () => {
  await tf.setBackend('cpu');
  for (const name of Object.keys(scenarios.numeric)) {
    nodeResults[name] = await scenarios.numeric[name](tf, A);
  }
  server = await start();
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

const CONFIGS: Array<{
  name: string;
  flags: Record<string, boolean>;
  backend: string;
  atol: number;
  rtol: number;
  precision: number;
}> = [
  {
    name: 'webgl (float32 textures)',
    flags: {},
    backend: 'webgl',
    atol: 1e-4,
    rtol: 1e-4,
    precision: 32,
  },
  {name: 'cpu in the page', flags: {}, backend: 'cpu', atol: 1e-5, rtol: 1e-5, precision: 32},
  {
    name: 'webgl with WEBGL_RENDER_FLOAT32_ENABLED=false (half float)',
    flags: {WEBGL_RENDER_FLOAT32_ENABLED: false},
    backend: 'webgl',
    atol: 2e-2,
    rtol: 2e-2,
    precision: 16,
  },
  {name: 'webgpu', flags: {}, backend: 'webgpu', atol: 2e-4, rtol: 1e-4, precision: 32},
];

for (const config of CONFIGS) {
  describe(`browser: ${config.name}`, () => {
    let page: Page;
    beforeAll(async () => {
      page = await pageFor(config.flags);
    });
    afterAll(() => page?.close());

    for (const name of Object.keys(scenarios.numeric)) {
      it(`${name} matches Node's cpu results`, async () => {
        const {backend, result, precision} = await runInPage(page, config.backend, name);
        expect(backend).toBe(config.backend);
        expect(precision).toBe(config.precision);
        const flat = JSON.stringify(result);
        expect(flat).not.toContain('null'); // NaN serialises as null
        nodeResults[name].forEach((want, i) =>
          expectClose(result[i] as number[], want as number[], config.atol, config.rtol),
        );
      });
    }

    it('gives the same outputs with Inf / NaN in masked key positions as with finite keys', async () => {
      const {result} = await runInPage(page, config.backend, 'nonFinitePadding');
      const flat = (x: unknown): number[] => (Array.isArray(x) ? x.flatMap(flat) : [x as number]);
      const [mhaClean, mhaBad, dotClean, dotBad] = result.map(flat);
      expect(mhaBad.every(Number.isFinite)).toBe(true);
      expect(dotBad.every(Number.isFinite)).toBe(true);
      mhaBad.forEach((x, i) => expect(Math.abs(x - mhaClean[i])).toBeLessThan(config.atol + 1e-6));
      dotBad.forEach((x, i) => expect(Math.abs(x - dotClean[i])).toBeLessThan(config.atol + 1e-6));
    });

    it('keeps masked weights exactly 0 and fully masked rows uniform', async () => {
      const {result} = await runInPage(page, config.backend, 'mhaMasked');
      const scores = result[1] as number[][][][]; // [2, heads, 6, 7], lengths [4, 0], causal
      for (let h = 0; h < 2; h++) {
        for (let t = 0; t < 6; t++) {
          const row = scores[0][h][t];
          row.forEach((w, s) => {
            if (s >= 4 || s > t) expect(w).toBe(0);
          });
          // batch 1 has length 0: every key is masked, weights uniform (1/7), never NaN
          scores[1][h][t].forEach((w) =>
            expect(Math.abs(w - 1 / 7)).toBeLessThan(config.atol + 1e-6),
          );
        }
      }
    });

    // tfjs' Adam turns NaN under half floats even for a plain dense model, so sgd is used there
    const optimizer = config.precision === 16 ? 'sgd' : 'adam';
    it(`trains a small model for a few steps with a decreasing, finite loss (${optimizer})`, async () => {
      const losses = await page.evaluate(
        async ({backend, optimizer}) => {
          const w = window as unknown as {
            tf: typeof tf;
            tfAttention: typeof A;
            scenarios: {rand: (t: unknown, s: number[], seed: number) => tf.Tensor};
          };
          const T = w.tf;
          await T.setBackend(backend);
          const x = T.input({shape: [5, 8]});
          const lens = T.input({shape: [1], dtype: 'int32'});
          const a = new w.tfAttention.MultiHeadAttention({numHeads: 2, keyDim: 4}).apply([
            x,
            lens,
          ]) as tf.SymbolicTensor;
          const y = T.layers
            .dense({units: 8})
            .apply(T.layers.add().apply([x, a])) as tf.SymbolicTensor;
          const model = T.model({inputs: [x, lens], outputs: y});
          model.compile({
            optimizer: optimizer === 'sgd' ? T.train.sgd(0.05) : T.train.adam(0.02),
            loss: 'meanSquaredError',
          });
          const xs = w.scenarios.rand(T, [16, 5, 8], 1);
          const ls = T.tensor2d(
            Array.from({length: 16}, (_, i) => [1 + (i % 5)]),
            [16, 1],
            'int32',
          );
          const ys = w.scenarios.rand(T, [16, 5, 8], 2);
          const h = await model.fit([xs, ls], ys, {epochs: 8, batchSize: 8, verbose: 0});
          return h.history.loss as number[];
        },
        {backend: config.backend, optimizer},
      );
      expect(losses.every(Number.isFinite)).toBe(true);
      expect(losses[losses.length - 1]).toBeLessThan(losses[0]);
    });

    if (config.backend === 'webgpu') {
      // the package itself never reads a GPU tensor synchronously on webgpu (see the header)
      it('reads nothing back synchronously from the GPU in the scenarios', async () => {
        const own = await pageFor(config.flags);
        try {
          const reads = await own.evaluate(async () => {
            const w = window as unknown as {
              tf: typeof tf;
              tfAttention: typeof A;
              scenarios: {numeric: Record<string, (t: unknown, a: unknown) => Promise<unknown>>};
            };
            await w.tf.setBackend('webgpu');
            await w.tf.ready();
            const backend = w.tf.backend() as unknown as {
              readSync: (id: object) => unknown;
              tensorMap: {get: (id: object) => {values: unknown} | undefined};
            };
            const readSync = backend.readSync;
            const gpuReads: string[] = [];
            let current = '';
            backend.readSync = function (id: object) {
              if (this.tensorMap.get(id)?.values == null) gpuReads.push(current);
              return readSync.call(this, id);
            };
            try {
              for (const [name, run] of Object.entries(w.scenarios.numeric)) {
                current = name;
                await run(w.tf, w.tfAttention);
              }
              // lengths computed on the GPU (over 1000 elements: tfjs runs smaller ops on the CPU)
              current = 'validLens on the GPU';
              const T = w.tf;
              const lens = T.cast(
                T.mul(T.sum(T.ones([2, 1000]), 1), T.tensor1d([0.004, 0])),
                'int32',
              );
              const mha = new w.tfAttention.MultiHeadAttention({numHeads: 2, keyDim: 4});
              const x = T.ones([2, 3, 8]);
              await (mha.apply(x, {validLens: lens}) as tf.Tensor).data();
            } finally {
              backend.readSync = readSync;
            }
            return gpuReads;
          });
          expect(reads).toEqual([]);
        } finally {
          await own.close();
        }
      });
    }

    for (const scheme of ['localstorage://', 'indexeddb://']) {
      it(`saves and loads through ${scheme}`, async () => {
        const diff = await page.evaluate(
          async ({backend, scheme}) => {
            const w = window as unknown as {
              tf: typeof tf;
              tfAttention: typeof A;
              scenarios: {rand: (t: unknown, s: number[], seed: number) => tf.Tensor};
            };
            const T = w.tf;
            await T.setBackend(backend);
            const x = T.input({shape: [4, 6]});
            const y = new w.tfAttention.MultiHeadAttention({
              numHeads: 2,
              keyDim: 3,
              useCausalMask: true,
            }).apply(x) as tf.SymbolicTensor;
            const model = T.model({inputs: x, outputs: y});
            const url = `${scheme}tfjs-attention-test`;
            await model.save(url);
            const loaded = await T.loadLayersModel(url);
            const input = w.scenarios.rand(T, [2, 4, 6], 3);
            const d = T.max(
              T.abs(T.sub(model.predict(input) as tf.Tensor, loaded.predict(input) as tf.Tensor)),
            );
            return (await d.data())[0];
          },
          {backend: config.backend, scheme},
        );
        expect(diff).toBe(0);
      });
    }
  });
}

describe('browser: the WebAssembly SIMD kernels', () => {
  it("compile synchronously on the main thread (under 4 KB) and run on the page's cpu backend", async () => {
    const page = await pageFor({});
    try {
      const r = await page.evaluate(async () => {
        const w = window as unknown as {tf: typeof tf; tfAttention: typeof A};
        // ready at once: already resolved when the bundle's import finished
        const atOnce = await Promise.race([
          w.tfAttention.simdKernelsReady(),
          Promise.resolve('pending'),
        ]);
        await w.tf.setBackend('cpu');
        const layer = new w.tfAttention.MultiHeadAttention({numHeads: 2, keyDim: 4});
        const x = w.tf.randomNormal([2, 5, 8]);
        const info = await w.tf.profile(() => layer.apply(x) as tf.Tensor);
        return {atOnce, names: info.kernels.map((k) => k.name)};
      });
      expect(r.atOnce).toBe(true);
      expect(r.names).toContain('TfjsAttentionMatMul');
      expect(r.names).toContain('TfjsAttentionMaskedSoftmax');
      expect(r.names).not.toContain('BatchMatMul');
    } finally {
      await page.close();
    }
  });
});
