/**
 * TokenAndPositionEmbedding (harness cases: helpers/layer_harness.ts): plain-loop numerics, the Keras mask of
 * `maskZero`, the one-hot gradient (it replaces tfjs' gather gradient, which wasm lacks) against
 * a plain-loop scatter-add on every backend, and input validation.
 */
import * as tf from '@tensorflow/tfjs';

import {TokenAndPositionEmbedding} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';

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
      expect(() => l.apply(tf.zeros([2, 3], 'bool'))).toThrow(
        /expected int32 ids of shape \[batch, length\], received bool of shape \[2, 3\]/,
      );
      expect(() => l.apply(tf.zeros([1, 7], 'int32'))).toThrow(
        'the input has 7 positions but sequenceLength is 6',
      );
    });
  });

  it('float32 ids holding whole numbers are cast (a Keras Input declared float32); fractional or non-finite ones are refused', () => {
    const l = layer(true);
    const before = tf.memory().numTensors;
    tf.tidy(() => {
      const [tok, pos] = l.getWeights().map((w) => w.arraySync() as number[][]);
      const out = l.apply(tf.tensor2d(IDS, [2, 5], 'float32')) as tf.Tensor;
      // plain loop: row ids[b][t] of the token table plus row t of the position table
      const expected = IDS.map((row) => row.map((id, t) => tok[id].map((v, j) => v + pos[t][j])));
      expectClose(out, expected, 1e-6, 1e-6);
      expect(out.kerasMask?.arraySync()).toEqual(
        IDS.map((row) => row.map((id) => Number(id !== 0))),
      );
      expect(() => l.apply(tf.tensor2d([[1, 2.5, 3]], [1, 3], 'float32'))).toThrow(
        "Layer 'token_and_position_embedding_",
      );
      expect(() =>
        l.apply(
          tf.tensor2d(
            [
              [1, 2, 3],
              [4, 2.5, 0],
            ],
            [2, 3],
            'float32',
          ),
        ),
      ).toThrow(
        'expected int32 ids or float32 ids holding whole numbers, received float32 ids with 2.5 at [1, 1]',
      );
      expect(() => l.apply(tf.tensor2d([[1, NaN]], [1, 2], 'float32'))).toThrow(
        'with NaN at [0, 1]',
      );
      expect(() => l.apply(tf.tensor2d([[Infinity]], [1, 1], 'float32'))).toThrow(
        'with Infinity at [0, 0]',
      );
    });
    expect(tf.memory().numTensors).toBe(before);
  });

  it('a functional model with float32 ids (keras.io style) predicts like int32 ids', () => {
    tf.tidy(() => {
      const l = layer();
      const input = tf.input({shape: [5]}); // float32, as keras.Input(shape=(None,)) declares
      const model = tf.model({inputs: input, outputs: l.apply(input) as tf.SymbolicTensor});
      const floatOut = model.predict(tf.tensor2d(IDS, [2, 5], 'float32')) as tf.Tensor;
      const intOut = l.apply(tf.tensor2d(IDS, [2, 5], 'int32')) as tf.Tensor;
      expectClose(floatOut, intOut.arraySync() as number[][][], 0, 0);
    });
  });

  it('positions call option: position rows taken at [batch, length] or [length] positions, startIndex ignored', () => {
    const l = layer();
    const before = tf.memory().numTensors;
    tf.tidy(() => {
      const [tok, pos] = l.getWeights().map((w) => w.arraySync() as number[][]);
      const ids = tf.tensor2d(IDS, [2, 5], 'int32');
      const P = [
        [0, 1, 2, 3, 4],
        [0, 0, 0, 1, 5],
      ];
      const out = l.apply(ids, {positions: tf.tensor2d(P, [2, 5], 'int32'), startIndex: 1});
      const expected = IDS.map((row, b) =>
        row.map((id, t) => tok[id].map((v, j) => v + pos[P[b][t]][j])),
      );
      expectClose(out as tf.Tensor, expected, 1e-6, 1e-6);
      const flat = [5, 4, 3, 2, 1];
      const out1 = l.apply(ids, {positions: tf.tensor1d(flat, 'int32')});
      const expected1 = IDS.map((row) =>
        row.map((id, t) => tok[id].map((v, j) => v + pos[flat[t]][j])),
      );
      expectClose(out1 as tf.Tensor, expected1, 1e-6, 1e-6);
      expect(() => l.apply(ids, {positions: tf.tensor1d([0, 1, 2, 3, 6], 'int32')})).toThrow(
        'expected positions to be whole numbers 0 .. 5 (sequenceLength 6), received 6 at [4]',
      );
      expect(() => l.apply(ids, {positions: tf.zeros([3, 5], 'int32')})).toThrow(
        "positions of 3 rows do not match the input of shape [2, 5]: expected 1 row or 2 (the input's axis 0)",
      );
    });
    expect(tf.memory().numTensors).toBe(before);
  });
});
