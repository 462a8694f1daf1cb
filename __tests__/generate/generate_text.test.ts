/**
 * generateText: keras-hub's CausalLM.generate(prompts, max_length) over `generate` — packing
 * ([start] + ids, cut to maxLength, right-padded), stop tokens (the end token and a second one),
 * the output kept up to and including the stop token with special tokens dropped, stripPrompt,
 * and streaming through onToken (text held back inside a character) and generate's onStep ids.
 * The model is a bigram table (Embedding one-hot -> Dense), so every expected string below is
 * read off the table by hand.
 */
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {generate, generateText, loadKerasHubPreset} from '../../src';
import type {KerasHubPreset, TextTokenizer} from '../../src';

// vocabulary: 0..9 are 'a'..'j' (one byte each); 10 and 11 are the two UTF-8 bytes of 'é';
// 12 is the end token, 13 the start token; 14..16 are Llama 3's <|eot_id|>, <|start_header_id|>
// and <|end_header_id|> (special tokens: no text); the pad id is 0 ('a', as GPT-2's '!')
const V = 17;
const END = 12;
const START = 13;
const EOT = 14;
const HEADER = 15;
const HEADER_END = 16;
const BYTES: number[][] = [
  ...Array.from({length: 10}, (_, i) => [0x61 + i]),
  [0xc3],
  [0xa9],
  [],
  [],
  [],
  [],
  [],
];

const tokenizer: TextTokenizer = {
  encode: (text) => [...text].flatMap((c) => (c === 'é' ? [10, 11] : [c.charCodeAt(0) - 0x61])),
  decode: (ids) => new TextDecoder().decode(new Uint8Array(ids.flatMap((i) => BYTES[i]))),
  startTokenId: START,
  endTokenId: END,
  padTokenId: 0,
  // keras-hub's GPT-2: special_token_ids holds <|endoftext|> (start and end) alone; the pad id 0
  // is an ordinary token ('!')
  specialTokenIds: [START, END],
};

// keras-hub's Llama3Tokenizer: stop_token_ids="auto" is [end_token_id, end_token2_id (<|eot_id|>)];
// special_token_ids: start, end, <|eot_id|> and the header tokens
const llama3: TextTokenizer = {
  ...tokenizer,
  stopTokenIds: [END, EOT],
  specialTokenIds: [START, END, EOT, HEADER, HEADER_END],
};

// the next token of each token: start -> 'b', 'a' -> 'b', 'b' -> é (10, 11), é -> 'c', 'c' -> end;
// a chat turn: 'd' -> <|start_header_id|> -> 'e' -> <|end_header_id|> -> 'f' -> <|eot_id|> -> 'g'
const NEXT: Record<number, number> = {
  [START]: 1,
  0: 1,
  1: 10,
  10: 11,
  11: 2,
  2: END,
  3: HEADER,
  [HEADER]: 4,
  4: HEADER_END,
  [HEADER_END]: 5,
  5: EOT,
  [EOT]: 6,
};

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

  it('Llama 3: stops at any of stopTokenIds (<|eot_id|>) and strips every specialTokenIds id', async () => {
    // keras-hub: 'd' then <|start_header_id|> e <|end_header_id|> f <|eot_id|>, where the row
    // stops (the mask keeps up to and including the stop token); the special ids are stripped
    const before = tf.memory().numTensors;
    expect(await generateText({model, tokenizer: llama3, preprocessor}, 'd')).toEqual(['def']);
    expect(
      await generateText({model, tokenizer: llama3, preprocessor}, 'd', {stripPrompt: true}),
    ).toEqual(['ef']);
    // streamed: the special tokens come with no text, the row's pieces add up to its text
    const seen: Array<[number, string]> = [];
    await generateText({model, tokenizer: llama3, preprocessor}, 'd', {
      onToken: (_row, id, text) => seen.push([id, text]),
    });
    expect(seen).toEqual([
      [HEADER, ''],
      [4, 'e'],
      [HEADER_END, ''],
      [5, 'f'],
      [EOT, ''],
    ]);
    expect(tf.memory().numTensors).toBe(before);
    // a stop token that is not special is kept in the text (keras-hub strips special ids only):
    // stopping at é's first byte leaves it alone, decoded as U+FFFD
    const stopInside = {...tokenizer, stopTokenIds: [10]};
    expect(await generateText({model, tokenizer: stopInside, preprocessor}, 'b')).toEqual([
      'b\uFFFD',
    ]);
  });

  it('without stopTokenIds a row stops at endTokenId alone', async () => {
    // <|eot_id|> is then an ordinary (special) token: 'g' follows it, then the end token
    const {stopTokenIds, ...noStops} = llama3;
    void stopTokenIds;
    expect(await generateText({model, tokenizer: noStops, preprocessor}, 'd')).toEqual(['defg']);
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

  it('refuses unknown options as generate does (max_length: did you mean maxLength?)', async () => {
    const before = tf.memory().numTensors;
    const run = (options: unknown) =>
      generateText({model, tokenizer, preprocessor}, 'b', options as never);
    await expect(run({max_length: 4})).rejects.toThrow(
      "generateText: unknown option 'max_length' (did you mean maxLength?); expected options " +
        'among maxLength, seed, stripPrompt, onToken, useCache, onFallback, memoryLimit, ' +
        'sampler, k, p, temperature',
    );
    await expect(run({maxLength: 4, endId: 2})).rejects.toThrow(
      "generateText: unknown option 'endId'; expected options among",
    );
    await expect(run(null)).rejects.toThrow(
      'generateText: expected options to be an object such as {maxLength: 32}, received null',
    );
    // the samplers' and the seed's checks name generateText, before anything is generated
    await expect(run({sampler: 'topk'})).rejects.toThrow(
      'generateText: expected sampler to be one of greedy, topK, topP, temperature, random, received "topk"',
    );
    await expect(run({seed: -1})).rejects.toThrow(
      'generateText: expected seed to be a whole number in [0, 4294967296), received -1',
    );
    // option values of the wrong kind, which were ignored (stripPrompt: 'yes' kept the prompt)
    await expect(run({maxLength: 4, stripPrompt: 'yes'})).rejects.toThrow(
      'generateText: expected options.stripPrompt to be true or false, received "yes"',
    );
    await expect(run({maxLength: 4, useCache: 0})).rejects.toThrow(
      'generateText: expected options.useCache to be true or false, received 0',
    );
    await expect(run({maxLength: 4, onToken: 5})).rejects.toThrow(
      'generateText: expected options.onToken to be a function, received 5',
    );
    await expect(run({maxLenght: 4})).rejects.toThrow(
      "generateText: unknown option 'maxLenght' (did you mean maxLength?)",
    );
    expect(tf.memory().numTensors).toBe(before);
  });

  it('refuses a tokenizer that does not fit the model before generating, naming both sizes', async () => {
    const before = tf.memory().numTensors;
    const onToken = jest.fn();
    const big = {...tokenizer, vocabularySize: 50257};
    await expect(
      generateText({model, tokenizer: big, preprocessor}, 'b', {onToken}),
    ).rejects.toThrow(
      "generateText: the tokenizer does not fit the model: expected a tokenizer of the model's " +
        `vocabulary size ${V} (its logits' last axis), received one of vocabularySize 50257`,
    );
    const small = {...tokenizer, vocabularySize: 12};
    await expect(generateText({model, tokenizer: small, preprocessor}, 'b')).rejects.toThrow(
      `expected a tokenizer of the model's vocabulary size ${V} (its logits' last axis), ` +
        'received one of vocabularySize 12',
    );
    // a tokenizer that does not say its size: its ids are checked against the model's
    await expect(
      generateText({model, tokenizer: {...tokenizer, endTokenId: 50256}, preprocessor}, 'b'),
    ).rejects.toThrow(
      'generateText: the tokenizer does not fit the model: expected its endTokenId to be a ' +
        `token id in [0, ${V}) (the model's vocabulary), received 50256`,
    );
    await expect(
      generateText({model, tokenizer: {...tokenizer, startTokenId: 99}, preprocessor}, 'b'),
    ).rejects.toThrow('expected its startTokenId to be a token id in [0, 17)');
    await expect(
      generateText({model, tokenizer: {...llama3, stopTokenIds: [END, 128009]}, preprocessor}, 'b'),
    ).rejects.toThrow('expected its stopTokenIds[1] to be a token id in [0, 17)');
    expect(onToken).not.toHaveBeenCalled();
    // the same size is accepted
    const same = {...tokenizer, vocabularySize: V};
    expect(await generateText({model, tokenizer: same, preprocessor}, 'b')).toEqual(['béc']);
    expect(tf.memory().numTensors).toBe(before);
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

const DIR = path.join(__dirname, '..', 'fixtures', 'hub_presets');

/** Expects `run` to reject with `message`, leaving as many tensors as before. */
async function rejectsWithoutLeak(run: () => Promise<unknown>, message: RegExp): Promise<void> {
  const before = tf.memory().numTensors;
  await expect(run()).rejects.toThrow(message);
  expect(tf.memory().numTensors).toBe(before);
}

describe('generateText refuses a maxLength the model cannot take before allocating rows', () => {
  beforeAll(() => tf.setBackend('cpu'));
  let gpt2: KerasHubPreset;
  let llama3: KerasHubPreset;
  beforeAll(async () => {
    gpt2 = await loadKerasHubPreset(path.join(DIR, 'gpt2'));
    llama3 = await loadKerasHubPreset(path.join(DIR, 'llama3'));
  });
  afterAll(() => {
    for (const p of [gpt2, llama3]) p.dispose();
  });

  it("GPT-2: a maxLength past its position embedding names the model's limit", async () => {
    // padding 1e9 ids per row first ran the process out of memory (a crash, not an error)
    await rejectsWithoutLeak(
      () => generateText(gpt2, 'The quick', {maxLength: 1e9}),
      /maxLength 1000000000 exceeds the model's position limit \d+ .*expected maxLength in \[1, \d+\]/,
    );
  });

  it('Llama 3 (rotary positions, no limit): the memory estimate refuses it', async () => {
    await rejectsWithoutLeak(
      () => generateText(llama3, ['a', 'b'], {maxLength: 1e9}),
      /maxLength 1000000000 for 2 prompts needs about .* over memoryLimit 2\.00 GiB/,
    );
  });
});
