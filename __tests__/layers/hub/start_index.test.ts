/**
 * The `startIndex` call option of the position layers (keras-hub's `start_index`), checked with
 * plain loops over positions: position i of a call with `startIndex` s equals position s + i of
 * the call over the whole sequence, for every chunk of every split; non-numbers and symbolic
 * calls are refused.
 */
import * as tf from '@tensorflow/tfjs';

import {
  PositionEmbedding,
  RotaryEmbedding,
  SinePositionEncoding,
  TokenAndPositionEmbedding,
} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';

const L = 7;

interface Case {
  name: string;
  make: () => tf.layers.Layer;
  input: () => tf.Tensor; // [batch, L, ...]
}

const CASES: Case[] = [
  {
    name: 'PositionEmbedding',
    make: () => new PositionEmbedding({sequenceLength: L + 1}),
    input: () => randTensor([2, L, 4], 1),
  },
  {
    name: 'SinePositionEncoding',
    make: () => new SinePositionEncoding({maxWavelength: 30}),
    input: () => randTensor([2, L, 6], 2),
  },
  {
    name: 'RotaryEmbedding [batch, T, heads, headDim]',
    make: () => new RotaryEmbedding({maxWavelength: 50, scalingFactor: 2}),
    input: () => randTensor([2, L, 3, 4], 3),
  },
  {
    name: 'RotaryEmbedding [batch, T, features]',
    make: () => new RotaryEmbedding(),
    input: () => randTensor([2, L, 6], 4),
  },
  {
    name: 'TokenAndPositionEmbedding',
    make: () =>
      new TokenAndPositionEmbedding({vocabularySize: 9, sequenceLength: L, embeddingDim: 5}),
    input: () =>
      tf.tensor2d(
        [
          [1, 4, 8, 2, 0, 3, 7],
          [6, 6, 5, 1, 2, 8, 0],
        ],
        [2, L],
        'int32',
      ),
  },
];

/** `x[:, start : start + length]`. */
function positions(x: tf.Tensor, start: number, length: number): tf.Tensor {
  return tf.slice(x, [0, start], [x.shape[0], length]);
}

describeBackends('startIndex', () => {
  for (const c of CASES) {
    it(`${c.name}: position i with startIndex s = position s + i of the whole call`, () => {
      tf.tidy(() => {
        const layer = c.make();
        const x = c.input();
        const full = layer.apply(x) as tf.Tensor;
        // every split into a prefix, then chunks of 1 and 2
        for (let s = 0; s < L; s++) {
          for (const n of [1, 2]) {
            if (s + n > L) continue;
            const y = layer.apply(positions(x, s, n), {startIndex: s}) as tf.Tensor;
            expectClose(y, positions(full, s, n), 1e-6, 1e-6);
          }
        }
        // one position at a time, concatenated, is the whole call
        const steps = Array.from(
          {length: L},
          (_, s) => layer.apply(positions(x, s, 1), {startIndex: s}) as tf.Tensor,
        );
        expectClose(tf.concat(steps, 1), full, 1e-6, 1e-6);
      });
    });
  }

  it('refuses a tensor, a negative or fractional start, and positions past the table', () => {
    tf.tidy(() => {
      const x = randTensor([1, 2, 4], 5);
      const pe = new PositionEmbedding({sequenceLength: 4});
      expect(() => pe.apply(x, {startIndex: tf.scalar(1, 'int32')})).toThrow(
        /expected startIndex to be a whole number >= 0, received a tensor of shape \[\] \(pass a number\)/,
      );
      expect(() => new SinePositionEncoding().apply(x, {startIndex: -1})).toThrow(
        'expected startIndex to be a whole number >= 0, received -1',
      );
      expect(() => new RotaryEmbedding().apply(x, {startIndex: 1.5})).toThrow(
        'expected startIndex to be a whole number >= 0, received 1.5',
      );
      expect(() => pe.apply(x, {startIndex: 3})).toThrow(
        'positions 3 to 4 exceed sequenceLength 4',
      );
      const tpe = new TokenAndPositionEmbedding({
        vocabularySize: 5,
        sequenceLength: 3,
        embeddingDim: 2,
      });
      expect(() => tpe.apply(tf.tensor2d([[1, 2]], [1, 2], 'int32'), {startIndex: 2})).toThrow(
        'positions 2 to 3 exceed sequenceLength 3',
      );
    });
  });

  it('refuses startIndex in a functional model (tfjs replays no call options)', () => {
    const x = tf.input({shape: [4, 6]});
    const ids = tf.input({shape: [4], dtype: 'int32'});
    for (const [layer, input] of [
      [new PositionEmbedding({sequenceLength: 8}), x],
      [new SinePositionEncoding(), x],
      [new RotaryEmbedding(), x],
      [new TokenAndPositionEmbedding({vocabularySize: 5, sequenceLength: 8, embeddingDim: 2}), ids],
    ] as const) {
      expect(() => layer.apply(input, {startIndex: 2})).toThrow(
        /startIndex works in eager calls \(cached decoding\), not in a functional model/,
      );
    }
  });
});
