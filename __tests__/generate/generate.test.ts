/**
 * generate() on a small causal LM built from the package's layers (random weights): greedy
 * tokens equal an independent argmax loop over each row alone, prompts are kept, endId stops a
 * row, samplers reduce to greedy at their limits and are reproducible under a seed, bad options
 * are refused.
 */
import * as tf from '@tensorflow/tfjs';

import {generate, MultiHeadAttention, TokenAndPositionEmbedding} from '../../src';
import {describeBackends} from '../helpers/backends';

const V = 9;
const MAX = 8;

function lm(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const emb = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: 8,
  });
  const x = emb.apply(ids) as tf.SymbolicTensor;
  const att = new MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true}).apply(x);
  const h = tf.layers.add().apply([x, att as tf.SymbolicTensor]) as tf.SymbolicTensor;
  const logits = tf.layers.dense({units: V}).apply(h) as tf.SymbolicTensor;
  const model = tf.model({inputs: ids, outputs: logits});
  let seed = 3;
  model.setWeights(
    model.getWeights().map((w) => tf.randomNormal(w.shape, 0, 0.5, 'float32', seed++)),
  );
  return model;
}

/** Greedy decoding of one row alone, feeding the whole row so far (independent of generate). */
function greedyRow(model: tf.LayersModel, prompt: number[], maxLength: number): number[] {
  const row = [...prompt];
  while (row.length < maxLength) {
    const logits = tf.tidy(() =>
      (model.predict(tf.tensor2d([row], [1, row.length], 'int32')) as tf.Tensor).arraySync(),
    ) as number[][][];
    const last = logits[0][row.length - 1];
    row.push(last.indexOf(Math.max(...last)));
  }
  return row;
}

describeBackends('generate', () => {
  const prompts = [
    [4, 2, 7, 0],
    [5, 0, 0, 0],
  ];

  it('greedy: prompts kept, then the argmax of each step (= each row decoded alone)', async () => {
    const model = lm();
    const out = await generate(model, prompts, {maxLength: MAX, promptLengths: [3, 1]});
    expect(out.dtype).toBe('int32');
    expect(out.shape).toEqual([2, MAX]);
    const got = out.arraySync();
    expect(got[0]).toEqual(greedyRow(model, [4, 2, 7], MAX));
    expect(got[1]).toEqual(greedyRow(model, [5], MAX));
    out.dispose();
    model.dispose();
  });

  it('stops a row at endId and pads the rest', async () => {
    const model = lm();
    const full = greedyRow(model, [5], MAX);
    const endId = full[3]; // the third generated token
    const first = full.indexOf(endId, 1);
    const out = await generate(model, [[5]], {maxLength: MAX, endId, padId: 0});
    expect(out.arraySync()[0]).toEqual([
      ...full.slice(0, first + 1),
      ...new Array(MAX - first - 1).fill(0),
    ]);
    out.dispose();
    model.dispose();
  });

  it('samplers: topK k=1, topP near 0 and a tiny temperature give greedy; seeds reproduce', async () => {
    const model = lm();
    const opts = {maxLength: MAX, promptLengths: [3, 1]};
    const greedy = (await generate(model, prompts, opts)).arraySync();
    for (const extra of [
      {sampler: 'topK' as const, k: 1},
      {sampler: 'topP' as const, p: 1e-6},
      {sampler: 'temperature' as const, temperature: 1e-4},
    ]) {
      expect((await generate(model, prompts, {...opts, ...extra, seed: 1})).arraySync()).toEqual(
        greedy,
      );
    }
    const a = (await generate(model, prompts, {...opts, sampler: 'random', seed: 7})).arraySync();
    const b = (await generate(model, prompts, {...opts, sampler: 'random', seed: 7})).arraySync();
    expect(a).toEqual(b);
    expect(a.flat().every((t) => Number.isInteger(t) && t >= 0 && t < V)).toBe(true);
    const runs = await Promise.all(
      [11, 12, 13, 14].map(async (seed) =>
        JSON.stringify(
          (await generate(model, prompts, {...opts, sampler: 'random', seed})).arraySync(),
        ),
      ),
    );
    expect(new Set(runs).size).toBeGreaterThan(1); // sampling does vary with the seed
    model.dispose();
  });

  it('refuses bad options, saying what it expected', async () => {
    const model = lm();
    await expect(
      generate(model, prompts, {maxLength: MAX, sampler: 'beam' as never}),
    ).rejects.toThrow(
      'generate: expected sampler to be one of greedy, topK, topP, temperature, random, received "beam"',
    );
    await expect(generate(model, prompts, {maxLength: MAX, sampler: 'topK', k: 0})).rejects.toThrow(
      'expected k to be a whole number > 0, received 0',
    );
    await expect(generate(model, prompts, {maxLength: MAX, promptLengths: [1]})).rejects.toThrow(
      'expected 2 promptLengths, received 1',
    );
    await expect(generate(model, tf.zeros([2, 3]), {maxLength: MAX})).rejects.toThrow(
      'expected int32 prompts of shape [batch, length], received float32 of shape [2, 3]',
    );
    model.dispose();
  });
});
