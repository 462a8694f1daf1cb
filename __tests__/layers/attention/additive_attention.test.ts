import * as tf from '@tensorflow/tfjs';

import {AdditiveAttention} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';
import {
  lensAllowed,
  M2,
  M3,
  refAdditiveAttention,
  softmaxRow,
} from '../../helpers/reference_attention';
import seeds from '../../fixtures/seed_inputs.json';

describeBackends('AdditiveAttention', () => {
  it('reproduces the JAX notebook: [[2, 3, 4, 5]] and [[10, 11, 12, 13]]', () => {
    tf.tidy(() => {
      const keys = tf.ones([2, 10, 2]);
      const values = tf.tile(tf.reshape(tf.range(0, 40, 1, 'float32'), [1, 10, 4]), [2, 1, 1]);
      const att = new AdditiveAttention({numHiddens: 8, dropout: 0.1});
      const out = att.apply([tf.tensor(seeds.additive_queries), values, keys], {
        validLens: tf.tensor1d([2, 6], 'int32'),
      }) as tf.Tensor;
      expectClose(out, [[[2, 3, 4, 5]], [[10, 11, 12, 13]]], 1e-5, 1e-6);
    });
  });

  it("reproduces Keras' correctness and mask cases (use_scale=False, atol 1e-3)", () => {
    tf.tidy(() => {
      const q = tf.tensor([
        [
          [1, 0],
          [0, 1],
        ],
      ]);
      const k = tf.tensor([
        [
          [0, 1],
          [1, 0],
        ],
      ]);
      const v = tf.tensor([
        [
          [1, 2],
          [3, 4],
        ],
      ]);
      const [o, s] = new AdditiveAttention({useScale: false}).apply([q, v, k], {
        returnAttentionScores: true,
      }) as tf.Tensor[];
      expectClose(
        o,
        [
          [
            [1.727, 2.727],
            [2.272, 3.272],
          ],
        ],
        1e-3,
        0,
      );
      expectClose(
        s,
        [
          [
            [0.636, 0.363],
            [0.363, 0.636],
          ],
        ],
        1e-3,
        0,
      );
      const m = tf.tensor2d([[1, 0]], [1, 2], 'bool');
      const [o2, s2] = new AdditiveAttention({useScale: false}).apply(
        [
          q,
          tf.tensor([
            [
              [1, 1],
              [1, 1],
            ],
          ]),
        ],
        {
          mask: [m, m],
          returnAttentionScores: true,
        },
      ) as tf.Tensor[];
      expectClose(
        o2,
        [
          [
            [1, 1],
            [0, 0],
          ],
        ],
        1e-6,
        0,
      );
      expectClose(
        s2,
        [
          [
            [1, 0],
            [1, 0],
          ],
        ],
        1e-6,
        0,
      );
    });
  });

  it("reproduces tf-keras' hand-computed cases with a set scale (atol 1e-6)", () => {
    tf.tidy(() => {
      const layer = new AdditiveAttention();
      const v = tf.tensor3d([[[1.6], [0.7], [-0.8]]]);
      layer.apply([tf.tensor3d([[[1.1]]]), v]);
      layer.setWeights([tf.tensor1d([0.5])]);
      const vMask = tf.tensor2d([[1, 1, 0]], [1, 3], 'bool');
      expectClose(
        layer.apply([tf.tensor3d([[[1.1]]]), v], {mask: [null, vMask]}) as tf.Tensor,
        [[[1.15497245968]]],
        1e-6,
        0,
      );

      const multi = new AdditiveAttention();
      const q = tf.tensor3d([
        [
          [1, 1.1, 1.2, 1.3],
          [2, 2.1, 2.2, 2.3],
        ],
      ]);
      const k = tf.tensor3d([
        [
          [1.5, 1.6, 1.7, 1.8],
          [2.5, 2.6, 2.7, 2.8],
          [3.5, 3.6, 3.7, 3.8],
        ],
      ]);
      multi.apply([q, k]);
      multi.setWeights([tf.tensor1d([0.5, 0.6, 0.7, 0.8])]);
      const [, s] = multi.apply([q, k], {returnAttentionScores: true}) as tf.Tensor[];
      const raw = [
        [2.5804453, 2.5973432, 2.5996402],
        [2.5973432, 2.5996402, 2.5999513],
      ];
      expectClose(
        s,
        [
          raw.map((r) =>
            softmaxRow(
              r,
              r.map(() => true),
            ),
          ),
        ],
        1e-6,
        1e-6,
      );
    });
  });

  it('matches a plain loop in the d2l form with 2-D lengths (atol 1e-5)', () => {
    tf.tidy(() => {
      const layer = new AdditiveAttention({numHiddens: 5});
      const q = randTensor([2, 3, 4], 11);
      const v = randTensor([2, 4, 2], 12);
      const k = randTensor([2, 4, 3], 13);
      const lens = [
        [4, 1, 2],
        [0, 3, 4],
      ];
      const out = layer.apply([q, v, k], {
        validLens: tf.tensor2d(lens, [2, 3], 'int32'),
      }) as tf.Tensor;
      const ref = refAdditiveAttention(
        q.arraySync() as M3,
        k.arraySync() as M3,
        v.arraySync() as M3,
        layer.queryKernel!.read().arraySync() as M2,
        layer.keyKernel!.read().arraySync() as M2,
        layer.scale!.read().arraySync() as number[],
        lensAllowed(lens),
      );
      expectClose(out, ref.out, 1e-5, 1e-5);
    });
  });

  it('names bad arguments', () => {
    expect(() => new AdditiveAttention({numHiddens: 0})).toThrow(
      /numHiddens to be a positive integer, received 0/,
    );
    tf.tidy(() => {
      expect(() => new AdditiveAttention().apply([tf.ones([1, 2, 3]), tf.ones([1, 4, 2])])).toThrow(
        /query and key must have the same last dimension/,
      );
    });
  });

  it("the Keras form must be called on a list, as Keras' _validate_inputs raises; the d2l form takes one tensor", () => {
    const before = tf.memory().numTensors;
    const x = tf.ones([1, 2, 3]);
    expect(() => new AdditiveAttention({name: 'bahdanau'}).apply(x)).toThrow(
      "Layer 'bahdanau' (AdditiveAttention): AdditiveAttention layer must be called on a list " +
        'of inputs, namely [query, value] or [query, value, key]; received a single tensor of ' +
        'shape [1, 2, 3] (for self-attention pass [x, x])',
    );
    expect(tf.memory().numTensors).toBe(before + 1);
    const layers = [new AdditiveAttention(), new AdditiveAttention({numHiddens: 4})];
    const outs = [layers[0].apply([x, x]), layers[1].apply(x)] as tf.Tensor[];
    expect(outs.map((o) => o.shape)).toEqual([
      [1, 2, 3],
      [1, 2, 3],
    ]);
    tf.dispose([x, ...outs]);
    layers.forEach((l) => l.dispose());
    expect(tf.memory().numTensors).toBe(before);
  });
});

describeBackends('AdditiveAttention with zero keys', (backend) => {
  it(`gives zeros, the weighted sum over no keys (not stale ${backend} memory)`, () => {
    const q = randTensor([1, 3, 4], 31);
    const v = tf.zeros([1, 0, 4]);
    const layer = new AdditiveAttention();
    tf.dispose(layer.apply([q, v]) as tf.Tensor); // builds the layer's weights
    const before = tf.memory().numTensors;
    // Σ over s < S = 0 of weight · value, per query and feature
    const want = Array.from({length: 3}, () => Array.from({length: 4}, () => 0));
    for (let round = 0; round < 3; round++) {
      // memory the output may reuse, left holding other values
      tf.dispose([tf.fill([12], 7 + round), tf.fill([1, 3, 4], -3)]);
      const [out, scores] = layer.apply([q, v], {returnAttentionScores: true}) as tf.Tensor[];
      expect(out.shape).toEqual([1, 3, 4]);
      expect(scores.shape).toEqual([1, 3, 0]);
      expect(out.arraySync()).toEqual([want]);
      tf.dispose([out, scores]);
    }
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([q, v]);
    layer.dispose();
  });

  it('mask must be a list [queryMask, valueMask] (or with keyMask), as Keras raises', () => {
    const att = new AdditiveAttention({name: 'bahdanau'});
    tf.tidy(() => void att.apply([tf.ones([1, 1, 1]), tf.ones([1, 3, 1])])); // builds `scale`
    const before = tf.memory().numTensors;
    tf.tidy(() => {
      const q = tf.tensor3d([[[1.1]]]);
      const v = tf.tensor3d([[[1.6], [0.7], [-0.8]]]);
      const vMask = tf.tensor2d([[1, 1, 0]], [1, 3], 'bool');
      expect(() => att.apply([q, v], {mask: vMask})).toThrow(
        "Layer 'bahdanau' (AdditiveAttention): mask must be a list, namely [queryMask, " +
          'valueMask] (or [queryMask, valueMask, keyMask]); received a bool tensor of shape [1, 3]',
      );
      expect(() => att.apply([q, v], {mask: [vMask]})).toThrow(
        "Layer 'bahdanau' (AdditiveAttention): expected a mask list of length 2 or 3, namely " +
          '[queryMask, valueMask] or [queryMask, valueMask, keyMask]; received a list of length 1',
      );
      expect(() => att.apply([q, v], {mask: []})).toThrow('received a list of length 0');
      // [null, vMask]: keys 0 and 1 only; score = scale * tanh(q + k) (one feature)
      const out = att.apply([q, v], {mask: [null, vMask]}) as tf.Tensor;
      const scale = att.getWeights()[0].dataSync()[0];
      const w = softmaxRow(
        [1.6, 0.7, -0.8].map((k) => scale * Math.tanh(1.1 + k)),
        [true, true, false],
      );
      expectClose(out, [[[w[0] * 1.6 + w[1] * 0.7]]], 1e-6, 1e-6);
    });
    expect(tf.memory().numTensors).toBe(before);
  });
});
