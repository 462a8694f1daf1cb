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

import {describePresetGeneration} from './preset_generation';

const root = path.resolve(__dirname, '..', '..');
const fixture = path.join(root, '__tests__', 'fixtures', 'mistral');
const expected = JSON.parse(fs.readFileSync(path.join(fixture, 'expected.json'), 'utf8')) as {
  maxLength: number;
  prompts: string[];
  generate: {text: string; paddingMask: boolean[]}[];
};

describePresetGeneration({
  title: 'browser: a Mistral preset generates text (webgl)',
  route: 'mistral',
  fixture,
  files: [
    'config.json',
    'metadata.json',
    'model.weights.h5',
    'preprocessor.json',
    'task.json',
    'tokenizer.json',
    'assets/tokenizer/vocabulary.spm',
  ],
  prompts: expected.prompts,
  maxLength: expected.maxLength,
  expected: expected.generate.map((g) => g.text),
  checkFixture: () => {
    expect(expected.generate.some((g) => g.paddingMask.includes(false))).toBe(true); // a row stops
  },
});
