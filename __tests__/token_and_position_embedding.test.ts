/**
 * TokenAndPositionEmbedding (harness cases: helpers/layer_harness.ts): plain-loop numerics, the Keras mask of
 * `maskZero`, the one-hot gradient (it replaces tfjs' gather gradient, which wasm lacks) against
 * a plain-loop scatter-add on every backend, and input validation.
 */
import * as tf from '@tensorflow/tfjs';

import {TokenAndPositionEmbedding} from '../src';
import {describeBackends} from './helpers/backends';
import {expectClose} from './helpers/close';
import {randTensor} from './helpers/data';

const IDS = [
  [3, 1, 4, 1, 0],
  [5, 5, 2, 0, 0],
]; // repeated ids (1, 5) and padding (0)

function layer(maskZero = false): TokenAndPositionEmbedding {
  const l = new TokenAndPositionEmbedding({
    vocabularySize: 7,
    sequenceLength: 6,
    embeddingDim: 3,
    maskZero,
  });
  l.apply(tf.tensor2d(IDS, [2, 5], 'int32'));
  l.setWeights(l.getWeights().map((w, i) => randTensor(w.shape, 60 + i)));
  return l;
}

describeBackends('TokenAndPositionEmbedding', () => {
  it('= plain loops: out[b][t] = tokens[ids[b][t]] + positions[t]', () => {
    tf.tidy(() => {
      const l = layer();
      const [tok, pos] = l.getWeights().map((w) => w.arraySync() as number[][]);
      const expected = IDS.map((row) => row.map((id, t) => tok[id].map((v, j) => v + pos[t][j])));
      expectClose(l.apply(tf.tensor2d(IDS, [2, 5], 'int32')) as tf.Tensor, expected, 1e-6, 1e-6);
    });
  });

  it('maskZero: the output carries the Keras mask ids != 0; without it, none', () => {
    tf.tidy(() => {
      const ids = tf.tensor2d(IDS, [2, 5], 'int32');
      const y = layer(true).apply(ids) as tf.Tensor;
      expect(y.kerasMask).toBeDefined();
      const expected = IDS.map((row) => row.map((id) => (id !== 0 ? 1 : 0))); // bool reads as 1 / 0
      expect((y.kerasMask as tf.Tensor).dtype).toBe('bool');
      expect((y.kerasMask as tf.Tensor).arraySync()).toEqual(expected);
      expect((layer(false).apply(ids) as tf.Tensor).kerasMask ?? null).toBeNull();
    });
  });

  it('gradients: scatter-add of dy into the token table (repeated ids add up), batch sum for positions', () => {
    tf.tidy(() => {
      const l = layer();
      const ids = tf.tensor2d(IDS, [2, 5], 'int32');
      const dy = randTensor([2, 5, 3], 9);
      const vars = l.trainableWeights.map((w) => w.read() as tf.Variable);
      const {grads} = tf.variableGrads(
        () => tf.sum(tf.mul(l.apply(ids) as tf.Tensor, dy)) as tf.Scalar,
        vars,
      );
      const D = dy.arraySync() as number[][][];
      const tokGrad = Array.from({length: 7}, () => [0, 0, 0]);
      const posGrad = Array.from({length: 6}, () => [0, 0, 0]);
      IDS.forEach((row, b) =>
        row.forEach((id, t) =>
          D[b][t].forEach((g, j) => {
            tokGrad[id][j] += g;
            posGrad[t][j] += g;
          }),
        ),
      );
      expectClose(grads[vars[0].name], tokGrad, 1e-6, 1e-6);
      expectClose(grads[vars[1].name], posGrad, 1e-6, 1e-6);
    });
  });

  it('refuses ids that are not int32 [batch, length], or longer than sequenceLength', () => {
    tf.tidy(() => {
      const l = layer();
      expect(() => l.apply(tf.zeros([1, 4, 4], 'int32'))).toThrow(
        /expected int32 ids of shape \[batch, length\], received int32 of shape \[1, 4, 4\]/,
      );
      expect(() => l.apply(tf.zeros([2, 3]))).toThrow(
        /expected int32 ids of shape \[batch, length\], received float32 of shape \[2, 3\]/,
      );
      expect(() => l.apply(tf.zeros([1, 7], 'int32'))).toThrow(
        'the input has 7 positions but sequenceLength is 6',
      );
    });
  });
});
