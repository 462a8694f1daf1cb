/**
 * What generate refuses before it decodes, and the samplers' refusals: non-finite logits and
 * temperatures that overflow, maxLength past the model's position limit or over the memory
 * estimate, prompt ids / padId / endId that are not token ids, non-integer seeds, promptLengths
 * that are not an array, models that are not ids -> logits [batch, T, vocab], unknown options.
 * Every error says what was expected and what was received; a refused run leaves no tensor.
 */
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  generate,
  generateText,
  loadKerasModel,
  MultiHeadAttention,
  PositionEmbedding,
  TokenAndPositionEmbedding,
} from '../../src';
import type {GenerateOptions} from '../../src';
import {sampleNext} from '../../src/generate/samplers';

const V = 9;
const MAX = 8;
type S = tf.SymbolicTensor;

function randomize(model: tf.LayersModel): tf.LayersModel {
  let seed = 3;
  model.setWeights(
    model.getWeights().map((w) => tf.randomNormal(w.shape, 0, 0.5, 'float32', seed++)),
  );
  return model;
}

/** TokenAndPositionEmbedding (sequenceLength MAX), one causal MultiHeadAttention (2 x 4), Dense. */
function lm(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: 8,
  }).apply(ids) as S;
  const att = new MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true}).apply(x) as S;
  const h = tf.layers.add().apply([x, att]) as S;
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(h) as S}));
}

/** Embedding + Dense: no position limit, no attention. */
function positionFree(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const x = tf.layers.embedding({inputDim: V, outputDim: 4}).apply(ids) as S;
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S}));
}

/** Every prediction of the model gets `bias[i]` added to token i's logit (the head's bias). */
function withHeadBias(model: tf.LayersModel, bias: number[]): tf.LayersModel {
  const head = model.layers[model.layers.length - 1];
  const b = tf.tensor1d(bias);
  head.setWeights([head.getWeights()[0], b]);
  b.dispose();
  return model;
}

const PROMPTS = [
  [4, 2, 7, 0],
  [5, 0, 0, 0],
];
const opts = (extra: Partial<GenerateOptions> = {}): GenerateOptions => ({
  maxLength: MAX,
  promptLengths: [3, 1],
  ...extra,
});

/** Expects the run to be refused with `message`, leaving no tensor behind. */
async function refused(
  model: tf.LayersModel,
  options: unknown,
  message: string | RegExp,
  prompts: tf.Tensor | number[][] = PROMPTS,
): Promise<void> {
  const before = tf.memory().numTensors;
  await expect(generate(model, prompts, options as GenerateOptions)).rejects.toThrow(message);
  expect(tf.memory().numTensors).toBe(before);
}

describe('generate refuses what it cannot run', () => {
  let model: tf.LayersModel;
  beforeAll(async () => {
    await tf.setBackend('cpu');
    model = lm();
  });
  afterAll(() => model.dispose());

  describe('samplers', () => {
    const rng = () => 0.5;
    it('refuse a non-finite logit (Infinity, -Infinity, NaN), naming it', () => {
      for (const sampler of ['greedy', 'random', 'topK', 'topP', 'temperature'] as const) {
        for (const bad of [Infinity, -Infinity, NaN]) {
          expect(() => sampleNext([0, bad, 1], {sampler}, rng, 'row 0 at position 3')).toThrow(
            `generate: expected finite logits from the model, received ${bad} for token 1 (row 0 at position 3)`,
          );
        }
      }
    });

    it('refuse a temperature whose inverse is not finite (1e-310), or Infinity', async () => {
      for (const temperature of [1e-310, Infinity]) {
        await refused(
          model,
          opts({sampler: 'temperature', temperature}),
          `generate: expected temperature to be a finite number > 0 whose inverse is finite, received ${temperature}`,
        );
      }
    });

    it('refuse a temperature that scales a finite logit to Infinity', () => {
      // 1 / 1e-307 = 1e307 is finite; 100 / 1e-307 = 1e309 is not
      expect(() =>
        sampleNext([0, 100, 1], {sampler: 'temperature', temperature: 1e-307}, rng, 'row 1'),
      ).toThrow(
        'generate: temperature 1e-307 scales the logit 100 of token 1 to Infinity (row 1); ' +
          'expected a temperature that keeps logits / temperature finite',
      );
      // the same temperature on small logits is the greedy choice (token 1 = argmax)
      expect(sampleNext([0, 1e-5, 1e-6], {sampler: 'temperature', temperature: 1e-307}, rng)).toBe(
        1,
      );
    });

    it('a model whose logits hold Infinity is refused at that step, leaving no tensor', async () => {
      const inf = withHeadBias(lm(), [0, 0, 0, Infinity, 0, 0, 0, 0, 0]);
      for (const useCache of [true, false]) {
        await refused(
          inf,
          opts({sampler: 'topK', k: 3, seed: 1, useCache}),
          // the shortest prompt is 1 long: position 1 of row 1 is the first token chosen
          'generate: expected finite logits from the model, received Infinity for token 3 (row 1 at position 1)',
        );
      }
      inf.dispose();
    });
  });

  describe('maxLength', () => {
    it("is checked against a position embedding's sequenceLength", async () => {
      for (const maxLength of [MAX + 1, 1e9]) {
        await refused(
          model,
          opts({maxLength}),
          new RegExp(
            `^generate: maxLength ${maxLength} exceeds the model's position limit ${MAX} ` +
              `\\(layer '\\w+' \\(TokenAndPositionEmbedding\\) has sequenceLength ${MAX}\\); ` +
              `expected maxLength in \\[1, ${MAX}\\]$`,
          ),
        );
      }
    });

    it('less a fixed startIndex, and against a fixed input length', async () => {
      const ids = tf.input({shape: [null], dtype: 'int32'});
      const e = tf.layers.embedding({inputDim: V, outputDim: 4}).apply(ids) as S;
      const pos = new PositionEmbedding({sequenceLength: 8, startIndex: 2, name: 'pos'}).apply(e);
      const x = tf.layers.add().apply([e, pos as S]) as S;
      const shifted = tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S});
      await refused(
        shifted,
        opts({maxLength: 7}),
        "maxLength 7 exceeds the model's position limit 6 (layer 'pos' (PositionEmbedding) has " +
          'sequenceLength 8 and startIndex 2); expected maxLength in [1, 6]',
      );
      const fixedIds = tf.input({shape: [5], dtype: 'int32'});
      const fe = tf.layers.embedding({inputDim: V, outputDim: 4}).apply(fixedIds) as S;
      const fixed = tf.model({
        inputs: fixedIds,
        outputs: tf.layers.dense({units: V}).apply(fe) as S,
      });
      await refused(
        fixed,
        opts({maxLength: 6}),
        "maxLength 6 exceeds the model's position limit 5 (the model's input length is 5)",
      );
      shifted.dispose();
      fixed.dispose();
    });

    it('is checked against the memory estimate: logits, caches, ids (memoryLimit)', async () => {
      const B = 2;
      const logits = B * MAX * V * 4; // [2, 8, 9] float32
      const ids = B * MAX * 8; // JavaScript numbers
      const cache = B * 2 * MAX * 2 * 4 * 4; // one attention: [B, 2, MAX, heads 2, keyDim 4] float32
      const recompute = logits + ids;
      const cached = recompute + cache;
      await refused(
        model,
        opts({useCache: false, memoryLimit: recompute - 1}),
        `generate: maxLength ${MAX} for ${B} prompts needs about ${recompute} bytes (logits [2, 8, 9] ` +
          `float32: ${logits} bytes; ids: ${ids} bytes), over memoryLimit ${recompute - 1} bytes; ` +
          'expected a smaller maxLength or batch, or a larger memoryLimit',
      );
      (await generate(model, PROMPTS, opts({useCache: false, memoryLimit: recompute}))).dispose();
      await refused(
        model,
        opts({memoryLimit: cached - 1}),
        `needs about ${cached} bytes (logits [2, 8, 9] float32: ${logits} bytes; key / value ` +
          `caches: ${cache} bytes; ids: ${ids} bytes)`,
      );
      (await generate(model, PROMPTS, opts({memoryLimit: cached}))).dispose();
      await refused(
        model,
        opts({memoryLimit: 'big' as never}),
        'generate: expected memoryLimit to be a number of bytes > 0, received "big"',
      );
    });

    it('1e9 on a model without a position limit is refused by the default memoryLimit', async () => {
      const free = positionFree();
      await refused(
        free,
        opts({maxLength: 1e9}),
        /^generate: maxLength 1000000000 for 2 prompts needs about 82\.0 GiB \(logits \[2, 1000000000, 9\] float32: 67\.1 GiB; ids: 14\.9 GiB\), over memoryLimit 2\.00 GiB/,
      );
      free.dispose();
    });
  });

  describe('token ids, seed, promptLengths', () => {
    it('refuses prompt ids that are not int32, negative, or past the vocabulary', async () => {
      for (const [bad, shown] of [
        [2 ** 32 + 1, '4294967297'],
        [-1, '-1'],
        [V, `${V}`],
      ] as Array<[number, string]>) {
        await refused(
          model,
          opts(),
          `generate: prompt 1 holds ${shown} at position 0; expected token ids, whole numbers in [0, ${V})`,
          [
            [4, 2, 7, 0],
            [bad, 0, 0, 0],
          ],
        );
      }
      const tensor = tf.tensor2d([[3, -2, 1]], [1, 3], 'int32');
      await refused(
        model,
        {maxLength: MAX},
        'generate: prompt 0 holds -2 at position 1; expected token ids',
        tensor,
      );
      tensor.dispose();
    });

    it('refuses padId and endId that are not token ids', async () => {
      for (const [name, value, shown] of [
        ['padId', 1.5, '1.5'],
        ['padId', -1, '-1'],
        ['endId', '5', '"5"'],
        ['endId', 1.5, '1.5'],
        ['endId', V, `${V}`],
      ] as Array<[string, unknown, string]>) {
        await refused(
          model,
          opts({[name]: value}),
          `generate: expected ${name} to be a token id, a whole number in [0, ${V}), received ${shown}`,
        );
      }
    });

    it('refuses a seed that is not a whole number in [0, 2**32)', async () => {
      for (const [seed, shown] of [
        [1.9, '1.9'],
        [-1, '-1'],
        [2 ** 32, '4294967296'],
        ['7', '"7"'],
      ] as Array<[unknown, string]>) {
        await refused(
          model,
          opts({sampler: 'random', seed: seed as number}),
          `generate: expected seed to be a whole number in [0, 4294967296), received ${shown}`,
        );
      }
    });

    it('refuses promptLengths that are not an array of whole numbers within each row', async () => {
      await refused(
        model,
        opts({promptLengths: {0: 3, 1: 1} as never}),
        'generate: expected promptLengths to be an array of 2 whole numbers (one per prompt), ' +
          'received {"0":3,"1":1}',
      );
      await refused(
        model,
        opts({promptLengths: [3, 1.5]}),
        'prompt 1 has length 1.5; expected 1 to 4',
      );
      await refused(model, opts({promptLengths: [5, 1]}), 'prompt 0 has length 5; expected 1 to 4');
    });
  });

  describe('the model and the options', () => {
    it('refuses a model that is not ids [batch, T] -> logits [batch, T, vocab]', async () => {
      const ids = tf.input({shape: [4], dtype: 'int32', name: 'ids'});
      const e = tf.layers.embedding({inputDim: V, outputDim: 4}).apply(ids) as S;
      const pooled = tf.layers.globalAveragePooling1d().apply(e) as S;
      const classifier = tf.model({
        inputs: ids,
        outputs: tf.layers.dense({units: V, name: 'cls'}).apply(pooled) as S,
      });
      await refused(
        classifier,
        opts({maxLength: 4}),
        /^generate: the model is not a causal language model: expected a model taking token ids \[batch, length\] \(and optionally a padding mask \[batch, length\]\) and returning one tensor of logits \[batch, length, vocab\], received inputs ids \[null, 4\] int32 and outputs cls\/\w+ \[null, 9\] float32$/,
      );
      const vectors = tf.input({shape: [null, 4], name: 'vectors'});
      const dense = tf.model({
        inputs: vectors,
        outputs: tf.layers.dense({units: V}).apply(vectors) as S,
      });
      await refused(dense, opts(), /received inputs vectors \[null, null, 4\] float32 and outputs/);
      classifier.dispose();
      dense.dispose();
    });

    it('refuses a keras-hub BERT text classifier (loadKerasModel) as not a causal LM, in generate and generateText', async () => {
      const file = path.join(__dirname, '..', 'fixtures', 'hub_presets', 'bert.keras');
      const bert = await loadKerasModel(file);
      // what it got: three inputs, logits [batch, classes] (the fixture's number of classes)
      const got =
        /received inputs token_ids \[null, null\] int32, segment_ids \[null, null\] int32, padding_mask \[null, null\] int32 and outputs \S+ \[null, \d+\] float32$/;
      await refused(bert, opts(), /^generate: the model is not a causal language model: expected/);
      await refused(bert, opts(), got);
      const tokenizer = {encode: () => [1], decode: () => '', startTokenId: 1, endTokenId: 2};
      const preprocessor = {sequenceLength: 8, addStartToken: true};
      const before = tf.memory().numTensors;
      await expect(generateText({model: bert, tokenizer, preprocessor}, 'a')).rejects.toThrow(
        /^generateText: the model is not a causal language model: expected .*logits \[batch, length, vocab\]/,
      );
      expect(tf.memory().numTensors).toBe(before);
      bert.dispose();
    });

    it('refuses unknown options, naming the accepted ones', async () => {
      const accepted =
        'maxLength, promptLengths, endId, padId, seed, useCache, onFallback, onStep, ' +
        'memoryLimit, sampler, k, p, temperature';
      await refused(
        model,
        {max_length: MAX},
        `generate: unknown option 'max_length' (did you mean maxLength?); expected options among ${accepted}`,
      );
      await refused(
        model,
        opts({temprature: 0.5} as never),
        `generate: unknown option 'temprature' (did you mean temperature?); expected options among ${accepted}`,
      );
      // a misspelling at most two edits away gets a suggestion; a name far from all gets none
      await refused(
        model,
        opts({maxLenght: MAX} as never),
        `generate: unknown option 'maxLenght' (did you mean maxLength?); expected options among ${accepted}`,
      );
      await refused(
        model,
        opts({beams: 4} as never),
        `generate: unknown option 'beams'; expected options among ${accepted}`,
      );
    });

    it('refuses a flag that is not a boolean and a callback that is not a function', async () => {
      await refused(
        model,
        opts({useCache: 'no'} as never),
        'generate: expected options.useCache to be true or false, received "no"',
      );
      await refused(
        model,
        opts({onStep: 5} as never),
        'generate: expected options.onStep to be a function, received 5',
      );
      await refused(
        model,
        undefined,
        'generate: expected options to be an object such as {maxLength: 32}, received undefined',
      );
    });
  });
});
