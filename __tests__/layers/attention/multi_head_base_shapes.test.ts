/**
 * MultiHeadAttention and GroupQueryAttention refuse a key whose dimensions, but the last, differ
 * from the value's, wherever shapes meet the layer: computeOutputShape, build, a functional call
 * and an eager call, with Keras' message (Keras' `test_shape_mismatch_error` cases, whose keys
 * from shapes alone could pass for an attention mask). `computeOutputShape([query, value, null])`
 * is that of `[query, value]`, as Keras' `compute_output_shape(query, value, key=None)`.
 */
import * as tf from '@tensorflow/tfjs';

import {GroupQueryAttention, MultiHeadAttention} from '../../../src';
import type {Shape} from '../../../src/layers/engine/shapes';

const MUST_BE_EQUAL = /all dimensions of value and key, except the last one, must be equal/;

type Make = () => MultiHeadAttention | GroupQueryAttention;
const mha: Make = () => new MultiHeadAttention({numHeads: 4, keyDim: 2, valueDim: 2});
const gqa: Make = () =>
  new GroupQueryAttention({headDim: 2, numQueryHeads: 4, numKeyValueHeads: 2});

// Keras' cases: [query, value, key]
const CASES: Array<[string, Make, number[], number[], number[]]> = [
  ['MHA, key_value_dim_mismatch', mha, [2, 4, 8], [2, 2, 8], [2, 1, 7]],
  ['MHA, key_value_dim_mismatch_high_dim', mha, [2, 4, 2, 3, 8], [2, 1, 1, 5, 8], [2, 1, 15, 5, 2]],
  ['GQA, key_value_dim_mismatch', gqa, [2, 4, 8], [2, 2, 8], [2, 1, 7]],
  ['GQA, a key longer than the value', gqa, [2, 4, 8], [2, 2, 8], [2, 3, 8]],
];

const unbatched = (s: number[]): Shape => [null, ...s.slice(1)];

describe('a key that does not fit the value', () => {
  for (const [name, make, q, v, k] of CASES) {
    it(`is refused with Keras' message: ${name}`, () => {
      const shapes = [q, v, k].map(unbatched);
      expect(() => make().computeOutputShape(shapes)).toThrow(MUST_BE_EQUAL);
      expect(() => make().build(shapes)).toThrow(MUST_BE_EQUAL);
      const inputs = [q, v, k].map((s) => tf.input({shape: s.slice(1)}));
      expect(() => make().apply(inputs)).toThrow(MUST_BE_EQUAL);
      tf.tidy(() => {
        const eager = [q, v, k].map((s) => tf.ones(s));
        expect(() => make().apply(eager)).toThrow(MUST_BE_EQUAL);
        expect(() => make().apply(eager)).not.toThrow(/was built for/);
      });
    });
  }

  it('is a key, not a mask, in calls that know its dtype, even with the shape of a mask', () => {
    // key [2, 4, 2] could be a mask [batch, T = 4, S = 2] by shape; it is float32, so a key
    for (const make of [mha, gqa]) {
      const inputs = [
        [4, 8],
        [2, 8],
        [4, 2],
      ].map((s) => tf.input({shape: s}));
      expect(() => make().apply(inputs)).toThrow(MUST_BE_EQUAL);
      tf.tidy(() => {
        const eager = [
          [2, 4, 8],
          [2, 2, 8],
          [2, 4, 2],
        ].map((s) => tf.ones(s));
        expect(() => make().apply(eager)).toThrow(MUST_BE_EQUAL);
      });
    }
  });

  it('still takes a shape-only [batch, T, S] third input for a mask', () => {
    const layer = mha();
    expect(
      layer.computeOutputShape([
        [null, 4, 8],
        [null, 2, 8],
        [null, 4, 2],
      ]),
    ).toEqual([null, 4, 8]);
  });
});

describe('computeOutputShape([query, value, null])', () => {
  for (const [name, make] of [
    ['MHA', mha],
    ['GQA', gqa],
  ] as Array<[string, Make]>) {
    it(`is that of [query, value]: ${name}`, () => {
      const q: Shape = [null, 4, 8];
      // GroupQueryAttention (as Keras') takes a value as wide as the query; MultiHeadAttention any
      const v: Shape = [null, 2, name === 'GQA' ? 8 : 6];
      const want = make().computeOutputShape([q, v]);
      expect(want).toEqual([null, 4, 8]);
      expect(make().computeOutputShape([q, v, null] as unknown as Shape[])).toEqual(want);
      const scores = new MultiHeadAttention({numHeads: 4, keyDim: 2, returnAttentionScores: true});
      expect(scores.computeOutputShape([q, v, null] as unknown as Shape[])).toEqual([
        [null, 4, 8],
        [null, 4, 4, 2],
      ]);
    });
  }

  it('refuses a missing shape before a given one, naming the input', () => {
    expect(() =>
      mha().computeOutputShape([[null, 4, 8], null, [null, 2, 6]] as unknown as Shape[]),
    ).toThrow(/expected a shape \(an array\) for input 1, received null/);
  });
});
