import * as tf from '@tensorflow/tfjs';

import {maskedSoftmax, sequenceMask} from '../../src';
import {describeBackends, expectNoLeak} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {softmaxRow} from '../helpers/reference_attention';
import seeds from '../fixtures/seed_inputs.json';

describeBackends('masking', () => {
  describe('maskedSoftmax', () => {
    it('reproduces the JAX notebook with 1-D lengths [2, 3] (printed values, atol 1e-6)', () => {
      tf.tidy(() => {
        const y = maskedSoftmax(tf.tensor(seeds.masked_softmax_x), tf.tensor1d([2, 3], 'int32'));
        // printed by ../shared/seeds/001 (JAX)
        const printed = [
          [
            [0.60708654, 0.39291343, 0, 0],
            [0.46680522, 0.5331948, 0, 0],
          ],
          [
            [0.3154995, 0.3071782, 0.37732235, 0],
            [0.4908877, 0.2676804, 0.24143189, 0],
          ],
        ];
        expectClose(y, printed, 1e-6, 0);
      });
    });

    it('reproduces the JAX notebook with 2-D lengths [[1, 3], [2, 4]] (printed values, atol 1e-6)', () => {
      tf.tidy(() => {
        const y = maskedSoftmax(
          tf.tensor(seeds.masked_softmax_x),
          tf.tensor2d(
            [
              [1, 3],
              [2, 4],
            ],
            [2, 2],
            'int32',
          ),
        );
        const printed = [
          [
            [1, 0, 0, 0],
            [0.3412919, 0.38983083, 0.2688773, 0],
          ],
          [
            [0.50668186, 0.4933181, 0, 0],
            [0.30692047, 0.16736333, 0.1509518, 0.3747644],
          ],
        ];
        expectClose(y, printed, 1e-6, 0);
      });
    });

    it('matches a per-row loop on 4-D scores with [batch] and [batch, 1] lengths', () => {
      tf.tidy(() => {
        const x = tf.randomNormal([2, 3, 2, 5], 0, 3, 'float32', 1);
        const rows = x.arraySync() as number[][][][];
        const lens = [4, 2];
        const expected = rows.map((b, bi) =>
          b.map((h) =>
            h.map((r) =>
              softmaxRow(
                r,
                r.map((_, s) => s < lens[bi]),
              ),
            ),
          ),
        );
        expectClose(maskedSoftmax(x, tf.tensor1d(lens, 'int32')), expected, 1e-6, 1e-6);
        expectClose(
          maskedSoftmax(x, tf.tensor2d([[4], [2]], [2, 1], 'int32')),
          expected,
          1e-6,
          1e-6,
        );
      });
    });

    it('gives uniform rows, never NaN, for length 0; plain softmax without lengths', () => {
      tf.tidy(() => {
        const x = tf.tensor3d([[[1, 50, -3]], [[2, 1, 0]]]);
        const y = maskedSoftmax(x, tf.tensor1d([0, 2], 'int32'));
        expect(tf.any(tf.isNaN(y)).dataSync()[0]).toBe(0);
        expectClose(tf.slice(y, [0, 0, 0], [1, 1, 3]), [1 / 3, 1 / 3, 1 / 3], 1e-6, 0);
        expectClose(maskedSoftmax(x), tf.softmax(x), 0, 0);
        expectClose(maskedSoftmax(x, null), tf.softmax(x), 0, 0);
      });
    });

    it('leaks nothing and names bad arguments', async () => {
      const x = tf.ones([2, 3, 4]);
      const l = tf.tensor1d([1, 2], 'int32');
      await expectNoLeak(() => maskedSoftmax(x, l).dispose());
      expect(() => maskedSoftmax(x, tf.tensor1d([1, 2, 3]))).toThrow(
        /expected validLens of shape \[2\] or \[2, 1\] .* or \[2, 3\] \(one per query\) .* received \[3\]/,
      );
      expect(() => maskedSoftmax(tf.ones([3]))).toThrow(/expected scores of rank >= 2/);
      expect(() => maskedSoftmax([1, 2] as unknown as tf.Tensor)).toThrow(
        /expected scores to be a tf.Tensor/,
      );
      tf.dispose([x, l]);
    });
  });

  describe('sequenceMask', () => {
    it('masks steps at or beyond each length, as d2l does', () => {
      tf.tidy(() => {
        const x = tf.tensor2d([
          [1, 2, 3],
          [4, 5, 6],
        ]);
        expectClose(sequenceMask(x, tf.tensor1d([1, 2], 'int32')), [
          [1, 0, 0],
          [4, 5, 0],
        ]);
        // d2l: sequence_mask(X, valid_len, value=-1) on [batch, steps, features] masks whole steps
        const x3 = tf.ones([2, 3, 2]);
        expectClose(sequenceMask(x3, tf.tensor1d([1, 3], 'int32'), -1), [
          [
            [1, 1],
            [-1, -1],
            [-1, -1],
          ],
          [
            [1, 1],
            [1, 1],
            [1, 1],
          ],
        ]);
        // 2-D lengths mask the last axis per row
        expectClose(sequenceMask(tf.ones([1, 2, 3]), tf.tensor2d([[0, 2]], [1, 2], 'int32')), [
          [
            [0, 0, 0],
            [1, 1, 0],
          ],
        ]);
      });
    });

    it('names bad arguments', () => {
      tf.tidy(() => {
        expect(() => sequenceMask(tf.ones([2, 3]), tf.ones([3]))).toThrow(
          /expected validLens of shape \[2\] .* received \[3\]/,
        );
        expect(() => sequenceMask(tf.ones([2, 3]), tf.ones([2, 3]))).toThrow(
          /expected validLens of rank 1 to 1/,
        );
      });
    });
  });
});
