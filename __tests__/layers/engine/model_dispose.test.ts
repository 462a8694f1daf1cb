/**
 * Disposing a model frees the weights of a layer it calls twice (a tied embedding: ids -> vectors,
 * then vectors -> logits), built in code or loaded from a file; a layer that another model still
 * uses keeps its weights until that model is disposed too. Counted with tf.memory().
 */
import * as tf from '@tensorflow/tfjs';

import {ReversibleEmbedding} from '../../../src';
import {saveToMemory} from '../../helpers/save';

type S = tf.SymbolicTensor;

function tiedModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const emb = new ReversibleEmbedding({inputDim: 50, outputDim: 8});
  const h = tf.layers.dense({units: 8}).apply(emb.apply(ids) as S) as S;
  return tf.model({inputs: ids, outputs: emb.apply(h) as S});
}

describe('model.dispose() and layers called more than once', () => {
  it('frees a tied embedding built in code', () => {
    const before = tf.memory().numTensors;
    const model = tiedModel();
    tf.tidy(() => {
      model.predict(tf.tensor2d([[1, 2]], [1, 2], 'int32'));
    });
    expect(tf.memory().numTensors).toBe(before + 3); // embeddings, kernel, bias
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('frees a tied embedding of a loaded model', async () => {
    const source = tiedModel();
    const artifacts = await saveToMemory(source);
    source.dispose();
    const before = tf.memory().numTensors;
    const loaded = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
    expect(tf.memory().numTensors).toBe(before + 3);
    loaded.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });

  it('frees a tfjs layer called twice, and keeps a layer another model still uses', () => {
    const before = tf.memory().numTensors;
    const x = tf.input({shape: [4]});
    const shared = tf.layers.dense({units: 4});
    const twice = tf.model({inputs: x, outputs: shared.apply(shared.apply(x) as S) as S});
    const other = tf.model({inputs: x, outputs: shared.apply(x) as S});
    expect(tf.memory().numTensors).toBe(before + 2);
    twice.dispose();
    // `other` still holds the layer: its weights stay and it still predicts
    expect(tf.memory().numTensors).toBe(before + 2);
    tf.tidy(() => {
      other.predict(tf.ones([1, 4]));
    });
    other.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});
