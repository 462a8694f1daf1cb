/**
 * Keras masks through the merge layers (src/layers/core/merge_masks.ts), against Keras 3.15.1 /
 * keras-hub 0.32 (fixtures/masked_layers.py): Add's output mask is the OR of its inputs' masks,
 * so the masked average after it matches Keras' predictions (tolerance 1e-5 absolute); Maximum,
 * whose values Keras computes with the masks, is refused by name when a mask reaches it.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {loadKerasModel} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {maxAbsDiff} from '../../helpers/close';

const DIR = path.join(__dirname, '..', '..', 'fixtures', 'masked_layers');
const IO = JSON.parse(fs.readFileSync(path.join(DIR, 'io.json'), 'utf8')) as Record<
  string,
  unknown
>;
const IDS = IO.ids as number[][];
const load = (name: string) =>
  loadKerasModel(new Uint8Array(fs.readFileSync(path.join(DIR, `${name}.keras`))));

describeBackends('merge layers with Keras masks', () => {
  it("Add: the OR of its inputs' masks, as Keras' Merge.compute_mask (predictions within 1e-5)", async () => {
    const model = await load('add_pooling');
    const before = tf.memory().numTensors;
    const a = tf.tensor2d(IDS, undefined, 'int32');
    const b = tf.tensor2d([...IDS].reverse(), undefined, 'int32');
    const y = model.predict([a, b]) as tf.Tensor;
    expect(maxAbsDiff(y, IO.add_pooling as number[])).toBeLessThan(1e-5);
    // the mask itself, on the model's graph: position t counts where either row has an id
    const add = model.layers.find((l) => l.getClassName() === 'Add') as tf.layers.Layer;
    const m1 = tf.notEqual(a, 0);
    const m2 = tf.notEqual(b, 0);
    const mask = add.computeMask([a, b], [m1, m2]) as tf.Tensor;
    const want = IDS.map((row, i) =>
      row.map((v, t) => Number(v !== 0 || IDS[IDS.length - 1 - i][t] !== 0)),
    );
    expect(mask.dtype).toBe('bool');
    expect(mask.arraySync()).toEqual(want);
    expect(add.computeMask([a, b], [m1, null as unknown as tf.Tensor])).toBeNull();
    tf.dispose([a, b, y, m1, m2, mask]);
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  it('Maximum: refused by name when a mask reaches it (Keras uses the masks in its values)', async () => {
    const model = await load('maximum_pooling');
    const a = tf.tensor2d(IDS, undefined, 'int32');
    const b = tf.tensor2d([...IDS].reverse(), undefined, 'int32');
    const before = tf.memory().numTensors;
    expect(() => model.predict([a, b])).toThrow(
      /Layer 'maximum(_\d+)?' \(Maximum\): a Keras mask reaches it, which Keras 3 uses in its values/,
    );
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([a, b]);
    model.dispose();
  });

  it('Minimum and Multiply: refused when the mask is on a later input only (call sees the first)', () => {
    // built in code: an unmasked input first, a masked embedding second
    const steps = IDS[0].length;
    const ids = tf.input({shape: [steps], dtype: 'int32'});
    const other = tf.input({shape: [steps, 4]});
    const vocab = 1 + Math.max(...IDS.flat());
    const embed = tf.layers.embedding({inputDim: vocab, outputDim: 4, maskZero: true});
    const e = embed.apply(ids) as tf.SymbolicTensor;
    const a = tf.tensor2d(IDS, undefined, 'int32');
    const o = tf.ones([IDS.length, steps, 4]);
    for (const name of ['Minimum', 'Multiply']) {
      const [Merge] = tf.serialization.SerializationMap.getMap().classNameMap[name];
      const merge = new Merge({}) as unknown as tf.layers.Layer;
      const model = tf.model({
        inputs: [ids, other],
        outputs: merge.apply([other, e]) as tf.SymbolicTensor,
      });
      const before = tf.memory().numTensors;
      expect(() => model.predict([a, o])).toThrow(
        new RegExp(`\\(${name}\\): a Keras mask reaches it, which Keras 3 uses in its values`),
      );
      expect(tf.memory().numTensors).toBe(before);
    }
    tf.dispose([a, o]);
  });

  it("Concatenate: Keras' compute_mask (broadcast, concatenate, any over the last axis)", () => {
    const Cls = tf.serialization.SerializationMap.getMap().classNameMap
      .Concatenate[0] as unknown as new (args: {axis: number}) => tf.layers.Layer;
    const x1 = tf.zeros([2, 3, 4]);
    const x2 = tf.zeros([2, 3, 2]);
    const m1 = tf.tensor2d(
      [
        [1, 1, 0],
        [1, 0, 0],
      ],
      undefined,
      'bool',
    );
    const m2 = tf.tensor2d(
      [
        [1, 0, 0],
        [1, 1, 1],
      ],
      undefined,
      'bool',
    );
    const before = tf.memory().numTensors;
    const last = new Cls({axis: -1});
    // on the feature axis: the OR of the masks (Keras' `any`); an unmasked input: all true
    const both = last.computeMask([x1, x2], [m1, m2]) as tf.Tensor;
    expect(both.arraySync()).toEqual([
      [1, 1, 0],
      [1, 1, 1],
    ]);
    const one = last.computeMask([x1, x2], [m1, null as unknown as tf.Tensor]) as tf.Tensor;
    expect(one.arraySync()).toEqual([
      [1, 1, 1],
      [1, 1, 1],
    ]);
    // on the steps axis: the masks side by side
    const steps = new Cls({axis: 1}).computeMask([x1, x1], [m1, m2]) as tf.Tensor;
    expect(steps.arraySync()).toEqual([
      [1, 1, 0, 1, 0, 0],
      [1, 0, 0, 1, 1, 1],
    ]);
    tf.dispose([both, one, steps]);
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([x1, x2, m1, m2]);
  });
});
