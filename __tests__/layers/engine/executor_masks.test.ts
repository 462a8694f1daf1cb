/**
 * A Keras mask reaches only the layers whose inputs carry it (src/layers/engine/executor_masks.ts):
 * tfjs 4.22's predict handed a later layer the last mask it had set. Models built in code with
 * tfjs' layers and the package's masked GlobalAveragePooling1D; the reference is Keras' rule
 * (Conv1D and a merge with an unmasked input give no output mask, so the average is over every
 * step), computed with plain loops on the values before the pooling.
 */
import * as tf from '@tensorflow/tfjs';

import {GlobalAveragePooling1D} from '../../../src';
import {describeBackends} from '../../helpers/backends';

const IDS = [
  [3, 5, 7, 0, 0, 0],
  [4, 0, 0, 0, 0, 0],
];

/** The mean over the steps axis of `[batch, steps, features]` values, with plain loops. */
function plainMean(x: number[][][]): number[][] {
  return x.map((row) =>
    row[0].map((_, f) => row.reduce((sum, step) => sum + step[f], 0) / row.length),
  );
}

/** `[ids] -> before` and `[ids] -> pooled(before)` over the same layers. */
function models(before: (ids: tf.SymbolicTensor) => tf.SymbolicTensor, extra?: tf.SymbolicTensor) {
  const ids = tf.input({shape: [6], dtype: 'int32'});
  const x = before(ids);
  const pooled = new GlobalAveragePooling1D().apply(x) as tf.SymbolicTensor;
  const inputs = extra == null ? [ids] : [ids, extra];
  return {
    values: tf.model({inputs, outputs: x}),
    pooled: tf.model({inputs, outputs: pooled}),
  };
}

describeBackends('Keras masks reach only the layers whose inputs carry them', () => {
  it('a Conv1D after a masked embedding: the average after it is over every step, as in Keras', async () => {
    const embed = tf.layers.embedding({inputDim: 10, outputDim: 4, maskZero: true});
    const conv = tf.layers.conv1d({filters: 3, kernelSize: 1});
    const {values, pooled} = models((ids) => conv.apply(embed.apply(ids)) as tf.SymbolicTensor);
    const ids = tf.tensor2d(IDS, undefined, 'int32');
    const before = tf.memory().numTensors;
    const x = values.predict(ids) as tf.Tensor;
    const y = pooled.predict(ids) as tf.Tensor;
    const want = plainMean((await x.array()) as number[][][]);
    const got = (await y.array()) as number[][];
    for (let b = 0; b < want.length; b++) {
      for (let f = 0; f < want[b].length; f++) expect(got[b][f]).toBeCloseTo(want[b][f], 5);
    }
    tf.dispose([x, y]);
    expect(tf.memory().numTensors).toBe(before);
    ids.dispose();
  });

  it('Add of a masked and an unmasked input (no output mask in Keras): the plain average', async () => {
    const embed = tf.layers.embedding({inputDim: 10, outputDim: 4, maskZero: true});
    const other = tf.input({shape: [6, 4]});
    // the Add that loaded models get (registered under tfjs' name: Keras' output mask)
    const [Add] = tf.serialization.SerializationMap.getMap().classNameMap.Add;
    const add = new Add({}) as unknown as tf.layers.Layer;
    const {values, pooled} = models(
      (ids) => add.apply([embed.apply(ids) as tf.SymbolicTensor, other]) as tf.SymbolicTensor,
      other,
    );
    const ids = tf.tensor2d(IDS, undefined, 'int32');
    const o = tf.randomNormal([2, 6, 4], 0, 1, 'float32', 7);
    const x = values.predict([ids, o]) as tf.Tensor;
    const y = pooled.predict([ids, o]) as tf.Tensor;
    const want = plainMean((await x.array()) as number[][][]);
    const got = (await y.array()) as number[][];
    for (let b = 0; b < want.length; b++) {
      for (let f = 0; f < want[b].length; f++) expect(got[b][f]).toBeCloseTo(want[b][f], 5);
    }
    tf.dispose([ids, o, x, y]);
  });

  it('a mask given to apply by a caller is still used', () => {
    const x = tf.tensor3d([[[1], [3], [100]]]);
    const mask = tf.tensor2d([[1, 1, 0]], undefined, 'bool');
    const y = new GlobalAveragePooling1D().apply(x, {mask}) as tf.Tensor;
    expect(Array.from(y.dataSync())).toEqual([2]);
    tf.dispose([x, mask, y]);
  });
});
