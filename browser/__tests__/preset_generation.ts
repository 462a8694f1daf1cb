/**
 * The shape the browser's family preset tests share: serve one keras-hub `save_to_preset` folder
 * over http, load it in the page with the script tag's `tfAttention.loadKerasHubPreset`, generate
 * greedily with `generateText` on webgl, and compare against the strings keras-hub's `generate`
 * gave, with no page error, no failed request and no tensor left once the preset is disposed.
 */
import * as path from 'path';

import {Browser} from 'playwright-core';

import type * as A from '../../src';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const {start, ROUTES} = require('../server.js');
// eslint-disable-next-line @typescript-eslint/no-require-imports
const {launchChromium} = require('../chromium.js');

/** One family's preset and the strings it must generate. */
export interface PresetGenerationCase {
  /** The describe block's title. */
  title: string;
  /** The url path the preset is served under (`/<route>/<file>`). */
  route: string;
  /** The fixture folder holding `preset/`. */
  fixture: string;
  /** The preset's files, relative to `preset/`. */
  files: string[];
  prompts: string[];
  maxLength: number;
  /** keras-hub's `generate` strings, one per prompt. */
  expected: string[];
  /** Checks on the fixture itself, run first in the test. */
  checkFixture?: () => void;
}

/** Registers the server / browser lifetime and the one test for `c`. */
export function describePresetGeneration(c: PresetGenerationCase): void {
  let browser: Browser;
  let server: {url: string; close: () => Promise<void>};

  beforeAll(async () => {
    const routes: Record<string, string> = {...ROUTES};
    for (const f of c.files) routes[`/${c.route}/${f}`] = path.join(c.fixture, 'preset', f);
    server = await start(routes);
    browser = await launchChromium();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  describe(c.title, () => {
    it("gives keras-hub's greedy strings", async () => {
      c.checkFixture?.();
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
      page.on('response', (res) => {
        // (the loader asks for the optional task.weights.h5 / .json, which these presets have not)
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
          async ({route, prompts, maxLength}) => {
            const w = window as unknown as {
              tf: typeof import('@tensorflow/tfjs');
              tfAttention: typeof A;
            };
            await w.tf.setBackend('webgl');
            await w.tf.ready();
            const before = w.tf.memory().numTensors;
            const preset = await w.tfAttention.loadKerasHubPreset(`${location.origin}/${route}`);
            const texts = await w.tfAttention.generateText(preset, prompts, {maxLength});
            preset.dispose();
            const after = w.tf.memory().numTensors;
            return {backend: w.tf.getBackend(), texts, before, after};
          },
          {route: c.route, prompts: c.prompts, maxLength: c.maxLength},
        );
        expect(errors).toEqual([]);
        expect(result.backend).toBe('webgl');
        expect(result.texts).toEqual(c.expected);
        expect(result.after).toBe(result.before);
      } finally {
        await page.close();
      }
    });
  });
}
