/**
 * The demo page's "Fine-tune on your text" part (npm run demo), in headless Chromium: the tiny
 * GPT-2 preset of the LoRA fixtures (__tests__/fixtures/lora/gpt2/preset) picked as a folder in
 * "Your own Keras model", then fine-tuned on text typed into the page with tfAttention.finetune.
 * Bad input (an empty text, a text too short for one batch, a step count that is not a whole
 * number) is answered with what was expected and what arrived. A run shows each step on the
 * progress bar and in the status (loss, tokens/s, time left), draws one point of the loss curve
 * per step, and the loss falls over the run on a text whose two examples make every batch.
 * The prompt box then streams a different greedy text from the adapted model, through the eager
 * stepper (the compiled step declines layers with adapters, and the page says so). Stop ends a
 * long run between steps; a backend switch during a run drops the model and resets the part.
 * On webgl; on wasm; on webgpu when the Chromium has a WebGPU adapter (SwiftShader).
 */
import type {ChildProcess} from 'child_process';
import * as path from 'path';

import {Browser, Page} from 'playwright-core';
import {startDemoServer} from './demo_server';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

const root = path.resolve(__dirname, '..', '..');
const preset = path.join(root, '__tests__', 'fixtures', 'lora', 'gpt2', 'preset');
// two paragraphs, each under the preset's 16 tokens (sequence length 16, with the start and end
// tokens): two examples, so with batch size 2 every step trains on the same batch
const TWO_EXAMPLES = 'the quick brown fox\n\nhello world, hello there';
const PROMPT = 'The fox';

let server: ChildProcess;
let url: string;
let browser: Browser;
let webgpu = false;

function startServer(): Promise<string> {
  const started = startDemoServer(root);
  server = started.server;
  return started.url;
}

/** Waits until `#id`'s data-state is one of `states`; returns it. */
async function stateOf(page: Page, id: string, states: string[], timeout = 120000) {
  await page.waitForFunction(
    ({id, states}) => states.includes(document.getElementById(id)!.dataset.state ?? ''),
    {id, states},
    {timeout},
  );
  return page.evaluate((id) => document.getElementById(id)!.dataset.state ?? '', id);
}

const text = (page: Page, id: string) =>
  page.evaluate((id) => document.getElementById(id)!.textContent ?? '', id);

/** The loss curve's points: each circle's step and loss. */
const curvePoints = (page: Page) =>
  page.evaluate(() =>
    Array.from(document.querySelectorAll('#ft-curve svg circle.point')).map((c) => ({
      step: Number(c.getAttribute('data-step')),
      loss: Number(c.getAttribute('data-loss')),
    })),
  );

/** A page on `backend` with the tiny preset loaded in "Your own Keras model". */
async function pageWithPreset(backend: string, errors: string[]): Promise<Page> {
  const page = await browser.newPage();
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('response', (res) => {
    if (res.status() >= 400) errors.push(`${res.status()} ${res.url()}`);
  });
  await page.goto(`${url}?model=reverse&backend=${backend}`);
  await page.waitForFunction(() => document.getElementById('result')!.dataset.state === 'done', {
    timeout: 120000,
  });
  // the backend really started (a backend that cannot start leaves the page on another)
  expect(await page.inputValue('#backend')).toBe(backend);
  await page.setInputFiles('#keras-folder', preset);
  expect([
    await stateOf(page, 'keras', ['loaded', 'error']),
    await text(page, 'keras-status'),
  ]).toEqual([
    'loaded',
    expect.stringMatching(
      new RegExp(`^preset: [\\d,]+ parameters on ${backend} · a causal LM with its tokenizer`),
    ),
  ]);
  expect(await page.isVisible('#ft')).toBe(true);
  expect(await page.getAttribute('#ft', 'data-state')).toBe('idle');
  return page;
}

/** Generates greedily from PROMPT; returns the final text and every text shown on the way. */
async function generate(page: Page, maxLength: number) {
  await page.fill('#lm-prompt', PROMPT);
  await page.fill('#lm-max-length', String(maxLength));
  await page.evaluate(() => {
    const out = document.getElementById('lm-output')!;
    const seen: string[] = [];
    (window as unknown as {seen: string[]}).seen = seen;
    new MutationObserver(() => seen.push(out.textContent ?? '')).observe(out, {
      childList: true,
      characterData: true,
      subtree: true,
    });
  });
  await page.click('#lm-generate');
  expect(await stateOf(page, 'keras', ['generated', 'error'])).toBe('generated');
  return {
    text: await text(page, 'lm-output'),
    seen: await page.evaluate(() => (window as unknown as {seen: string[]}).seen),
    step: await text(page, 'lm-step'),
  };
}

/** Clicks Start and waits for the status to change; returns the fine-tune state and status. */
async function startAnswer(page: Page) {
  const before = await text(page, 'ft-status');
  await page.click('#ft-button');
  await page.waitForFunction(
    (before) => document.getElementById('ft-status')!.textContent !== before,
    before,
    {timeout: 60000},
  );
  return {
    state: await page.getAttribute('#ft', 'data-state'),
    status: await text(page, 'ft-status'),
  };
}

interface Update {
  step: number;
  progress: number;
  status: string;
  points: number;
}

/** Records, at each change of #ft's data-step, the bar, the status and the curve's points. */
async function watchSteps(page: Page): Promise<void> {
  await page.evaluate(() => {
    const ft = document.getElementById('ft')!;
    const updates: Update[] = [];
    (window as unknown as {updates: Update[]}).updates = updates;
    new MutationObserver(() => {
      const step = Number(ft.dataset.step);
      if (step > 0 && updates[updates.length - 1]?.step !== step) {
        updates.push({
          step,
          progress: (document.getElementById('ft-progress') as HTMLProgressElement).value,
          status: document.getElementById('ft-status')!.textContent ?? '',
          points: document.querySelectorAll('#ft-curve svg circle.point').length,
        });
      }
    }).observe(ft, {attributes: true, attributeFilter: ['data-step']});
  });
}

/** Fine-tunes `steps` steps on TWO_EXAMPLES (batch 2); returns the updates seen and the curve. */
async function fineTune(page: Page, steps: number, learningRate: string) {
  await page.fill('#ft-text', TWO_EXAMPLES);
  await page.fill('#ft-steps', String(steps));
  await page.fill('#ft-batch', '2');
  await page.fill('#ft-lr', learningRate);
  await watchSteps(page);
  await page.click('#ft-button');
  expect([
    await stateOf(page, 'ft', ['trained', 'stopped', 'error']),
    await text(page, 'ft-status'),
  ]).toEqual(['trained', expect.stringMatching(new RegExp(`^${steps} steps in \\d+:\\d\\d on `))]);
  return {
    updates: await page.evaluate(() => (window as unknown as {updates: Update[]}).updates),
    points: await curvePoints(page),
  };
}

/** Each step shown once, in order, with its bar, its status and the curve so far. */
function expectEveryStep(updates: Update[], steps: number) {
  expect(updates.map((u) => u.step)).toEqual(Array.from({length: steps}, (_, i) => i + 1));
  for (const u of updates) {
    expect(u.progress).toBeCloseTo(u.step / steps, 6);
    expect(u.status).toMatch(
      new RegExp(
        `^step ${u.step}/${steps} · loss \\d+\\.\\d{4} · [\\d,]+ tokens/s · \\d+:\\d\\d left$`,
      ),
    );
    expect(u.points).toBe(u.step);
  }
}

/** The loss curve: one point per step, the losses the status showed, falling over the run. */
function expectFallingCurve(points: Array<{step: number; loss: number}>, updates: Update[]) {
  expect(points.map((p) => p.step)).toEqual(updates.map((u) => u.step));
  points.forEach((p, i) => {
    const shown = Number(/loss (\d+\.\d+)/.exec(updates[i].status)![1]);
    expect(Math.abs(p.loss - shown)).toBeLessThanOrEqual(5e-5);
    expect(Number.isFinite(p.loss)).toBe(true);
  });
  const losses = points.map((p) => p.loss);
  // the same batch every step: Adam's steps bring its loss down clearly, not by noise
  expect(losses[losses.length - 1]).toBeLessThan(losses[0] - 0.05);
}

beforeAll(async () => {
  url = await startServer();
  browser = await launchChromium();
  const page = await browser.newPage();
  await page.goto(`${url}?model=reverse&backend=cpu`);
  webgpu = await page.evaluate(async () => {
    const gpu = (navigator as unknown as {gpu?: {requestAdapter(): Promise<unknown>}}).gpu;
    return gpu !== undefined && (await gpu.requestAdapter()) !== null;
  });
  await page.close();
  if (!webgpu) console.warn('demo fine-tune test: no WebGPU adapter in this Chromium; skipped');
});

afterAll(async () => {
  await browser?.close();
  server?.kill();
});

describe('demo page: fine-tune on your text', () => {
  it('on webgl: says what is wrong with bad input, trains with progress and a loss curve, generates from the adapted model, and stops', async () => {
    const errors: string[] = [];
    const page = await pageWithPreset('webgl', errors);
    const before = await generate(page, 12);

    // bad input: each says what was expected and what arrived, and nothing trains
    await page.fill('#ft-text', '  \n ');
    expect(await startAnswer(page)).toEqual({
      state: 'error',
      status: expect.stringMatching(/^Paste some text .*empty/),
    });
    await page.fill('#ft-text', 'the quick brown fox'); // one example (11 tokens)
    await page.fill('#ft-batch', '2');
    expect(await startAnswer(page)).toEqual({
      state: 'error',
      status: expect.stringMatching(
        /too short for one batch: expected at least 2 examples .*received 1 \(\d+ tokens\)/,
      ),
    });
    await page.fill('#ft-text', TWO_EXAMPLES);
    await page.fill('#ft-steps', '0');
    expect(await startAnswer(page)).toEqual({
      state: 'error',
      status: 'Steps: expected a whole number from 1, received "0".',
    });
    expect(await curvePoints(page)).toEqual([]);

    const steps = 8;
    const {updates, points} = await fineTune(page, steps, '0.01');
    expectEveryStep(updates, steps);
    expectFallingCurve(points, updates);
    expect(await page.getAttribute('#ft', 'data-step')).toBe(String(steps));
    // the adapters' rank is fixed once they exist
    expect(await page.isDisabled('#ft-rank')).toBe(true);

    // the prompt box now streams from the adapted model: another greedy text, token by token,
    // through the eager stepper
    const after = await generate(page, 12);
    expect(after.text.startsWith(PROMPT)).toBe(true);
    expect(after.text).not.toBe(before.text);
    expect(before.step).not.toMatch(/LoRA/);
    expect(after.step).toMatch(/^eager step \(not compiled\): .* has LoRA adapters \(rank 4\)/);
    const distinct = [...new Set(after.seen)];
    expect(distinct[0]).toBe(PROMPT);
    expect(distinct.length).toBeGreaterThan(2);

    // Stop: a long run ends between steps, keeps what it trained, and the button is Start again
    const long = 500;
    await page.fill('#ft-steps', String(long));
    await page.click('#ft-button');
    // this run's second step (the last run ended on 'trained' at step 8)
    await page.waitForFunction(
      () => {
        const d = document.getElementById('ft')!.dataset;
        return d.state === 'training' && Number(d.step) >= 2;
      },
      undefined,
      {timeout: 120000},
    );
    expect(await text(page, 'ft-button')).toBe('Stop');
    await page.click('#ft-button');
    expect(await stateOf(page, 'ft', ['stopped', 'trained', 'error'])).toBe('stopped');
    const done = Number(await page.getAttribute('#ft', 'data-step'));
    expect(done).toBeGreaterThanOrEqual(2);
    expect(done).toBeLessThan(long);
    expect(await text(page, 'ft-status')).toMatch(
      new RegExp(`^stopped after ${done} of ${long} steps`),
    );
    expect(await text(page, 'ft-button')).toBe('Start');
    expect((await curvePoints(page)).length).toBe(done);
    await page.waitForTimeout(1000);
    expect(Number(await page.getAttribute('#ft', 'data-step'))).toBe(done);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('on wasm: trains with progress and a falling loss curve, then streams text; a backend switch mid-run resets it', async () => {
    const errors: string[] = [];
    const page = await pageWithPreset('wasm', errors);
    const steps = 6;
    const {updates, points} = await fineTune(page, steps, '0.01');
    expectEveryStep(updates, steps);
    expectFallingCurve(points, updates);
    const after = await generate(page, 10);
    expect(after.text.startsWith(PROMPT)).toBe(true);
    expect([...new Set(after.seen)].length).toBeGreaterThan(2);

    // a backend switch during a run drops the model (its weights stay on the old backend): the
    // run ends, the fine-tune part is reset with the prompt box hidden, and nothing throws
    await page.fill('#ft-steps', '500');
    await page.click('#ft-button');
    await page.waitForFunction(
      () => {
        const d = document.getElementById('ft')!.dataset;
        return d.state === 'training' && Number(d.step) >= 2;
      },
      undefined,
      {timeout: 120000},
    );
    await page.selectOption('#backend', 'cpu');
    await page.waitForFunction(
      () => {
        const d = document.getElementById('result')!.dataset;
        return d.state === 'done' && d.backend === 'cpu';
      },
      undefined,
      {timeout: 60000},
    );
    expect(await text(page, 'keras-status')).toMatch(/^The backend changed/);
    await page.waitForTimeout(500); // the aborted run's last step, if one was in flight, ends
    expect({
      ft: await page.getAttribute('#ft', 'data-state'),
      step: await page.getAttribute('#ft', 'data-step'),
      curve: (await curvePoints(page)).length,
      lm: await page.isVisible('#lm'),
      button: await text(page, 'ft-button'),
    }).toEqual({ft: 'idle', step: null, curve: 0, lm: false, button: 'Start'});
    expect(errors).toEqual([]);
    await page.close();
  });

  it('on webgpu (SwiftShader): trains with progress and a falling loss curve, then streams text', async () => {
    if (!webgpu) return;
    const errors: string[] = [];
    const page = await pageWithPreset('webgpu', errors);
    const steps = 4;
    const {updates, points} = await fineTune(page, steps, '0.01');
    expectEveryStep(updates, steps);
    expectFallingCurve(points, updates);
    const after = await generate(page, 8);
    expect(after.text.startsWith(PROMPT)).toBe(true);
    expect(errors).toEqual([]);
    await page.close();
  });
});
