/**
 * A Mistral preset in the browser (webgl): the page loads keras-hub's `save_to_preset` folder of
 * __tests__/fixtures/mistral/preset (fixtures/mistral_family.py: a sliding window of 4 positions,
 * a SentencePiece BPE tokenizer with byte fallback read from vocabulary.spm) over http with the
 * script tag's `tfAttention.loadKerasHubPreset` and generates greedily with `generateText`, past
 * the window: the strings keras-hub's `generate` gave (rows stopping at its end token, which is
 * stripped), nothing left behind once the preset is disposed.
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
const fixture = path.join(root, '__tests__', 'fixtures', 'mistral');
const expected = JSON.parse(fs.readFileSync(path.join(fixture, 'expected.json'), 'utf8')) as {
  maxLength: number;
  prompts: string[];
  generate: {text: string; paddingMask: boolean[]}[];
};
const FILES = [
  'config.json',
  'metadata.json',
  'model.weights.h5',
  'preprocessor.json',
  'task.json',
  'tokenizer.json',
  'assets/tokenizer/vocabulary.spm',
];

let browser: Browser;
let server: {url: string; close: () => Promise<void>};

beforeAll(async () => {
  const routes: Record<string, string> = {...ROUTES};
  for (const f of FILES) routes[`/mistral/${f}`] = path.join(fixture, 'preset', f);
  server = await start(routes);
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('browser: a Mistral preset generates text (webgl)', () => {
  it("gives keras-hub's greedy strings", async () => {
    expect(expected.generate.some((g) => g.paddingMask.includes(false))).toBe(true); // a row stops
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    page.on('response', (res) => {
      // (the loader asks for the optional task.weights.h5 / .json, which this preset has not)
      if (res.status() >= 400 && !/\/task\.weights\./.test(res.url())) {
        errors.push(`${res.status()} ${res.url()}`);
      }
    });
    try {
      await page.goto(server.url);
      await page.waitForFunction(
        () => typeof (window as unknown as {tfAttention?: unknown}).tfAttention === 'object',
      );
      const result = await page.evaluate(
        async ({prompts, maxLength}) => {
          const w = window as unknown as {
            tf: typeof import('@tensorflow/tfjs');
            tfAttention: typeof A;
          };
          await w.tf.setBackend('webgl');
          await w.tf.ready();
          const before = w.tf.memory().numTensors;
          const preset = await w.tfAttention.loadKerasHubPreset(`${location.origin}/mistral`);
          const texts = await w.tfAttention.generateText(preset, prompts, {maxLength});
          preset.dispose();
          const after = w.tf.memory().numTensors;
          return {backend: w.tf.getBackend(), texts, before, after};
        },
        {prompts: expected.prompts, maxLength: expected.maxLength},
      );
      expect(errors).toEqual([]);
      expect(result.backend).toBe('webgl');
      expect(result.texts).toEqual(expected.generate.map((g) => g.text));
      expect(result.after).toBe(result.before);
    } finally {
      await page.close();
    }
  });
});
