/**
 * keras-hub's Gemma3TextEmbedder (an embedding Gemma3Backbone: bidirectional attention with a
 * centred sliding window, mean pooling over the padding mask, two projections, a unit norm)
 * built in JavaScript from keras-hub's config and weights, against keras-hub 0.32's `predict`
 * (fixtures/gemma3_family.py, case embedder): embeddings within 1e-5; `embedText` packs texts as
 * keras-hub's TextEmbedderPreprocessor does (start, end, pad to its sequence length) and returns
 * keras-hub's vectors, L2-normalised; no tensor left.
 */
import * as tf from '@tensorflow/tfjs';

import {buildKerasHubModel, embedText} from '../../src';
import type {EmbedTextTokenizer} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {hubFixture} from '../helpers/hub_families_fixture';

const fx = hubFixture('../gemma3/embedder');
const io = fx.io as typeof fx.io & {
  texts: string[];
  preprocessed: {token_ids: number[][]; padding_mask: number[][]};
  embeddings: number[][];
};

/** The tokenizer's ids of the fixture's texts, read back from keras-hub's packed rows. */
function fixtureTokenizer(): EmbedTextTokenizer {
  const ids = new Map(
    io.texts.map((t, i) => [
      t,
      io.preprocessed.token_ids[i].filter((_, j) => io.preprocessed.padding_mask[i][j] === 1),
    ]),
  );
  return {
    encode: (text) => (ids.get(text) as number[]).slice(1, -1),
    startTokenId: 2,
    endTokenId: 1,
    padTokenId: 0,
  };
}

describeBackends('Gemma 3 text embedder from keras-hub', () => {
  it('Gemma3TextEmbedder: embeddings equal keras-hub within 1e-5, no tensor left', () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Gemma3TextEmbedder', fx.task.config, fx.taskWeights);
    const xs = [io.preprocessed.token_ids, io.preprocessed.padding_mask].map((v) =>
      tf.tensor2d(v, undefined, 'int32'),
    );
    const out = model.predict(xs) as tf.Tensor;
    expect(out.shape).toEqual([io.texts.length, 12]);
    expectClose(out, io.embeddings, 1e-5, 0);
    tf.dispose([out, ...xs]);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('the embedding backbone: sequence_output and pooled_output equal keras-hub within 1e-4', () => {
    const model = buildKerasHubModel('Gemma3Backbone', fx.backbone, fx.backboneWeights);
    const xs = ['token_ids', 'padding_mask'].map((n) =>
      tf.tensor2d(fx.io.inputs[n], undefined, 'int32'),
    );
    const [sequence, pooled] = model.predict(xs) as tf.Tensor[];
    expectClose(sequence, fx.io.backbone.sequence_output as number[][][], 1e-4, 0);
    expectClose(pooled, fx.io.backbone.pooled_output as number[][], 1e-4, 0);
    tf.dispose([sequence, pooled, ...xs]);
    model.dispose();
  });

  it("embedText: keras-hub's packing and vectors, unit length, within 1e-5", async () => {
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('Gemma3TextEmbedder', fx.task.config, fx.taskWeights);
    const parts = {model, tokenizer: fixtureTokenizer(), preprocessor: {sequenceLength: 8}};
    const vectors = await embedText(parts, io.texts);
    expect(vectors.length).toBe(io.texts.length);
    vectors.forEach((v, i) => {
      expect(Math.hypot(...v)).toBeCloseTo(1, 6);
      v.forEach((x, j) => expect(Math.abs(x - io.embeddings[i][j])).toBeLessThan(1e-5));
    });
    // one text, and normalize false (the model's own output: keras-hub's, already unit length)
    const [one] = await embedText(parts, io.texts[2], {normalize: false});
    one.forEach((x, j) => expect(Math.abs(x - io.embeddings[2][j])).toBeLessThan(1e-5));
    await expect(embedText(parts, ['x'], {pooling: 'mean'} as never)).rejects.toThrow(
      'embedText: unknown option pooling (expected only normalize)',
    );
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});
