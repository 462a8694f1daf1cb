/**
 * The demo page's "Your own Keras model" section (npm run demo), in headless Chromium: files
 * picked as a person picks them (the .keras file of browser/fixtures/gpt2_lm with the GPT-2
 * tokenizer fixture's tokenizer.json, vocabulary.json and merges.txt) load with a progress bar
 * that ends full, the model summary lists the model's layers, and the prompt box streams the
 * generated text token by token, ending on the text of Keras' greedy loop (expected.json, made by
 * fixtures/browser_lm.py). A picked keras-hub preset folder loads through loadKerasHubPreset and
 * generates keras-hub's greedy text; a lone config.json is answered with its error, never a crash. The page's other features are covered by demo.test.ts.
 */
import type {ChildProcess} from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

import {Browser, Page} from 'playwright-core';
import {startDemoServer} from './demo_server';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

const root = path.resolve(__dirname, '..', '..');
const fixture = path.join(root, 'browser', 'fixtures', 'gpt2_lm');
const tokenizer = path.join(root, 'fixtures', 'tokenizers', 'gpt2');
const expected = JSON.parse(fs.readFileSync(path.join(fixture, 'expected.json'), 'utf8')) as {
  maxLength: number;
  cases: Array<{prompt: string; text: string}>;
};

let server: ChildProcess;
let browser: Browser;
let page: Page;
const errors: string[] = [];

function startServer(): Promise<string> {
  const started = startDemoServer(root);
  server = started.server;
  return started.url;
}

async function kerasState(states: string[]): Promise<string> {
  await page.waitForFunction(
    (states) => states.includes(document.getElementById('keras')!.dataset.state ?? ''),
    states,
    {timeout: 60000},
  );
  return page.evaluate(() => document.getElementById('keras')!.dataset.state ?? '');
}

const text = (id: string) => page.evaluate((id) => document.getElementById(id)!.textContent, id);

beforeAll(async () => {
  const url = await startServer();
  browser = await launchChromium();
  page = await browser.newPage();
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('response', (res) => {
    if (res.status() >= 400) errors.push(`${res.status()} ${res.url()}`);
  });
  await page.goto(`${url}?model=reverse&backend=cpu`);
  await page.waitForFunction(() => document.getElementById('result')!.dataset.state === 'done');
});

afterAll(async () => {
  await browser?.close();
  server?.kill();
});

describe('demo page: your own Keras model', () => {
  it('loads a picked .keras file with its tokenizer, with progress and a summary', async () => {
    await page.setInputFiles('#keras-files', [
      path.join(fixture, 'model.keras'),
      path.join(tokenizer, 'tokenizer.json'),
      path.join(tokenizer, 'assets', 'tokenizer', 'vocabulary.json'),
      path.join(tokenizer, 'assets', 'tokenizer', 'merges.txt'),
    ]);
    expect(await kerasState(['loaded', 'error'])).toBe('loaded');
    const bar = await page.evaluate(() => {
      const p = document.getElementById('keras-progress') as HTMLProgressElement;
      return {hidden: p.hidden, value: p.value};
    });
    expect(bar).toEqual({hidden: false, value: 1});
    const summary = await text('keras-summary');
    for (const cls of [
      'TokenAndPositionEmbedding',
      'TransformerDecoder',
      'Dense',
      'Total params',
    ]) {
      expect(summary).toContain(cls);
    }
    // the fixture's sizes (fixtures/browser_lm.py): vocabulary 700, width 32, 32 positions, 4
    // heads, feed-forward 64
    const [V, D, P, F] = [700, 32, 32, 64];
    const embedding = V * D + P * D;
    const decoder = 4 * (D * D + D) + 2 * 2 * D + (D * F + F) + (F * D + D);
    const logits = D * V + V;
    expect(summary).toContain(`Total params: ${embedding + decoder + logits}`);
    expect(await text('keras-status')).toMatch(
      /model\.keras: [\d,]+ parameters on cpu .* causal LM/,
    );
    expect(await page.isVisible('#lm')).toBe(true);
    expect(errors).toEqual([]);
  });

  it('streams the generated text into the page, ending on Keras greedy text', async () => {
    const {prompt, text: want} = expected.cases[0];
    await page.fill('#lm-prompt', prompt);
    await page.fill('#lm-max-length', String(expected.maxLength));
    // every text the output shows while generating
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
    expect(await kerasState(['generated', 'error'])).toBe('generated');
    expect(await text('lm-output')).toBe(want);
    const seen = await page.evaluate(() => (window as unknown as {seen: string[]}).seen);
    const distinct = [...new Set(seen)];
    // the prompt, then longer and longer prefixes of the answer: one per token with text
    expect(distinct[0]).toBe(prompt);
    expect(distinct.length).toBeGreaterThan(5);
    for (const s of distinct) expect(want.startsWith(s)).toBe(true);
    expect(errors).toEqual([]);
  });

  it('takes a dropped .keras file (alone: a causal LM without a tokenizer says what to add)', async () => {
    const bytes = fs.readFileSync(path.join(fixture, 'model.keras')).toString('base64');
    await page.evaluate((b64) => {
      const raw = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
      const data = new DataTransfer();
      data.items.add(new File([raw], 'dropped.keras'));
      const zone = document.getElementById('keras-drop')!;
      zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: data, cancelable: true}));
      zone.dispatchEvent(new DragEvent('drop', {dataTransfer: data, cancelable: true}));
    }, bytes);
    // the status names the dropped file once it is read (or says what failed)
    await page.waitForFunction(() =>
      /^(dropped\.keras:|Error)/.test(document.getElementById('keras-status')!.textContent ?? ''),
    );
    expect(await kerasState(['loaded', 'error'])).toBe('loaded');
    expect(await text('keras-status')).toMatch(
      /^dropped\.keras: [\d,]+ parameters on cpu · a causal LM: add its tokenizer files/,
    );
    expect(await page.isVisible('#lm')).toBe(false);
    expect(await text('keras-summary')).toContain('token_and_position_embedding');
    expect(errors).toEqual([]);
  });

  it('loads a picked keras-hub preset folder (loadKerasHubPreset) and generates keras-hub text', async () => {
    // __tests__/fixtures/hub_presets/gpt2: a GPT2CausalLM save_to_preset folder; its greedy
    // keras-hub generate strings are in gpt2.expected.json (fixtures/hub_presets.py)
    const hub = path.join(root, '__tests__', 'fixtures', 'hub_presets');
    const want = JSON.parse(fs.readFileSync(path.join(hub, 'gpt2.expected.json'), 'utf8')) as {
      prompts: string[];
      generate: Record<string, string[]>;
    };
    await page.setInputFiles('#keras-folder', path.join(hub, 'gpt2'));
    expect([await kerasState(['loaded', 'error']), await text('keras-status')]).toEqual([
      'loaded',
      expect.stringMatching(/^gpt2: [\d,]+ parameters on cpu · a causal LM with its tokenizer/),
    ]);
    expect(await text('keras-summary')).toContain('TransformerDecoder');
    expect(await page.isVisible('#lm')).toBe(true);
    await page.fill('#lm-prompt', want.prompts[0]);
    await page.fill('#lm-max-length', '16');
    await page.click('#lm-generate');
    expect(await kerasState(['generated', 'error'])).toBe('generated');
    expect(await text('lm-output')).toBe(want.generate['16'][0]);
    // which step ran (generate's onCompile report), said on the page
    expect(await text('lm-step')).toMatch(/^compiled step: \d+ ops on /);
    expect(await page.getAttribute('#lm-step', 'data-compiled')).toBe('true');
    // a config.json alone is not a whole preset: loadKerasHubPreset's error names what is missing
    await page.setInputFiles('#keras-files', [path.join(hub, 'gpt2', 'config.json')]);
    expect(await kerasState(['loaded', 'error'])).toBe('error');
    expect(await text('keras-status')).toMatch(/^Error: .*(weights|task\.json|model\.weights\.h5)/);
    expect(errors).toEqual([]);
  });
});
