/**
 * A Gemma 3 preset in the browser (webgl): the page loads keras-hub's `save_to_preset` folder of
 * __tests__/fixtures/gemma3/causal_lm/preset over http with the script tag's
 * `tfAttention.loadKerasHubPreset` (its SentencePiece tokenizer read from vocabulary.spm) and
 * generates greedily with generateText: the strings keras-hub's `generate` gave
 * (fixtures/gemma3_family.py), nothing left behind once the preset is disposed.
 */

import * as fs from 'fs';
import * as path from 'path';

import {describePresetGeneration} from './preset_generation';

const root = path.resolve(__dirname, '..', '..');
const fixture = path.join(root, '__tests__', 'fixtures', 'gemma3', 'causal_lm');
const io = JSON.parse(fs.readFileSync(path.join(fixture, 'io.json'), 'utf8')) as {
  prompts: string[];
  generate_strings: Record<string, string[]>;
};

describePresetGeneration({
  title: 'browser: a Gemma 3 preset generates text (webgl)',
  route: 'gemma3',
  fixture,
  files: [
    'config.json',
    'task.json',
    'preprocessor.json',
    'tokenizer.json',
    'model.weights.h5',
    'assets/tokenizer/vocabulary.spm',
  ],
  prompts: io.prompts,
  maxLength: 16,
  expected: io.generate_strings['16'],
});
