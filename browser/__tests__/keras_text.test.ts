/**
 * A .keras file from bytes to text in the browser (webgl): the page fetches
 * browser/fixtures/gpt2_lm/model.keras (a small GPT-2-style causal LM saved by Keras 3.15, see
 * fixtures/browser_lm.py) as bytes, loads it with the script tag's `tfAttention.loadKerasModel`
 * (which imports its zip and HDF5 libraries, dist/tfjs-attention-fflate.mjs and -jsfive.mjs, on
 * first use) with onProgress, loads the committed GPT-2 tokenizer fixture over http, and
 * generates greedily with generateText, streaming with onToken. The text must be the one Keras'
 * greedy loop gave, decoded in Python by GPT-2's byte table (expected.json); the smallest gap
 * between the two best logits of any step there is recorded too (> 1e-3), far above webgl's
 * float32 error.
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
const fixture = path.join(root, 'browser', 'fixtures', 'gpt2_lm');
const tokenizer = path.join(root, 'fixtures', 'tokenizers', 'gpt2');
interface Case {
  prompt: string;
  generated: number[];
  minGap: number;
  text: string;
}
const expected = JSON.parse(fs.readFileSync(path.join(fixture, 'expected.json'), 'utf8')) as {
  maxLength: number;
  endTokenId: number;
  cases: Case[];
};

let browser: Browser;
let server: {url: string; close: () => Promise<void>};

beforeAll(async () => {
  server = await start({
    ...ROUTES,
    '/gpt2_lm/model.keras': path.join(fixture, 'model.keras'),
    '/gpt2/tokenizer.json': path.join(tokenizer, 'tokenizer.json'),
    '/gpt2/assets/tokenizer/vocabulary.json': path.join(
      tokenizer,
      'assets',
      'tokenizer',
      'vocabulary.json',
    ),
    '/gpt2/assets/tokenizer/merges.txt': path.join(tokenizer, 'assets', 'tokenizer', 'merges.txt'),
  });
  browser = await launchChromium();
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

interface PageResult {
  backend: string;
  fractions: number[];
  texts: string[];
  streamed: string[];
  ids: number[][];
  tensorsBefore: number;
  tensorsAfter: number;
}

describe('browser: a .keras file from bytes generates text (webgl)', () => {
  it('gives the text of Keras greedy generation, streamed token by token', async () => {
    for (const c of expected.cases) expect(c.minGap).toBeGreaterThan(1e-3);
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
    page.on('response', (res) => {
      if (res.status() >= 400) errors.push(`${res.status()} ${res.url()}`);
    });
    try {
      await page.goto(server.url);
      await page.waitForFunction(
        () => typeof (window as unknown as {tfAttention?: unknown}).tfAttention === 'object',
      );
      const result: PageResult = await page.evaluate(
        async ({prompts, maxLength}) => {
          const w = window as unknown as {
            tf: typeof import('@tensorflow/tfjs');
            tfAttention: typeof A;
          };
          await w.tf.setBackend('webgl');
          await w.tf.ready();
          const bytes = await (await fetch('/gpt2_lm/model.keras')).arrayBuffer();
          const fractions: number[] = [];
          const model = await w.tfAttention.loadKerasModel(bytes, {
            onProgress: (f: number) => fractions.push(f),
          });
          const tokenizer = await w.tfAttention.loadTokenizer(`${location.origin}/gpt2`);
          const lm = {
            model,
            tokenizer,
            preprocessor: {sequenceLength: maxLength, addStartToken: true},
          };
          const streamed = prompts.map(() => '');
          const ids = prompts.map(() => [] as number[]);
          const tensorsBefore = w.tf.memory().numTensors;
          const texts = await w.tfAttention.generateText(lm, prompts, {
            maxLength,
            onToken: (row: number, id: number, text: string) => {
              streamed[row] += text;
              ids[row].push(id);
            },
          });
          const tensorsAfter = w.tf.memory().numTensors;
          return {
            backend: w.tf.getBackend(),
            fractions,
            texts,
            streamed,
            ids,
            tensorsBefore,
            tensorsAfter,
          };
        },
        {prompts: expected.cases.map((c) => c.prompt), maxLength: expected.maxLength},
      );
      expect(errors).toEqual([]);
      expect(result.backend).toBe('webgl');
      // progress: rising fractions ending at 1
      expect(result.fractions.length).toBeGreaterThan(0);
      expect(result.fractions[result.fractions.length - 1]).toBe(1);
      for (let i = 1; i < result.fractions.length; i++) {
        expect(result.fractions[i]).toBeGreaterThanOrEqual(result.fractions[i - 1]);
      }
      expect(result.texts).toEqual(expected.cases.map((c) => c.text));
      expect(result.ids).toEqual(expected.cases.map((c) => c.generated));
      // the streamed pieces are the continuation (special tokens have no text), a final U+FFFD
      // included (the second prompt here ends inside a character)
      expect(result.streamed).toEqual(expected.cases.map((c) => c.text.slice(c.prompt.length)));
      expect(result.streamed[0]).toBe(
        expected.cases[0].text.slice(expected.cases[0].prompt.length),
      );
      expect(result.tensorsAfter).toBe(result.tensorsBefore);
    } finally {
      await page.close();
    }
  });
});
