import * as tf from '@tensorflow/tfjs';

import {EinsumDense} from '../../../src';
import {analyzeEinsumDense} from '../../../src/layers/core/einsum_dense_shapes';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';
import {naiveEinsum} from '../../helpers/naive_einsum';

// Keras einsum_dense_test.py: equation | bias_axes | input | output_shape -> kernel | bias | output
const KERAS_CASES: Array<
  [string, string, string | null, number[], number | number[], number[], number[] | null, number[]]
> = [
  ['_1d_end_weight', 'ab,b->a', null, [2, 32], [], [32], null, [2]],
  ['_2d_middle_weight', 'ab,bc->ac', null, [2, 32], 64, [32, 64], null, [2, 64]],
  ['_3d_bert', 'abc,cde->abde', null, [2, 1, 2], [1, 3, 4], [2, 3, 4], null, [2, 1, 3, 4]],
  ['_3d_3_bias', 'abc,cde->abde', 'e', [2, 1, 2], [1, 3, 4], [2, 3, 4], [4], [2, 1, 3, 4]],
  ['_3d_2_bias', 'abc,cde->abde', 'd', [2, 1, 2], [1, 3, 4], [2, 3, 4], [3, 1], [2, 1, 3, 4]],
  ['_3d_1_3_bias', 'abc,cde->abde', 'be', [2, 7, 2], [7, 3, 4], [2, 3, 4], [7, 1, 4], [2, 7, 3, 4]],
  ['_3d_bert_projection', 'BFNH,NHD->BFD', null, [2, 1, 2, 3], [1, 4], [2, 3, 4], null, [2, 1, 4]],
  ['_2d_bert', 'abc,cd->abd', null, [2, 1, 2], [1, 4], [2, 4], null, [2, 1, 4]],
  ['_embedding_1d', 'i,d->id', null, [2], [2], [2], null, [2, 2]],
  ['_xlnet_lm', 'ibd,nd->ibn', null, [2, 2, 1], [2, 2], [2, 1], null, [2, 2, 2]],
  ['_2d_precast', '...b,bc->...c', null, [2, 32], [64], [32, 64], null, [2, 64]],
  [
    '_2d_precast_elided_input_used_in_output',
    '...bc,bc->...b',
    null,
    [2, 32, 64],
    [32],
    [32, 64],
    null,
    [2, 32],
  ],
  [
    '_2d_precast_multiple_elided_dims',
    '...b,bc->...c',
    null,
    [2, 3, 32],
    [64],
    [32, 64],
    null,
    [2, 3, 64],
  ],
  ['_3d_precast', '...c,cde->...de', null, [2, 1, 2], [3, 4], [2, 3, 4], null, [2, 1, 3, 4]],
  ['_3d_precast_3_bias', '...c,cde->...de', 'e', [2, 1, 2], [3, 4], [2, 3, 4], [4], [2, 1, 3, 4]],
  [
    '_3d_precast_2_bias',
    '...c,cde->...de',
    'd',
    [2, 1, 2],
    [3, 4],
    [2, 3, 4],
    [3, 1],
    [2, 1, 3, 4],
  ],
  [
    '_3d_precast_2_3_bias',
    '...c,cde->...de',
    'de',
    [2, 1, 2],
    [3, 4],
    [2, 3, 4],
    [3, 4],
    [2, 1, 3, 4],
  ],
  ['_2d_postcast', 'bc...,cd->bd...', null, [2, 1, 2, 3], [4], [1, 4], null, [2, 4, 2, 3]],
  ['_3d_postcast', 'bc...,cde->bde...', null, [2, 1, 2], [3, 4], [1, 3, 4], null, [2, 3, 4, 2]],
  [
    '_3d_postcast_1_bias',
    'bc...,cde->bde...',
    'd',
    [2, 1, 2],
    [3, 4],
    [1, 3, 4],
    [3, 1, 1],
    [2, 3, 4, 2],
  ],
  [
    '_3d_postcast_2_bias',
    'bc...,cde->bde...',
    'e',
    [2, 1, 2],
    [3, 4],
    [1, 3, 4],
    [4, 1],
    [2, 3, 4, 2],
  ],
  [
    '_3d_postcast_1_2_bias',
    'bc...,cde->bde...',
    'de',
    [2, 1, 2],
    [3, 4],
    [1, 3, 4],
    [3, 4, 1],
    [2, 3, 4, 2],
  ],
];

describe("EinsumDense shape analysis (Keras' cases)", () => {
  for (const [name, eq, bias, input, out, kernel, biasShape, full] of KERAS_CASES) {
    it(name, () => {
      const os = typeof out === 'number' ? [out] : out;
      const r = analyzeEinsumDense(eq, bias, input, os);
      expect(r.kernelShape).toEqual(kernel);
      expect(r.biasShape).toEqual(biasShape);
      expect(r.outputShape).toEqual(full);
    });
  }
});

describeBackends('EinsumDense', () => {
  it('computes einsum(x, kernel) + bias like loops (atol 1e-5)', () => {
    tf.tidy(() => {
      const layer = new EinsumDense({
        equation: 'abc,cde->abde',
        outputShape: [null, 3, 4],
        biasAxes: 'e',
      });
      const x = randTensor([2, 5, 6], 1);
      layer.apply(x);
      layer.setWeights([randTensor([6, 3, 4], 2), randTensor([4], 3)]);
      const kernel = layer.kernel!.read();
      const sizes = {a: 2, b: 5, c: 6, d: 3, e: 4};
      const prod = naiveEinsum(
        [
          {labels: 'abc', data: x.dataSync()},
          {labels: 'cde', data: kernel.dataSync()},
        ],
        'abde',
        sizes,
      );
      const bias = layer.bias!.read().dataSync();
      const expected = Array.from(prod, (v, i) => v + bias[i % 4]);
      expectClose(layer.apply(x) as tf.Tensor, expected, 1e-5, 1e-5);
    });
  });

  it('names bad equations and shapes', () => {
    expect(() => new EinsumDense({equation: 'ab,bc->ac', outputShape: 0})).toThrow(
      /outputShape to be a positive integer/,
    );
    expect(
      () => new EinsumDense({equation: 'ab,bc->ac', outputShape: 4, activityRegularizer: 'l1l2'}),
    ).toThrow(/activityRegularizer/);
    expect(() => analyzeEinsumDense('ab,bc', null, [2, 3], [4])).toThrow(
      /invalid equation 'ab,bc': equations must be of the form/,
    );
    expect(() => analyzeEinsumDense('abc,cd->abd', null, [2, 3], [3, 4])).toThrow(
      /input has rank 2/,
    );
    expect(() => analyzeEinsumDense('ab,bc->ac', 'x', [2, 3], [4])).toThrow(
      /bias axis 'x' is not an output dimension/,
    );
    expect(() => analyzeEinsumDense('ab,bc->acd', null, [2, 3], [4, 5])).toThrow(
      /output dimension 'd' appears in neither/,
    );
    expect(() => analyzeEinsumDense('abc,cd->abd', null, [2, 3, 4], [5, 6])).toThrow(
      /input dimension 'b' is 3 but the requested output shape has 5/,
    );
    expect(() => analyzeEinsumDense('ab,bc->ac', null, [2, 3], [null])).toThrow(
      /size of weight dimension 'c' is unknown/,
    );
  });
});
