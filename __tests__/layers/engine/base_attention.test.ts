/**
 * Runtime inputs that used to give silent wrong answers or JavaScript errors: non-finite values
 * at masked key positions, invalid lengths, empty queries and batches, shape and dtype errors
 * after build, unseeded initializers under a seed, and dropout that changed with query blocks.
 */
import * as tf from '@tensorflow/tfjs';

import {AdditiveAttention, Attention, DotProductAttention, MultiHeadAttention} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';

const layers = () => [
  new MultiHeadAttention({numHeads: 2, keyDim: 3}),
  new Attention(),
  new DotProductAttention(),
  new AdditiveAttention(),
];

describeBackends('runtime inputs', () => {
  for (const bad of [Infinity, -Infinity, NaN]) {
    it(`a ${bad} in a key position masked by validLens does not reach the output`, () => {
      for (const layer of layers()) {
        tf.tidy(() => {
          const q = randTensor([2, 3, 4], 1);
          const v = randTensor([2, 5, 4], 2);
          const k = randTensor([2, 5, 4], 3);
          const lens = tf.tensor1d([3, 5], 'int32');
          // key 4 of sequence 0 (beyond its length 3) holds a non-finite value
          const kb = k.arraySync() as number[][][];
          kb[0][4][1] = bad;
          const kBad = tf.tensor(kb);
          const clean = layer.apply([q, v, k], {
            validLens: lens,
            returnAttentionScores: true,
          }) as tf.Tensor[];
          const dirty = layer.apply([q, v, kBad], {
            validLens: lens,
            returnAttentionScores: true,
          }) as tf.Tensor[];
          // the masked key never counts: identical to the run with a finite key there
          expectClose(dirty[0], clean[0], 1e-6, 1e-6);
          expectClose(dirty[1], clean[1], 1e-6, 1e-6);
        });
      }
    });
  }

  it('refuses negative, NaN and fractional lengths, naming the value', () => {
    for (const layer of layers()) {
      tf.tidy(() => {
        const x = randTensor([2, 3, 4], 4);
        for (const [lens, shown] of [
          [[-1, 2], '-1'],
          [[NaN, 2], 'NaN'],
          [[1.5, 2], '1.5'],
        ] as Array<[number[], string]>) {
          expect(() => layer.apply([x, x], {validLens: tf.tensor1d(lens)})).toThrow(
            `expected validLens to hold whole numbers >= 0, received ${shown} at flat index 0`,
          );
        }
      });
    }
  });

  it('empty batches, queries and keys give empty (or zero) outputs of the right shapes', () => {
    for (const layer of layers()) {
      tf.tidy(() => {
        for (const [q, v] of [
          [
            [0, 3, 4],
            [0, 5, 4],
          ],
          [
            [2, 0, 4],
            [2, 5, 4],
          ],
          [
            [2, 3, 4],
            [2, 0, 4],
          ],
        ]) {
          const [out, scores] = layer.apply([tf.ones(q), tf.ones(v)], {
            returnAttentionScores: true,
          }) as tf.Tensor[];
          expect(out.shape).toEqual(q);
          expect(scores.shape[0]).toBe(q[0]);
          expect(scores.shape.slice(-2)).toEqual([q[1], v[1]]);
          // no key: nothing to attend to, the output is 0 (an empty weighted sum)
          expect(Array.from(out.dataSync()).every((x) => x === 0)).toBe(true);
        }
      });
    }
  });

  it('after build, wrong widths and batch sizes are errors naming the layer and both shapes', () => {
    tf.tidy(() => {
      const mha = new MultiHeadAttention({numHeads: 2, keyDim: 3, name: 'mha_w'});
      mha.apply([tf.ones([2, 3, 4]), tf.ones([2, 5, 4])]);
      expect(() => mha.apply([tf.ones([2, 3, 5]), tf.ones([2, 5, 4])])).toThrow(
        "Layer 'mha_w' was built for a query of shape [2, 3, 4], received a query of shape [2, 3, 5]",
      );
      expect(() => mha.apply([tf.ones([2, 3, 4]), tf.ones([3, 5, 4])])).toThrow(
        "Layer 'mha_w': the value has batch size 3 but the query 2; received query [2, 3, 4] and value [3, 5, 4]",
      );
      const add = new AdditiveAttention({numHiddens: 2, name: 'add_w'});
      const key = tf.ones([2, 5, 6]);
      add.apply([tf.ones([2, 3, 4]), tf.ones([2, 5, 6]), key]);
      // the value's width is free in the d2l form; query and key are fixed by their kernels
      const wider = add.apply([tf.ones([2, 3, 4]), tf.ones([2, 5, 7]), key]) as tf.Tensor;
      expect(wider.shape).toEqual([2, 3, 7]);
      expect(() => add.apply([tf.ones([2, 3, 3]), tf.ones([2, 5, 6]), key])).toThrow(
        "Layer 'add_w' was built for a query of shape [2, 3, 4], received a query of shape [2, 3, 3]",
      );
    });
  });

  it('one dtype rule: a non-float query is an error on every layer', () => {
    for (const layer of layers()) {
      tf.tidy(() => {
        expect(() => layer.apply(tf.ones([2, 3, 4], 'int32'))).toThrow(
          /expected a float32 query, received int32 of shape \[2, 3, 4\]; cast it/,
        );
      });
    }
  });

  it('a seed seeds every default initializer: same seed, same weights; each weight its own stream', () => {
    const build = (make: () => tf.layers.Layer) => {
      const layer = make();
      tf.dispose(layer.apply([tf.ones([1, 2, 4]), tf.ones([1, 3, 4])]) as tf.Tensor);
      const w = layer.getWeights().map((t) => Array.from(t.dataSync()));
      layer.dispose();
      return w;
    };
    for (const make of [
      (seed: number) => () => new MultiHeadAttention({numHeads: 2, keyDim: 4, seed}),
      (seed: number) => () => new AdditiveAttention({numHiddens: 4, seed}),
    ]) {
      const a = build(make(5));
      expect(build(make(5))).toEqual(a);
      expect(build(make(6))).not.toEqual(a);
      // query and key kernels (same shape) are not copies of each other
      expect(a[0]).not.toEqual(a[2]);
    }
  });

  it('dropout drops the same weights with and without query blocks (same seed)', () => {
    tf.tidy(() => {
      const x = randTensor([2, 6, 4], 9);
      const make = (chunkSize: number) => {
        const l = new MultiHeadAttention({
          numHeads: 2,
          keyDim: 2,
          dropout: 0.5,
          seed: 3,
          chunkSize,
        });
        l.apply(x);
        return l;
      };
      const blocked = make(2);
      const whole = make(0);
      whole.setWeights(blocked.getWeights());
      const y1 = blocked.apply(x, {training: true}) as tf.Tensor;
      const y2 = whole.apply(x, {training: true}) as tf.Tensor;
      expectClose(y1, y2, 1e-6, 1e-6);
      // and dropout did act: the output differs from inference
      const inference = whole.apply(x) as tf.Tensor;
      expect(tf.max(tf.abs(tf.sub(y2, inference))).dataSync()[0]).toBeGreaterThan(1e-3);
    });
  });
});
