/**
 * generateText: keras-hub's CausalLM.generate(prompts, max_length) over `generate` — packing
 * ([start] + ids, cut to maxLength, right-padded), stop tokens (the end token and a second one),
 * the output kept up to and including the stop token with special tokens dropped, stripPrompt,
 * and streaming through onToken (text held back inside a character) and generate's onStep ids.
 * The model is a bigram table (Embedding one-hot -> Dense), so every expected string below is
 * read off the table by hand.
 */
import * as tf from '@tensorflow/tfjs';

import {generate, generateText} from '../src';
import type {TextTokenizer} from '../src';

// vocabulary: 0..9 are 'a'..'j' (one byte each); 10 and 11 are the two UTF-8 bytes of 'é';
// 12 is the end token, 13 the start token (no text); the pad id is 0 ('a', as GPT-2's '!')
const V = 14;
const END = 12;
const START = 13;
const BYTES: number[][] = [
  ...Array.from({length: 10}, (_, i) => [0x61 + i]),
  [0xc3],
  [0xa9],
  [],
  [],
];

const tokenizer: TextTokenizer = {
  encode: (text) => [...text].flatMap((c) => (c === 'é' ? [10, 11] : [c.charCodeAt(0) - 0x61])),
  decode: (ids) => new TextDecoder().decode(new Uint8Array(ids.flatMap((i) => BYTES[i]))),
  startTokenId: START,
  endTokenId: END,
  padTokenId: 0,
};

// the next token of each token: start -> 'b', 'a' -> 'b', 'b' -> é (10, 11), é -> 'c', 'c' -> end
const NEXT: Record<number, number> = {[START]: 1, 0: 1, 1: 10, 10: 11, 11: 2, 2: END};

function bigramModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const oneHot = tf.layers.embedding({inputDim: V, outputDim: V, trainable: false});
  const table = tf.layers.dense({units: V, useBias: false});
  const model = tf.model({
    inputs: ids,
    outputs: table.apply(oneHot.apply(ids)) as tf.SymbolicTensor,
  });
  const w = tf.buffer([V, V]);
  for (let i = 0; i < V; i++) w.set(10, i, NEXT[i] ?? END);
  oneHot.setWeights([tf.eye(V)]);
  table.setWeights([w.toTensor()]);
  return model;
}

const preprocessor = {sequenceLength: 8, addStartToken: true, addEndToken: false};

describe('generateText', () => {
  let model: tf.LayersModel;
  beforeAll(() => {
    model = bigramModel();
  });
  afterAll(() => model.dispose());

  it('packs [start] + ids, stops at the end token, drops special tokens, keeps the prompt', async () => {
    const before = tf.memory().numTensors;
    const out = await generateText({model, tokenizer, preprocessor}, ['b', 'ab']);
    // 'b' -> é -> 'c' -> end; the pad id 0 ('a') after the stop is not text
    expect(out).toEqual(['béc', 'abéc']);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('stripPrompt returns the generated text alone; a single prompt string works', async () => {
    expect(await generateText({model, tokenizer, preprocessor}, 'b', {stripPrompt: true})).toEqual([
      'éc',
    ]);
  });

  it('a second stop token (Llama 3) stops the row and is a special token', async () => {
    const llama = {...tokenizer, endToken2Id: 2};
    expect(await generateText({model, tokenizer: llama, preprocessor}, 'b')).toEqual(['bé']);
  });

  it('maxLength cuts the prompt (keras-hub keeps its beginning) and bounds generation', async () => {
    const cut = await generateText({model, tokenizer, preprocessor}, 'abcdefghij');
    expect(cut).toEqual(['abcdefg']); // start + 7 ids fill maxLength 8: nothing generated
    // room for one token after [start, a, b]: é is cut after its first byte (lossy: U+FFFD)
    expect(await generateText({model, tokenizer, preprocessor}, 'ab', {maxLength: 4})).toEqual([
      'ab\uFFFD',
    ]);
  });

  it('streams each token through onToken, text held back inside a character', async () => {
    const seen: Array<[number, number, string]> = [];
    const out = await generateText({model, tokenizer, preprocessor}, ['b', 'ab'], {
      stripPrompt: true,
      onToken: (row, id, text) => seen.push([row, id, text]),
    });
    const row0 = seen.filter(([r]) => r === 0).map(([, id, text]) => [id, text]);
    expect(row0).toEqual([
      [10, ''],
      [11, 'é'],
      [2, 'c'],
      [END, ''],
    ]);
    for (const b of [0, 1]) {
      const streamed = seen.filter(([r]) => r === b).map(([, , text]) => text);
      expect(streamed.join('')).toBe(out[b]);
    }
  });

  it('streams the final U+FFFD of a row whose generation ends inside a character', async () => {
    const seen: string[] = [];
    // room for one token after [start, a, b]: the first byte of é, then maxLength
    const out = await generateText({model, tokenizer, preprocessor}, 'ab', {
      maxLength: 4,
      stripPrompt: true,
      onToken: (_row, _id, text) => seen.push(text),
    });
    expect(out).toEqual(['\uFFFD']);
    expect(seen.join('')).toBe('\uFFFD');
  });

  it("generate's onStep gets each row's new token (null in the prompt or after the stop)", async () => {
    const steps: Array<[number, ReadonlyArray<number | null>]> = [];
    const ids = await generate(
      model,
      [
        [START, 1, 0, 0, 0, 0],
        [START, 0, 1, 0, 0, 0],
      ],
      {
        maxLength: 6,
        promptLengths: [2, 3],
        endId: [END],
        onStep: (t, tokens) => steps.push([t, [...tokens]]),
      },
    );
    ids.dispose();
    expect(steps).toEqual([
      [2, [10, null]],
      [3, [11, 10]],
      [4, [2, 11]],
      [5, [END, 2]],
    ]);
  });

  it('refuses what it cannot use, saying what it expected', async () => {
    await expect(generateText({model, tokenizer} as never, 'a')).rejects.toThrow(
      'generateText: expected {model, tokenizer, preprocessor}, as loadKerasHubPreset returns',
    );
    // loadKerasHubPreset's result for a preset saved without its preprocessor type-checks as is
    await expect(generateText({model, tokenizer: null, preprocessor: null}, 'a')).rejects.toThrow(
      'received none for tokenizer, preprocessor',
    );
    await expect(generateText({model, tokenizer, preprocessor}, [])).rejects.toThrow(
      /^generateText: expected a prompt string or a non-empty array of strings/,
    );
    await expect(
      generateText({model, tokenizer: {...tokenizer, startTokenId: undefined}, preprocessor}, 'a'),
    ).rejects.toThrow('the preprocessor adds a start token, but the tokenizer has no startTokenId');
    await expect(
      generateText({model, tokenizer, preprocessor}, 'a', {maxLength: 1}),
    ).rejects.toThrow('generateText: expected maxLength to be a whole number >= 2, received 1');
  });
});
