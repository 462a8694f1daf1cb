/**
 * Qwen 2.5 and Qwen 3 presets in the browser (webgl): the page loads each `save_to_preset` folder
 * keras-hub 0.32 wrote (fixtures/qwen_family.py) over http with the script tag's
 * `tfAttention.loadKerasHubPreset(url)` and generates greedily with `generateText`: the strings
 * must be keras-hub's `generate` strings (an end token hit and stripped), with no tensor left.
 */
import * as fs from 'fs';
import * as path from 'path';

import {Browser} from 'playwright-core';

import type * as A from '../../src';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const {start, ROUTES} = require('../server.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

const root = path.resolve(__dirname, '..', '..');
const FAMILIES = ['qwen', 'qwen3'];
const FILES = [
  'config.json',
  'metadata.json',
  'model.weights.h5',
  'preprocessor.json',
  'task.json',
  'tokenizer.json',
  'assets/tokenizer/vocabulary.json',
  'assets/tokenizer/merges.txt',
];
const expected = Object.fromEntries(
  FAMILIES.map((f) => [
    f,
    JSON.parse(
      fs.readFileSync(path.join(root, '__tests__', 'fixtures', f, 'expected.json'), 'utf8'),
    ) as {
      prompts: string[];
      generate: Record<string, string[]>;
    },
  ]),
);

let browser: Browser;
let server: {url: string; close: () => Promise<void>};

beforeAll(async () => {
  const routes: Record<string, string> = {...ROUTES};
  for (const f of FAMILIES) {
    for (const file of FILES) {
      routes[`/${f}/${file}`] = path.join(root, '__tests__', 'fixtures', f, 'preset', file);
    }
  }
  server = await start(routes);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('browser: Qwen 2.5 and Qwen 3 presets generate text (webgl)', () => {
  it("gives keras-hub's greedy strings", async () => {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    try {
      await page.goto(server.url);
      await page.waitForFunction(
        () => typeof (window as unknown as {tfAttention?: unknown}).tfAttention === 'object',
      );
      const result = await page.evaluate(
        async ({families, prompts}) => {
          const w = window as unknown as {
            tf: typeof import('@tensorflow/tfjs');
            tfAttention: typeof A;
          };
          await w.tf.setBackend('webgl');
          await w.tf.ready();
          const texts: Record<string, string[]> = {};
          const leaks: number[] = [];
          for (const f of families) {
            const preset = await w.tfAttention.loadKerasHubPreset(`${location.origin}/${f}`);
            const before = w.tf.memory().numTensors;
            texts[f] = await w.tfAttention.generateText(preset, prompts[f], {maxLength: 16});
            leaks.push(w.tf.memory().numTensors - before);
            preset.dispose();
          }
          return {backend: w.tf.getBackend(), texts, leaks};
        },
        {
          families: FAMILIES,
          prompts: Object.fromEntries(FAMILIES.map((f) => [f, expected[f].prompts])),
        },
      );
      expect(errors).toEqual([]);
      expect(result.backend).toBe('webgl');
      for (const f of FAMILIES) expect(result.texts[f]).toEqual(expected[f].generate['16']);
      expect(result.leaks).toEqual([0, 0]);
    } finally {
      await page.close();
    }
  });
});
