/**
 * Gemma 3's stop tokens against keras-hub 0.32 (fixtures/gemma3_family.py, case `stop`: the tied
 * embedding rows of `<end_of_turn>` and `<eos>` set so that keras-hub's greedy `generate` picks
 * `<end_of_turn>` as the 4th generated token of the second prompt and `<eos>` as the 4th of the
 * third, while the first runs to max_length). On the compiled step (onCompile: compiled), on each
 * backend: `generate` with the tokenizer's stop tokens keeps keras-hub's ids up to and including
 * each row's stop token and pads the rest, and without them gives keras-hub's ids past the stop;
 * a row alone ends at its stop token (fewer program runs); greedy `generateText` equals keras-hub's
 * strings (`<end_of_turn>` kept in the text, `<eos>` stripped), and streams nothing after a stop.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {generate, generateText, loadKerasHubPreset} from '../../src';
import type {KerasHubPreset, StepReport} from '../../src';
import {describeBackends} from '../helpers/backends';

const DIR = path.join(__dirname, '..', 'fixtures', 'gemma3', 'stop');
const io = JSON.parse(fs.readFileSync(path.join(DIR, 'io.json'), 'utf8')) as {
  prompts: string[];
  max_length: number;
  stop_token_ids: number[];
  stops: Array<{row: number; token: string; position: number}>;
  generate: {
    token_ids: number[][];
    prompt_lengths: number[];
    max_length: number;
    tokens: number[][];
    padding_mask: number[][];
    tokens_without_stop: number[][];
  };
  generate_strings: string[];
  generate_strings_without_stop: string[];
};
const g = io.generate;
const PAD = 0;

/** keras-hub's ids with stop tokens as generate writes them: masked positions padded. */
const expectedIds = g.tokens.map((row, b) => row.map((id, t) => (g.padding_mask[b][t] ? id : PAD)));

async function generated(
  model: tf.LayersModel,
  rows: number[],
  endId: number[] | null,
): Promise<{ids: number[][]; report: StepReport | null}> {
  let report: StepReport | null = null;
  const out = await generate(
    model,
    rows.map((b) => g.token_ids[b]),
    {
      maxLength: g.max_length,
      promptLengths: rows.map((b) => g.prompt_lengths[b]),
      endId,
      padId: PAD,
      onCompile: (r) => (report = r),
    },
  );
  const ids = (await out.array()) as number[][];
  out.dispose();
  return {ids, report};
}

describe('the Gemma 3 stop fixture', () => {
  it('stops two rows early in keras-hub: <end_of_turn> kept in the text, <eos> stripped', () => {
    expect(io.stops.map((s) => [s.row, s.token])).toEqual([
      [1, '<end_of_turn>'],
      [2, '<eos>'],
    ]);
    expect(io.stop_token_ids).toEqual([1, 5]);
    for (const {row, position} of io.stops) {
      expect(g.padding_mask[row].indexOf(0)).toBe(position + 1);
      expect(io.stop_token_ids).toContain(g.tokens[row][position]);
      // keras-hub's ids go on past the stop; its text without stop tokens is longer
      expect(g.tokens_without_stop[row].slice(position + 1)).not.toEqual(
        expectedIds[row].slice(position + 1),
      );
      expect(io.generate_strings_without_stop[row].length).toBeGreaterThan(
        io.generate_strings[row].length,
      );
    }
    expect(io.generate_strings[1].endsWith('<end_of_turn>')).toBe(true);
    expect(io.generate_strings[2]).not.toContain('<eos>');
    expect(g.padding_mask[0].every((k) => k === 1)).toBe(true);
  });
});

describeBackends('Gemma 3 stop tokens', () => {
  let preset: KerasHubPreset;
  let before: number;
  beforeAll(async () => {
    preset = await loadKerasHubPreset(path.join(DIR, 'preset'));
  });
  afterAll(() => preset.dispose());
  beforeEach(() => {
    before = tf.memory().numTensors;
  });
  afterEach(() => expect(tf.memory().numTensors).toBe(before));

  it("generate with the stop tokens: keras-hub's ids up to each row's stop token, padded after (compiled step)", async () => {
    const {ids, report} = await generated(preset.model, [0, 1, 2], io.stop_token_ids);
    expect(report).toMatchObject({compiled: true, reason: null});
    expect(ids).toEqual(expectedIds);
  });

  it("generate without stop tokens: keras-hub's ids past the stop (compiled step)", async () => {
    const {ids, report} = await generated(preset.model, [0, 1, 2], null);
    expect(report).toMatchObject({compiled: true, reason: null});
    expect(ids).toEqual(g.tokens_without_stop);
  });

  it('a row alone ends at its stop token: fewer compiled program runs than without stop tokens', async () => {
    for (const {row, position} of io.stops) {
      const stopped = await generated(preset.model, [row], io.stop_token_ids);
      const runsStopped = stopped.report?.run?.runs;
      const full = await generated(preset.model, [row], null);
      expect(stopped.report).toMatchObject({compiled: true, reason: null});
      expect(stopped.ids).toEqual([expectedIds[row]]);
      expect(runsStopped).toBeLessThan(full.report?.run?.runs as number);
      expect(stopped.ids[0].slice(position + 1).every((id) => id === PAD)).toBe(true);
    }
  });

  it("greedy generateText equals keras-hub's generate strings with its stop tokens (compiled step)", async () => {
    let report: StepReport | null = null;
    const texts = await generateText(preset, io.prompts, {
      maxLength: io.max_length,
      onCompile: (r) => (report = r),
    });
    expect(report).toMatchObject({compiled: true, reason: null});
    expect(texts).toEqual(io.generate_strings);
  });

  it('streams each row up to its stop token and nothing after: the pieces make the stripped text', async () => {
    const pieces = io.prompts.map(() => '');
    const tokens = io.prompts.map(() => [] as number[]);
    const texts = await generateText(preset, io.prompts, {
      maxLength: io.max_length,
      stripPrompt: true,
      onToken: (row, id, text) => {
        tokens[row].push(id);
        pieces[row] += text;
      },
    });
    expect(pieces).toEqual(texts);
    io.prompts.forEach((p, b) => expect(p + texts[b]).toBe(io.generate_strings[b]));
    tokens.forEach((ids, b) => {
      const n = g.prompt_lengths[b];
      expect(ids).toEqual(expectedIds[b].slice(n, n + ids.length));
      expect(n + ids.length).toBe(g.padding_mask[b].reduce((a, k) => a + k, 0));
    });
  });
});
