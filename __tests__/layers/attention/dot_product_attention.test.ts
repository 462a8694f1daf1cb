import * as tf from '@tensorflow/tfjs';

import {Attention, DotProductAttention} from '../../../src';
import {OWN_KERNELS, SIMD} from '../../../src/kernels/flags';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {withFlags} from '../../helpers/kernels';
import {randTensor} from '../../helpers/data';
import {lensAllowed, M3, refDotAttention, softmaxRow} from '../../helpers/reference_attention';
import seeds from '../../fixtures/seed_inputs.json';

const Q = [
  [
    [1, 0],
    [0, 1],
  ],
];
const K = [
  [
    [0, 1],
    [1, 0],
  ],
];
const V = [
  [
    [1, 2],
    [3, 4],
  ],
];

describeBackends('Attention (Keras Luong)', () => {
  // Keras 3 attention_test.py test_attention_correctness (atol 1e-3 as in Keras)
  it("reproduces Keras' dot and concat correctness cases", () => {
    tf.tidy(() => {
      const [o1, s1] = new Attention({scoreMode: 'dot'}).apply(
        [tf.tensor(Q), tf.tensor(V), tf.tensor(K)],
        {
          returnAttentionScores: true,
        },
      ) as tf.Tensor[];
      expectClose(
        o1,
        [
          [
            [2.462, 3.462],
            [1.538, 2.538],
          ],
        ],
        1e-3,
        0,
      );
      expectClose(
        s1,
        [
          [
            [0.269, 0.731],
            [0.731, 0.269],
          ],
        ],
        1e-3,
        0,
      );
      const [o2, s2] = new Attention({scoreMode: 'concat'}).apply(
        [tf.tensor(Q), tf.tensor(V), tf.tensor(K)],
        {
          returnAttentionScores: true,
        },
      ) as tf.Tensor[];
      expectClose(
        o2,
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
        s2,
        [
          [
            [0.636, 0.363],
            [0.363, 0.636],
          ],
        ],
        1e-3,
        0,
      );
    });
  });

  it("reproduces Keras' masked case (query and value masks)", () => {
    tf.tidy(() => {
      const qMask = tf.tensor2d([[1, 0]], [1, 2], 'bool');
      const vMask = tf.tensor2d([[1, 0]], [1, 2], 'bool');
      const [o, s] = new Attention().apply(
        [
          tf.tensor(Q),
          tf.tensor([
            [
              [1, 1],
              [1, 1],
            ],
          ]),
        ],
        {
          mask: [qMask, vMask],
          returnAttentionScores: true,
        },
      ) as tf.Tensor[];
      expectClose(
        o,
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
        s,
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

  // tf-keras attention_test.py, hand-computed values (atol 1e-6)
  it("reproduces tf-keras' hand-computed cases", () => {
    tf.tidy(() => {
      const causal = new Attention({useCausalMask: true});
      const qv = tf.tensor3d([[[0.5], [0.8], [-0.3]]]);
      const [o, s] = causal.apply([qv, qv], {returnAttentionScores: true}) as tf.Tensor[];
      expectClose(
        s,
        [
          [
            [1, 0, 0],
            [0.44028635, 0.55971365, 0],
            [0.31395397, 0.28693232, 0.39911371],
          ],
        ],
        1e-6,
        0,
      );
      expectClose(o, [[[0.5], [0.66791409], [0.26678873]]], 1e-6, 0);

      const v = tf.tensor3d([[[1.6], [0.7], [-0.8]]]);
      const vMask = tf.tensor2d([[1, 1, 0]], [1, 3], 'bool');
      expectClose(
        new Attention().apply([tf.tensor3d([[[1.1]]]), v], {mask: [null, vMask]}) as tf.Tensor,
        [[[1.3561791301]]],
        1e-6,
        0,
      );

      const q2 = tf.tensor3d([[[1.1], [-0.5]]]);
      const qMask = tf.tensor2d([[1, 0]], [1, 2], 'bool');
      const [o2, s2] = new Attention().apply([q2, v], {
        mask: [qMask, vMask],
        returnAttentionScores: true,
      }) as tf.Tensor[];
      expectClose(o2, [[[1.3561791301], [0]]], 1e-6, 0);
      expectClose(
        s2,
        [
          [
            [0.72908792, 0.27091208, 0],
            [0.38936077, 0.61063923, 0],
          ],
        ],
        1e-6,
        0,
      );

      // raw dot and concat scores, checked through the softmax of Keras' numbers
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
      const dotScores = [
        [7.64, 12.24, 16.84],
        [14.24, 22.84, 31.44],
      ];
      const concatScores = [
        [3.9675343, 3.9955878, 3.9994025],
        [3.9955878, 3.9994025, 3.9999191],
      ];
      const sm = (rows: number[][]) => [
        rows.map((r) =>
          softmaxRow(
            r,
            r.map(() => true),
          ),
        ),
      ];
      const [, sd] = new Attention().apply([q, k, k], {returnAttentionScores: true}) as tf.Tensor[];
      expectClose(sd, sm(dotScores), 1e-5, 1e-5);
      const [, sc] = new Attention({scoreMode: 'concat'}).apply([q, k, k], {
        returnAttentionScores: true,
      }) as tf.Tensor[];
      expectClose(sc, sm(concatScores), 1e-5, 1e-5);
    });
  });

  it('matches a plain loop with a learned scale and valid lengths (atol 1e-5)', () => {
    tf.tidy(() => {
      const layer = new Attention({useScale: true});
      const q = randTensor([2, 3, 4], 1);
      const v = randTensor([2, 5, 3], 2);
      const k = randTensor([2, 5, 4], 3);
      layer.apply([q, v, k]);
      layer.setWeights([tf.scalar(-0.7)]);
      const out = layer.apply([q, v, k], {validLens: tf.tensor1d([2, 5], 'int32')}) as tf.Tensor;
      const ref = refDotAttention(
        q.arraySync() as M3,
        k.arraySync() as M3,
        v.arraySync() as M3,
        -0.7,
        lensAllowed([2, 5]),
      );
      expectClose(out, ref.out, 1e-5, 1e-5);
    });
  });

  it('returns post-dropout weights in training, as Keras does', () => {
    tf.tidy(() => {
      const layer = new Attention({dropout: 0.5, seed: 1});
      const x = randTensor([1, 6, 4], 4);
      const [, s] = layer.apply([x, x], {
        training: true,
        returnAttentionScores: true,
      }) as tf.Tensor[];
      const values = Array.from(s.dataSync());
      expect(values.some((w) => w === 0)).toBe(true);
      expect(values.some((w) => w > 1 / 6)).toBe(true);
    });
  });

  it('names bad arguments', () => {
    expect(() => new Attention({scoreMode: 'cosine' as 'dot'})).toThrow(
      /invalid value for argument scoreMode. Expected one of \{'dot', 'concat'\}, received "cosine"/,
    );
    tf.tidy(() => {
      expect(() =>
        new Attention({name: 'att'}).apply([tf.ones([1, 2, 3]), tf.ones([1, 4, 2])]),
      ).toThrow(
        /query and key must have the same last dimension; received query \[1, 2, 3\] and key \[1, 4, 2\]/,
      );
      expect(() =>
        new Attention().apply([tf.ones([1, 2, 3]), tf.ones([1, 4, 3]), tf.ones([1, 5, 3])]),
      ).toThrow(/key and value must have the same length/);
    });
  });
});

describeBackends('DotProductAttention (d2l)', () => {
  it('reproduces the JAX notebook: [[2, 3, 4, 5]] and [[10, 11, 12, 13]]', () => {
    tf.tidy(() => {
      const keys = tf.ones([2, 10, 2]);
      const values = tf.tile(tf.reshape(tf.range(0, 40, 1, 'float32'), [1, 10, 4]), [2, 1, 1]);
      const att = new DotProductAttention({dropout: 0.5});
      const [out, w] = att.apply([tf.tensor(seeds.dot_queries), values, keys], {
        validLens: tf.tensor1d([2, 6], 'int32'),
        returnAttentionScores: true,
      }) as tf.Tensor[];
      expectClose(out, [[[2, 3, 4, 5]], [[10, 11, 12, 13]]], 1e-5, 1e-6);
      // the notebook's heatmap: uniform over the valid keys
      expectClose(
        tf.slice(w, [1, 0, 0], [1, 1, 10]),
        [[[...new Array(6).fill(1 / 6), 0, 0, 0, 0]]],
        1e-6,
        0,
      );
    });
  });

  it('matches a plain loop with 2-D lengths (atol 1e-5)', () => {
    tf.tidy(() => {
      const q = randTensor([2, 3, 4], 5);
      const k = randTensor([2, 4, 4], 6);
      const v = randTensor([2, 4, 2], 7);
      const lens = [
        [1, 2, 4],
        [3, 0, 2],
      ];
      const out = new DotProductAttention().apply([
        q,
        v,
        k,
        tf.tensor2d(lens, [2, 3], 'int32'),
      ]) as tf.Tensor;
      const ref = refDotAttention(
        q.arraySync() as M3,
        k.arraySync() as M3,
        v.arraySync() as M3,
        1 / 2,
        lensAllowed(lens),
      );
      expectClose(out, ref.out, 1e-5, 1e-5);
      expect(new DotProductAttention().getConfig()).not.toHaveProperty('useScale');
    });
  });
});

describeBackends('DotProductAttention with zero keys', (backend) => {
  // own kernels off: tfjs' matMul; on with the SIMD module off: explicit transposes on wasm
  const modes: Array<[string, Record<string, boolean>]> = [
    ['own kernels', {}],
    ['own kernels off', {[OWN_KERNELS]: false}],
    ['SIMD module off', {[SIMD]: false}],
  ];
  for (const [mode, flags] of modes) {
    it(`gives zeros, the weighted sum over no keys (${mode}; not stale ${backend} memory)`, () => {
      const q = randTensor([1, 3, 4], 41);
      const v = tf.zeros([1, 0, 4]);
      const layer = new DotProductAttention();
      const before = tf.memory().numTensors;
      // Σ over s < S = 0 of weight · value, per query and feature
      const want = Array.from({length: 3}, () => Array.from({length: 4}, () => 0));
      withFlags(flags, () => {
        for (let round = 0; round < 3; round++) {
          // memory the output may reuse, left holding other values
          tf.dispose([tf.fill([12], 7 + round), tf.fill([1, 3, 4], -3)]);
          const [out, scores] = layer.apply([q, v], {returnAttentionScores: true}) as tf.Tensor[];
          expect(out.shape).toEqual([1, 3, 4]);
          expect(scores.shape).toEqual([1, 3, 0]);
          expect(out.arraySync()).toEqual([want]);
          tf.dispose([out, scores]);
        }
      });
      expect(tf.memory().numTensors).toBe(before);
      tf.dispose([q, v]);
      layer.dispose();
    });
  }
});

describeBackends('Attention and DotProductAttention: the mask argument', () => {
  it('mask must be a list [queryMask, valueMask] (or with keyMask), as Keras raises', () => {
    const before = tf.memory().numTensors;
    tf.tidy(() => {
      const q = tf.tensor3d([[[1.1], [-0.5]]]); // [1, 2, 1]
      const v = tf.tensor3d([[[1.6], [0.7], [-0.8]]]); // [1, 3, 1]
      const qMask = tf.tensor2d([[1, 0]], [1, 2], 'bool');
      const vMask = tf.tensor2d([[1, 1, 0]], [1, 3], 'bool');
      const att = new Attention({name: 'luong'});
      expect(() => att.apply([q, v], {mask: vMask})).toThrow(
        "Layer 'luong' (Attention): mask must be a list, namely [queryMask, valueMask] (or " +
          '[queryMask, valueMask, keyMask]); received a bool tensor of shape [1, 3]',
      );
      expect(() => att.apply([q, v], {mask: [qMask]})).toThrow(
        "Layer 'luong' (Attention): expected a mask list of length 2 or 3, namely [queryMask, " +
          'valueMask] or [queryMask, valueMask, keyMask]; received a list of length 1',
      );
      expect(() => att.apply([q, v], {mask: [qMask, vMask, vMask, vMask]})).toThrow(
        'received a list of length 4',
      );
      expect(() => att.apply([q, v], {mask: [qMask, 1]} as never)).toThrow(
        "Layer 'luong' (Attention): expected mask[1] to be a tensor or null, received 1",
      );
      // the d2l layer shares the rule
      expect(() => new DotProductAttention().apply([q, v], {mask: qMask})).toThrow(
        '(DotProductAttention): mask must be a list',
      );
      // a list of 2 or 3 works: plain-loop reference, softmax(q k) over unmasked keys, masked
      // query rows zero
      const out = att.apply([q, v], {mask: [qMask, vMask, vMask]}) as tf.Tensor;
      const Qv = [1.1, -0.5];
      const Vv = [1.6, 0.7, -0.8];
      const expected = Qv.map((qi, t) => {
        const w = softmaxRow(
          Vv.map((k) => qi * k),
          [true, true, false],
        );
        return [t === 0 ? w[0] * Vv[0] + w[1] * Vv[1] : 0];
      });
      expectClose(out, [expected], 1e-6, 1e-6);
    });
    expect(tf.memory().numTensors).toBe(before);
  });

  it("the Keras layer must be called on a list, as Keras' _validate_inputs raises; the d2l layer takes one tensor", () => {
    const before = tf.memory().numTensors;
    const x = tf.ones([1, 2, 3]);
    expect(() => new Attention({name: 'luong'}).apply(x)).toThrow(
      "Layer 'luong' (Attention): Attention layer must be called on a list of inputs, namely " +
        '[query, value] or [query, value, key]; received a single tensor of shape [1, 2, 3] ' +
        '(for self-attention pass [x, x])',
    );
    expect(tf.memory().numTensors).toBe(before + 1);
    // [x, x] is Keras' self-attention; d2l's DotProductAttention keeps apply(x)
    const pair = new Attention().apply([x, x]) as tf.Tensor;
    const single = new DotProductAttention().apply(x) as tf.Tensor;
    expect(pair.shape).toEqual([1, 2, 3]);
    expect(single.shape).toEqual([1, 2, 3]);
    tf.dispose([x, pair, single]);
    expect(tf.memory().numTensors).toBe(before);
  });

  it('in a functional model with masked inputs, predict still works (tfjs passes the first mask alone)', () => {
    tf.tidy(() => {
      const ids = tf.input({shape: [3], dtype: 'int32'});
      const x = tf.layers.embedding({inputDim: 5, outputDim: 2, maskZero: true}).apply(ids);
      const y = new Attention().apply([x, x] as tf.SymbolicTensor[]) as tf.SymbolicTensor;
      const model = tf.model({inputs: ids, outputs: y});
      const out = model.predict(tf.tensor2d([[1, 2, 0]], [1, 3], 'int32')) as tf.Tensor;
      expect(out.shape).toEqual([1, 3, 2]);
      // the padded query's row is zero (its Keras mask reached the layer)
      expectClose(out.slice([0, 2, 0], [1, 1, 2]), [[[0, 0]]], 0, 0);
    });
  });
});
