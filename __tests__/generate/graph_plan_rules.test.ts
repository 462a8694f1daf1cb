/**
 * The cached-decoding planner's rules read from layer contracts and tfjs' built-in rules: a layer
 * whose output at one position depends on other positions refuses the cache (a softmax over the
 * sequence axis of a `[batch, T]` tensor), so cached tokens always equal recomputed ones; and a
 * TransformerDecoder whose width is not a multiple of its heads decodes with keras-hub's floored
 * head size.
 */
import * as tf from '@tensorflow/tfjs';

import {
  cachedDecodingRefusal,
  generate,
  TokenAndPositionEmbedding,
  TransformerDecoder,
} from '../../src';

const V = 9;
const MAX = 8;

function randomize(model: tf.LayersModel, seed: number): tf.LayersModel {
  model.setWeights(
    model.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.7, 'float32', seed + i)),
  );
  return model;
}

async function bothWays(model: tf.LayersModel): Promise<[number[][], number[][]]> {
  const prompts = [
    [1, 4, 2, 0, 0, 0, 0, 0],
    [3, 3, 0, 0, 0, 0, 0, 0],
  ];
  const opts = {maxLength: MAX, promptLengths: [3, 2]};
  const a = await generate(model, prompts, {...opts, useCache: false});
  const b = await generate(model, prompts, opts); // the cache when the model allows it
  const out: [number[][], number[][]] = [
    (await a.array()) as number[][],
    (await b.array()) as number[][],
  ];
  tf.dispose([a, b]);
  return out;
}

describe('generate: what the planner refuses or allows', () => {
  it('refuses the cache for a softmax over the sequence axis of [batch, T]: cached = recomputed', async () => {
    const ids = tf.input({shape: [null], dtype: 'int32'});
    const e = tf.layers.embedding({inputDim: V, outputDim: 4}).apply(ids) as tf.SymbolicTensor;
    const s = tf.layers.dense({units: 1}).apply(e) as tf.SymbolicTensor; // [B, T, 1]
    const flat = tf.layers.reshape({targetShape: [-1]}).apply(s) as tf.SymbolicTensor; // [B, T]
    // softmax over T: position t depends on every position of the prefix
    const w = tf.layers.activation({activation: 'softmax'}).apply(flat) as tf.SymbolicTensor;
    const back = tf.layers.reshape({targetShape: [-1, 1]}).apply(w) as tf.SymbolicTensor;
    const h = tf.layers.multiply().apply([e, back]) as tf.SymbolicTensor;
    const logits = tf.layers.dense({units: V}).apply(h) as tf.SymbolicTensor;
    const model = randomize(tf.model({inputs: ids, outputs: logits}), 5);
    expect(cachedDecodingRefusal(model)).toMatch(
      /\(Activation\): its softmax acts over the last axis, the sequence axis of a rank-2 input/,
    );
    const [recomputed, auto] = await bothWays(model);
    expect(auto).toEqual(recomputed);
    model.dispose();
  });

  it('keeps an elementwise activation of [batch, T] position-wise', () => {
    const ids = tf.input({shape: [null], dtype: 'int32'});
    const e = tf.layers.embedding({inputDim: V, outputDim: 4}).apply(ids) as tf.SymbolicTensor;
    const s = tf.layers.dense({units: 1}).apply(e) as tf.SymbolicTensor;
    const flat = tf.layers.reshape({targetShape: [-1]}).apply(s) as tf.SymbolicTensor;
    const r = tf.layers.activation({activation: 'tanh'}).apply(flat) as tf.SymbolicTensor;
    const back = tf.layers.reshape({targetShape: [-1, 1]}).apply(r) as tf.SymbolicTensor;
    const logits = tf.layers.dense({units: V}).apply(back) as tf.SymbolicTensor;
    const model = tf.model({inputs: ids, outputs: logits});
    expect(cachedDecodingRefusal(model)).toBeNull();
    model.dispose();
  });

  it('decodes a TransformerDecoder 16 wide with 3 heads (head size 5, floored as keras-hub does)', async () => {
    const ids = tf.input({shape: [null], dtype: 'int32'});
    const x = new TokenAndPositionEmbedding({
      vocabularySize: V,
      sequenceLength: MAX,
      embeddingDim: 16,
    }).apply(ids) as tf.SymbolicTensor;
    const h = new TransformerDecoder({intermediateDim: 8, numHeads: 3}).apply(
      x,
    ) as tf.SymbolicTensor;
    const logits = tf.layers.dense({units: V}).apply(h) as tf.SymbolicTensor;
    const model = randomize(tf.model({inputs: ids, outputs: logits}), 9);
    expect(cachedDecodingRefusal(model)).toBeNull();
    const before = tf.memory().numTensors;
    const [recomputed, cached] = await bothWays(model);
    expect(cached).toEqual(recomputed);
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });
});
