/** Our layers inside tf.model / tf.sequential: predict, fit, save, load, masks, leaks. */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {AdditiveAttention, fileSystem, MultiHeadAttention} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose, maxAbsDiff} from '../helpers/close';
import {randTensor} from '../helpers/data';
import {saveToMemory} from '../helpers/save';

async function roundTrip(model: tf.LayersModel): Promise<tf.LayersModel> {
  const saved = await saveToMemory(model);
  return tf.loadLayersModel(tf.io.fromMemory(saved));
}

/** x + MHA(x), layer norm, dense: a transformer encoder block. */
function transformerBlock(selfAsPair: boolean): tf.LayersModel {
  const x = tf.input({shape: [6, 8]});
  const mha = new MultiHeadAttention({numHeads: 2, keyDim: 4, name: 'mha'});
  const att = mha.apply(selfAsPair ? [x, x] : x) as tf.SymbolicTensor;
  const h = tf.layers
    .layerNormalization()
    .apply(tf.layers.add().apply([x, att])) as tf.SymbolicTensor;
  const y = tf.layers.dense({units: 8}).apply(h) as tf.SymbolicTensor;
  return tf.model({inputs: x, outputs: y});
}

describeBackends('models', () => {
  for (const selfAsPair of [false, true]) {
    it(`a transformer block x + MHA(${selfAsPair ? '[x, x]' : 'x'}) predicts, fits, saves and loads`, async () => {
      const model = transformerBlock(selfAsPair);
      const xs = randTensor([4, 6, 8], 1);
      const ys = randTensor([4, 6, 8], 2);
      tf.dispose(model.predict(xs));
      model.compile({optimizer: tf.train.adam(0.01), loss: 'meanSquaredError'});
      const h = await model.fit(xs, ys, {epochs: 20, batchSize: 4, verbose: 0});
      const loss = h.history.loss as number[];
      expect(loss[loss.length - 1]).toBeLessThan(loss[0] * 0.9);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-'));
      await model.save(fileSystem(dir));
      for (const loaded of [await roundTrip(model), await tf.loadLayersModel(fileSystem(dir))]) {
        expect(loaded.getLayer('mha')).toBeInstanceOf(MultiHeadAttention);
        const a = model.predict(xs) as tf.Tensor;
        const b = loaded.predict(xs) as tf.Tensor;
        expectClose(b, a, 1e-6, 1e-6);
        const before = tf.memory().numTensors;
        tf.dispose(loaded.predict(xs));
        expect(tf.memory().numTensors).toBe(before);
        // the loaded model trains too
        loaded.compile({optimizer: tf.train.adam(0.01), loss: 'meanSquaredError'});
        await loaded.fit(xs, ys, {epochs: 1, verbose: 0});
        tf.dispose([a, b]);
        loaded.dispose();
      }
      fs.rmSync(dir, {recursive: true});
      tf.dispose([xs, ys]);
      model.dispose();
    });
  }

  it('a causal model keeps causality after save and load', async () => {
    const x = tf.input({shape: [5, 4]});
    const y = new MultiHeadAttention({numHeads: 2, keyDim: 3, useCausalMask: true}).apply(
      x,
    ) as tf.SymbolicTensor;
    const loaded = await roundTrip(tf.model({inputs: x, outputs: y}));
    tf.tidy(() => {
      const a = randTensor([2, 5, 4], 3);
      // change only the last two time steps
      const b = tf.concat([tf.slice(a, [0, 0, 0], [2, 3, 4]), randTensor([2, 2, 4], 4)], 1);
      const ya = loaded.predict(a) as tf.Tensor;
      const yb = loaded.predict(b) as tf.Tensor;
      expect(
        maxAbsDiff(tf.slice(ya, [0, 0, 0], [2, 3, 4]), tf.slice(yb, [0, 0, 0], [2, 3, 4])),
      ).toBeLessThan(1e-6);
      expect(
        maxAbsDiff(tf.slice(ya, [0, 3, 0], [2, 2, 4]), tf.slice(yb, [0, 3, 0], [2, 2, 4])),
      ).toBeGreaterThan(1e-4);
    });
    loaded.dispose();
  });

  for (const [name, make] of [
    ['MultiHeadAttention', () => new MultiHeadAttention({numHeads: 2, keyDim: 3})],
    ['AdditiveAttention (d2l)', () => new AdditiveAttention({numHiddens: 4})],
  ] as const) {
    it(`${name}: with a lengths input, valid positions ignore the padded ones (also after load)`, async () => {
      const q = tf.input({shape: [3, 4]});
      const kv = tf.input({shape: [6, 4]});
      const lens = tf.input({shape: [1], dtype: 'int32'});
      const out = make().apply([q, kv, lens]) as tf.SymbolicTensor;
      const model = tf.model({inputs: [q, kv, lens], outputs: out});
      const loaded = await roundTrip(model);
      tf.tidy(() => {
        const queries = randTensor([2, 3, 4], 5);
        const mem = randTensor([2, 6, 4], 6);
        const l = tf.tensor2d([[2], [4]], [2, 1], 'int32');
        // overwrite everything at positions >= 4 (padding for both rows) and >= 2 for row 0
        const keep = tf.reshape(
          tf.less(tf.range(0, 6), tf.reshape(tf.tensor1d([2, 4]), [2, 1])),
          [2, 6, 1],
        );
        const mem2 = tf.where(keep, mem, tf.mul(randTensor([2, 6, 4], 7), 100));
        for (const m of [model, loaded]) {
          const a = m.predict([queries, mem, l]) as tf.Tensor;
          const b = m.predict([queries, mem2, l]) as tf.Tensor;
          expect(maxAbsDiff(a, b)).toBeLessThan(1e-5);
        }
        expectClose(
          loaded.predict([queries, mem, l]) as tf.Tensor,
          model.predict([queries, mem, l]) as tf.Tensor,
          1e-6,
          1e-6,
        );
      });
      model.dispose();
      loaded.dispose();
    });
  }

  it('Keras masks from Embedding(maskZero) work in predict and fit, and scores can be an output', async () => {
    const tokens = tf.input({shape: [5], dtype: 'int32'});
    // not trainable: tfjs's wasm backend has no UnsortedSegmentSum kernel for the gather gradient
    const emb = tf.layers
      .embedding({inputDim: 10, outputDim: 8, maskZero: true, trainable: false})
      .apply(tokens) as tf.SymbolicTensor;
    const [att, scores] = new MultiHeadAttention({
      numHeads: 2,
      keyDim: 4,
      returnAttentionScores: true,
      name: 'mha',
    }).apply(emb) as tf.SymbolicTensor[];
    const pooled = tf.layers.globalAveragePooling1d().apply(att) as tf.SymbolicTensor;
    const prob = tf.layers
      .dense({units: 1, activation: 'sigmoid'})
      .apply(pooled) as tf.SymbolicTensor;
    const model = tf.model({inputs: tokens, outputs: [prob, scores]});
    const loaded = await roundTrip(model);
    tf.tidy(() => {
      const ids = tf.tensor2d(
        [
          [3, 4, 0, 0, 0],
          [1, 2, 3, 4, 5],
        ],
        [2, 5],
        'int32',
      );
      for (const m of [model, loaded]) {
        const [, s] = m.predict(ids) as tf.Tensor[];
        expect(s.shape).toEqual([2, 2, 5, 5]);
        // row 0, query 0: only keys 0 and 1 are real tokens
        const w = (s.arraySync() as number[][][][])[0][0][0];
        expect(w.slice(2)).toEqual([0, 0, 0]);
        expect(w[0] + w[1]).toBeCloseTo(1, 5);
      }
    });
    const single = tf.model({inputs: tokens, outputs: prob});
    single.compile({optimizer: 'adam', loss: 'binaryCrossentropy'});
    const xs = tf.tensor2d(
      [
        [3, 4, 0, 0, 0],
        [1, 2, 3, 4, 5],
        [7, 0, 0, 0, 0],
        [2, 2, 2, 0, 0],
      ],
      [4, 5],
      'int32',
    );
    const ys = tf.tensor2d([[1], [0], [1], [0]]);
    const h = await single.fit(xs, ys, {epochs: 3, verbose: 0});
    expect((h.history.loss as number[]).every(Number.isFinite)).toBe(true);
    tf.dispose([xs, ys]);
    model.dispose();
    loaded.dispose();
  });

  it('works in tf.sequential and saves the Keras config keys and weight names', async () => {
    const model = tf.sequential({
      layers: [
        tf.layers.dense({units: 8, inputShape: [4, 3]}),
        new MultiHeadAttention({numHeads: 2, keyDim: 4, name: 'mha', dropout: 0.1}),
        tf.layers.flatten(),
        tf.layers.dense({units: 2}),
      ],
    });
    const artifacts = await saveToMemory(model);
    const topo = JSON.stringify(artifacts.modelTopology);
    for (const key of [
      '"num_heads":2',
      '"key_dim":4',
      '"value_dim":4',
      '"use_bias":true',
      '"attention_axes":[1]',
      '"query_shape":[null,4,8]',
    ]) {
      expect(topo).toContain(key);
    }
    expect(artifacts.weightSpecs!.map((w) => w.name).filter((n) => n.startsWith('mha/'))).toEqual(
      ['query', 'key', 'value', 'attention_output'].flatMap((n) => [
        `mha/${n}/kernel`,
        `mha/${n}/bias`,
      ]),
    );
    const loaded = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
    tf.tidy(() => {
      const x = randTensor([2, 4, 3], 9);
      expectClose(loaded.predict(x) as tf.Tensor, model.predict(x) as tf.Tensor, 1e-6, 1e-6);
    });
    model.dispose();
    loaded.dispose();
  });
});
