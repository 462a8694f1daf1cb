/**
 * The demo page (npm run demo): demo/serve.mjs started on a free port, the page driven in
 * headless Chromium as a person would use it (typing into the input, picking a model and a
 * backend). The answers shown are checked against answers computed here (the reversal, the sum,
 * the query's position) on every backend, invalid input must show an error, and the attention
 * heatmaps must be drawn: in a screenshot, the heatmaps' region must hold many red pixels of the
 * heatmap colour map. The screenshot goes to reports/demo.png; UPDATE_DEMO_SCREENSHOT=1 writes it
 * to docs/demo.png (committed) instead, so a test run leaves the checkout unchanged.
 */
import type {ChildProcess} from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import {Browser, chromium, Page} from 'playwright-core';
import {PNG} from 'pngjs';
import {startDemoServer} from './demo_server';

const root = path.resolve(__dirname, '..', '..');

const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--use-angle=swiftshader',
  '--enable-unsafe-swiftshader',
  '--enable-unsafe-webgpu',
  '--use-webgpu-adapter=swiftshader',
  '--disable-background-networking',
  '--disable-component-update',
];

let server: ChildProcess;
let url: string;
let browser: Browser;
let page: Page;
let webgpu = false;

interface Shown {
  state: string;
  backend: string;
  prediction: string;
  error: string;
  svgs: number;
}

/** Starts `node demo/serve.mjs --port 0` and resolves to the URL it prints. */
function startServer(): Promise<string> {
  const started = startDemoServer(root);
  server = started.server;
  return started.url;
}

/** Waits until the page shows the result (or the error) for `input` on `backend`. */
async function shown(input: string, backend?: string): Promise<Shown> {
  await page.waitForFunction(
    ({input, backend}) => {
      const d = document.getElementById('result')!.dataset;
      return (
        (d.state === 'done' || d.state === 'error') &&
        d.input === input &&
        (backend === undefined || d.backend === backend)
      );
    },
    {input, backend},
    {timeout: 30000},
  );
  return page.evaluate(() => {
    const text = (id: string) => document.getElementById(id)!.textContent ?? '';
    return {
      state: document.getElementById('result')!.dataset.state ?? '',
      backend: document.getElementById('result')!.dataset.backend ?? '',
      prediction: text('prediction'),
      error: text('error'),
      svgs: document.querySelectorAll('#heatmaps svg').length,
    };
  });
}

/** Types `text` into the input key by key, as a person would (input events, debounced). */
async function type(text: string): Promise<void> {
  const box = page.locator('#sequence');
  await box.fill('');
  await box.pressSequentially(text, {delay: 15});
}

async function useBackend(backend: string, input: string): Promise<void> {
  await page.selectOption('#backend', backend);
  expect((await shown(input, backend)).state).toBe('done');
}

async function useModel(model: string): Promise<string> {
  await page.selectOption('#model', model);
  return page.inputValue('#sequence');
}

beforeAll(async () => {
  url = await startServer();
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  page = await browser.newPage({viewport: {width: 1000, height: 700}});
  page.on('pageerror', (e) => console.error('page error:', e.message));
  await page.goto(`${url}?model=reverse&backend=cpu`);
  expect((await shown(await page.inputValue('#sequence'), 'cpu')).state).toBe('done');
  webgpu = await page.evaluate(async () => {
    const gpu = (navigator as unknown as {gpu?: {requestAdapter(): Promise<unknown>}}).gpu;
    return gpu !== undefined && (await gpu.requestAdapter()) !== null;
  });
  if (!webgpu) console.warn('demo test: no WebGPU adapter in this Chromium; webgpu is skipped');
});

afterAll(async () => {
  await browser?.close();
  server?.kill();
});

// the order keeps the slow runs (generation on SwiftShader's webgl and webgpu) few: each test
// ends on a CPU backend, and the next model is first run there
const backends = () => ['cpu', 'webgl', ...(webgpu ? ['webgpu'] : []), 'wasm'];

describe('demo page', () => {
  it('reverse: shows the typed sequence reversed, on every backend', async () => {
    const inputs = ['5 3 11 2 7', '918273', '10,4,4,1', '2 9 6 1 8 3 11 5 4 7'];
    let i = 0;
    for (const backend of backends()) {
      await useBackend(backend, await page.inputValue('#sequence'));
      const input = inputs[i++ % inputs.length];
      await type(input);
      const got = await shown(input, backend);
      const tokens = /[\s,]/.test(input) ? input.split(/[\s,]+/) : input.split('');
      expect(got).toMatchObject({state: 'done', backend, error: ''});
      expect(got.prediction).toBe(tokens.reverse().join(' '));
      expect(got.svgs).toBe(2); // one heatmap per MultiHeadAttention layer
    }
  });

  it('addition: shows the sum, on every backend', async () => {
    let input = await useModel('addition');
    const problems: Array<[number, number]> = [
      [475, 389],
      [12, 988],
      [606, 7],
      [250, 250],
    ];
    let next = 0;
    let current = await page.inputValue('#backend');
    const check = async (backend: string) => {
      const got = await shown(input, backend);
      expect(got).toMatchObject({state: 'done', backend, error: ''});
      const [a, b] = input.split(/[+ ]/).map(Number);
      expect(got.prediction).toBe(String(a + b));
      expect(got.svgs).toBe(2); // one heatmap per decoder block's self-attention
    };
    // generation on SwiftShader's webgl and webgpu takes seconds: a new problem is typed only on
    // cpu or wasm, and each GPU backend runs once, on the problem it is switched to (the problem
    // typed last)
    for (const backend of backends()) {
      if (current === 'cpu' || current === 'wasm') {
        const [a, b] = problems[next++ % problems.length];
        input = next % 2 ? `${a}+${b}` : `${a} ${b}`;
        await type(input);
        await check(current);
      }
      await page.selectOption('#backend', backend);
      await check(backend);
      current = backend;
    }
  });

  it('lookup: points at the query token', async () => {
    await useModel('lookup');
    await type('4 8 15 16 23 ? 16');
    const got = await shown('4 8 15 16 23 ? 16');
    expect(got).toMatchObject({state: 'done', prediction: 'position 3', svgs: 1});
  });

  it("lookup: the heatmap's title fits in its image, measured in the page", async () => {
    // one query over 5 tokens: a narrow matrix under a long title
    const boxes = await page.evaluate(() =>
      Array.from(document.querySelectorAll('#heatmaps svg')).map((svg) => {
        const title = svg.querySelector('text.title') as SVGTextElement;
        const b = title.getBBox();
        const view = (svg as SVGSVGElement).viewBox.baseVal;
        const lines = Array.from(title.querySelectorAll('tspan')).map((t) => t.textContent);
        return {left: b.x, right: b.x + b.width, width: view.width, text: lines.join(' ')};
      }),
    );
    expect(boxes.length).toBe(1);
    const [box] = boxes;
    expect(box.text).toBe('attention: AdditiveAttention weights of the query over the tokens');
    expect(box.left).toBeGreaterThanOrEqual(0);
    expect(box.right).toBeLessThanOrEqual(box.width);
  });

  it("shows each cell's row, column and value on hover (an SVG <title> per cell)", async () => {
    await useModel('lookup');
    await type('4 8 15 16 23 ? 16');
    await shown('4 8 15 16 23 ? 16');
    const tips = await page.evaluate(() =>
      Array.from(document.querySelectorAll('#heatmaps rect.cell')).map(
        (r) => r.querySelector(':scope > title')?.textContent ?? null,
      ),
    );
    expect(tips.length).toBe(5); // 1 query x 5 tokens
    expect(tips.every((t) => t !== null)).toBe(true);
    expect(tips[3]).toMatch(/^head 0, row 0 \(query 16\), column 3 \(16\): [\d.]+$/);
    // the query's own position holds most of the weight
    const values = tips.map((t) => Number(/: ([\d.e-]+)/.exec(t as string)?.[1]));
    expect(values.indexOf(Math.max(...values))).toBe(3);
    expect(Math.abs(values.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(5e-3);
  });

  it('links to the code and the docs, and every link answers', async () => {
    const links = await page.evaluate(() =>
      Array.from(document.querySelectorAll('#links a')).map((a) => ({
        text: a.textContent,
        href: (a as HTMLAnchorElement).href,
      })),
    );
    expect(links.map((l) => l.text)).toEqual(['README', 'docs/demo.md', 'demo.js']);
    for (const {href} of links) {
      const res = await fetch(href);
      expect([href, res.status]).toEqual([href, 200]);
      expect((await res.text()).length).toBeGreaterThan(1000);
    }
  });

  it('keeps the fallback notice of a backend that cannot start visible after runs', async () => {
    const other = await browser.newPage({viewport: {width: 1000, height: 700}});
    try {
      // a browser without WebGPU: navigator.gpu is undefined, so tfjs has no webgpu backend
      await other.addInitScript(() => {
        Object.defineProperty(Navigator.prototype, 'gpu', {get: () => undefined});
      });
      await other.goto(`${url}?model=reverse&backend=webgpu&input=1%202%203`);
      const done = (input: string) =>
        other.waitForFunction(
          (input) => {
            const d = document.getElementById('result')!.dataset;
            return d.state === 'done' && d.input === input;
          },
          input,
          {timeout: 60000},
        );
      await done('1 2 3');
      const notice = () =>
        other.evaluate(() => {
          const el = document.getElementById('notice')!;
          return {text: el.textContent ?? '', visible: !el.hidden && el.offsetHeight > 0};
        });
      const backend = await other.inputValue('#backend');
      expect(backend).not.toBe('webgpu');
      expect(await notice()).toEqual({
        text: `The webgpu backend could not start in this browser; running on ${backend}.`,
        visible: true,
      });
      expect(await other.textContent('#prediction')).toBe('3 2 1');
      // a second run (typing) leaves it in place
      await other.locator('#sequence').fill('4 5');
      await done('4 5');
      expect(await other.textContent('#prediction')).toBe('5 4');
      expect((await notice()).visible).toBe(true);
      // a backend that starts takes it away
      await other.selectOption('#backend', 'cpu');
      await other.waitForFunction(
        () => document.getElementById('result')!.dataset.backend === 'cpu',
      );
      await done('4 5');
      expect((await notice()).visible).toBe(false);
    } finally {
      await other.close();
    }
  });

  it('shows a clear error for invalid input and no stale result', async () => {
    await useModel('reverse');
    for (const [input, message] of [
      ['3 12 4', '12 is out of range'],
      ['1 2 x', '"x" is not a token'],
      ['123456789123', 'too long'],
      ['', 'Type a sequence'],
    ]) {
      await type(input);
      const got = await shown(input);
      expect(got.state).toBe('error');
      expect(got.error).toContain(message);
      expect(got.prediction).toBe('');
      expect(got.svgs).toBe(0);
    }
    await useModel('addition');
    await type('1234+5');
    expect((await shown('1234+5')).error).toContain('more than 3 digits');
    await type('12-5');
    expect((await shown('12-5')).error).toContain('is not an addition');
  });

  it('draws the attention heatmaps (screenshot in reports/ or docs/demo.png)', async () => {
    await useModel('reverse');
    await useBackend('webgl', await page.inputValue('#sequence'));
    const input = '3 1 4 1 5 9 2 6';
    await type(input);
    expect((await shown(input, 'webgl')).prediction).toBe('6 2 9 5 1 4 1 3');
    const shot = await page.screenshot();
    const dir = process.env.UPDATE_DEMO_SCREENSHOT === '1' ? 'docs' : 'reports';
    fs.mkdirSync(path.join(root, dir), {recursive: true});
    fs.writeFileSync(path.join(root, dir, 'demo.png'), shot);

    const png = PNG.sync.read(shot);
    const box = await page.locator('#heatmaps').boundingBox();
    expect(box).not.toBeNull();
    const {x, y, width, height} = box as {x: number; y: number; width: number; height: number};
    // the screenshot is in CSS pixels (device scale 1); the region is clipped to the viewport
    const x1 = Math.min(png.width, Math.ceil(x + width));
    const y1 = Math.min(png.height, Math.ceil(y + height));
    let red = 0;
    let painted = 0;
    let total = 0;
    for (let py = Math.max(0, Math.floor(y)); py < y1; py++) {
      for (let px = Math.max(0, Math.floor(x)); px < x1; px++) {
        const o = (py * png.width + px) * 4;
        const [r, g, b] = [png.data[o], png.data[o + 1], png.data[o + 2]];
        total++;
        if (r < 245 || g < 245 || b < 245) painted++;
        // matplotlib's Reds past its palest shades: red well above green and blue
        if (r >= 90 && r - g >= 60 && r - b >= 50) red++;
      }
    }
    // 8 tokens: 2 layers x 4 heads of 8 x 8 cells of 16 x 16 pixels; the first layer's cells
    // are nearly all red, the second's anti-diagonals are
    expect(total).toBeGreaterThan(100000);
    expect(red).toBeGreaterThan(20000);
    expect(painted).toBeGreaterThan(red);
  });
});
