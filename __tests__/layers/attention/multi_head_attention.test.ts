import * as tf from '@tensorflow/tfjs';

import {MultiHeadAttention} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';
import {saveToMemory} from '../../helpers/save';
import {
  allowAll,
  Allowed,
  andAllowed,
  causalAllowed,
  lensAllowed,
  M2,
  M3,
  MhaWeights,
  refMultiHeadAttention,
} from '../../helpers/reference_attention';

function weightsOf(layer: MultiHeadAttention): MhaWeights {
  const arr = (d: {
    kernel: tf.layers.Layer['weights'][number] | null;
    bias: tf.layers.Layer['weights'][number] | null;
  }) => ({
    w: d.kernel!.read().arraySync() as M3,
    b: d.bias ? (d.bias.read().arraySync() as M2) : null,
  });
  const q = arr(layer.queryDense!);
  const k = arr(layer.keyDense!);
  const v = arr(layer.valueDense!);
  const o = layer.outputDense!;
  return {
    wq: q.w,
    bq: q.b,
    wk: k.w,
    bk: k.b,
    wv: v.w,
    bv: v.b,
    wo: o.kernel!.read().arraySync() as M3,
    bo: o.bias ? (o.bias.read().arraySync() as number[]) : null,
  };
}

/** Random biases too, so a wrong bias layout cannot pass. */
function randomizeBiases(layer: MultiHeadAttention, seed: number): void {
  layer.setWeights(layer.getWeights().map((w, i) => randTensor(w.shape, seed + i, 0.5)));
}

const TOL = 1e-5; // float32 sums of at most a few dozen products

describeBackends('MultiHeadAttention', () => {
  describe('numerics against a plain-loop reference (atol 1e-5)', () => {
    const B = 2;
    const T = 4;
    const S = 5;
    const cases: Array<{
      name: string;
      args: ConstructorParameters<typeof MultiHeadAttention>[0];
      key: boolean;
      kwargs?: () => Record<string, unknown>;
      allowed: Allowed;
    }> = [
      {name: 'unmasked', args: {numHeads: 2, keyDim: 3}, key: false, allowed: allowAll},
      {
        name: 'separate key, valueDim 4, outputShape 5',
        args: {numHeads: 3, keyDim: 2, valueDim: 4, outputShape: 5},
        key: true,
        allowed: allowAll,
      },
      {
        name: 'no bias',
        args: {numHeads: 2, keyDim: 3, useBias: false},
        key: false,
        allowed: allowAll,
      },
      {
        name: '1-D valid lengths',
        args: {numHeads: 2, keyDim: 3},
        key: false,
        kwargs: () => ({validLens: tf.tensor1d([3, 1], 'int32')}),
        allowed: lensAllowed([3, 1]),
      },
      {
        name: '2-D valid lengths (per query), including 0',
        args: {numHeads: 2, keyDim: 3},
        key: true,
        kwargs: () => ({
          validLens: tf.tensor2d(
            [
              [1, 2, 3, 5],
              [0, 4, 2, 1],
            ],
            [2, 4],
            'int32',
          ),
        }),
        allowed: lensAllowed([
          [1, 2, 3, 5],
          [0, 4, 2, 1],
        ]),
      },
      {
        name: 'causal and lengths combined',
        args: {numHeads: 2, keyDim: 3, useCausalMask: true},
        key: false,
        kwargs: () => ({validLens: tf.tensor1d([2, 5], 'int32')}),
        allowed: andAllowed(causalAllowed, lensAllowed([2, 5])),
      },
      {
        name: 'attention mask [B, T, S]',
        args: {numHeads: 2, keyDim: 3},
        key: false,
        kwargs: () => ({attentionMask: tf.tensor3d(MASK, [B, T, S], 'bool')}),
        allowed: (b, t, s) => MASK[b][t][s],
      },
      {
        name: 'attention mask [T, S] broadcast',
        args: {numHeads: 1, keyDim: 3},
        key: false,
        kwargs: () => ({
          attentionMask: tf.tensor2d(
            MASK[0].map((r) => r.map(Number)),
            [T, S],
            'int32',
          ),
        }),
        allowed: (_b, t, s) => MASK[0][t][s],
      },
    ];
    const MASK = [
      [
        [true, false, true, false, false],
        [false, false, false, false, false],
        [true, true, true, true, true],
        [false, true, false, false, true],
      ],
      [
        [true, true, false, false, false],
        [false, true, false, true, false],
        [true, false, false, false, false],
        [false, false, false, false, true],
      ],
    ];
    for (const c of cases) {
      it(c.name, () => {
        tf.tidy(() => {
          const layer = new MultiHeadAttention(c.args);
          const query = randTensor([B, T, 6], 1);
          const value = randTensor([B, S, 7], 2);
          const key = randTensor([B, S, 3], 3);
          const inputs = c.key ? [query, value, key] : [query, value];
          layer.apply(inputs, c.kwargs?.()); // build
          randomizeBiases(layer, 40);
          const [out, scores] = layer.apply(inputs, {
            ...c.kwargs?.(),
            returnAttentionScores: true,
          }) as tf.Tensor[];
          const ref = refMultiHeadAttention(
            query.arraySync() as M3,
            value.arraySync() as M3,
            (c.key ? key : value).arraySync() as M3,
            weightsOf(layer),
            c.args.numHeads,
            c.allowed,
          );
          expectClose(out, ref.out, TOL, TOL);
          expect(scores.shape).toEqual([B, c.args.numHeads, T, S]);
          expectClose(scores, ref.weights, TOL, TOL);
          layer.dispose();
        });
      });
    }
  });

  it('reproduces the d2l notebook example: output [2, 4, 100]', () => {
    tf.tidy(() => {
      // d2l MultiHeadAttention(num_hiddens=100, num_heads=5, bias=False)
      const attention = new MultiHeadAttention({
        numHeads: 5,
        keyDim: 20,
        useBias: false,
        dropout: 0.5,
      });
      const X = tf.ones([2, 4, 100]);
      const Y = tf.ones([2, 6, 100]);
      const out = attention.apply([X, Y, Y], {
        validLens: tf.tensor1d([3, 2], 'int32'),
      }) as tf.Tensor;
      expect(out.shape).toEqual([2, 4, 100]);
      expect(attention.weights.map((w) => w.shape)).toEqual([
        [100, 5, 20],
        [100, 5, 20],
        [100, 5, 20],
        [5, 20, 100],
      ]);
      attention.dispose();
    });
  });

  it('attends over two axes like attention over the flattened axes', () => {
    tf.tidy(() => {
      const layer = new MultiHeadAttention({numHeads: 2, keyDim: 3, attentionAxes: [1, 2]});
      const x = randTensor([2, 3, 4, 5], 9);
      const y = layer.apply(x) as tf.Tensor;
      expect(layer.getConfig().attentionAxes).toEqual([1, 2]);
      const ref = refMultiHeadAttention(
        tf.reshape(x, [2, 12, 5]).arraySync() as M3,
        tf.reshape(x, [2, 12, 5]).arraySync() as M3,
        tf.reshape(x, [2, 12, 5]).arraySync() as M3,
        weightsOf(layer),
        2,
      );
      expectClose(tf.reshape(y, [2, 12, 5]), ref.out, TOL, TOL);
      const [, scores] = layer.apply(x, {returnAttentionScores: true}) as tf.Tensor[];
      expect(scores.shape).toEqual([2, 2, 3, 4, 3, 4]);
      layer.dispose();
    });
  });

  it('attends over one inner axis (negative axes as in Keras 3.12+) like per-slice attention', () => {
    tf.tidy(() => {
      const layer = new MultiHeadAttention({numHeads: 2, keyDim: 3, attentionAxes: -2});
      const x = randTensor([2, 3, 4, 5], 11);
      const y = layer.apply(x) as tf.Tensor; // attention over axis 2, independently for axis 1
      expect(layer.getConfig().attentionAxes).toEqual([2]);
      for (let i = 0; i < 3; i++) {
        const slice = tf.squeeze(tf.slice(x, [0, i, 0, 0], [2, 1, 4, 5]), [1]).arraySync() as M3;
        const ref = refMultiHeadAttention(slice, slice, slice, weightsOf(layer), 2);
        expectClose(tf.squeeze(tf.slice(y, [0, i, 0, 0], [2, 1, 4, 5]), [1]), ref.out, TOL, TOL);
      }
      layer.dispose();
    });
  });

  it('uses Keras masks from Embedding(maskZero) as query and value masks', () => {
    tf.tidy(() => {
      // Keras test_masking: query and value token ids, 0 = padding
      const qTokens = tf.tensor2d(
        [
          [1, 2, 3, 0, 0],
          [3, 3, 1, 1, 2],
          [1, 0, 0, 0, 0],
        ],
        [3, 5],
        'int32',
      );
      const vTokens = tf.tensor2d(
        [
          [5, 4, 0],
          [3, 0, 0],
          [2, 1, 1],
        ],
        [3, 3],
        'int32',
      );
      const emb = tf.layers.embedding({inputDim: 6, outputDim: 4, maskZero: true});
      const q = emb.apply(qTokens) as tf.Tensor;
      const v = emb.apply(vTokens) as tf.Tensor;
      expect(q.kerasMask).toBeDefined();
      const layer = new MultiHeadAttention({numHeads: 2, keyDim: 2});
      const auto = layer.apply([q, v]) as tf.Tensor;
      // the explicit mask of the Keras test
      const explicit = tf.tensor3d(
        [
          [
            [1, 1, 0],
            [1, 1, 0],
            [1, 1, 0],
            [0, 0, 0],
            [0, 0, 0],
          ],
          [
            [1, 0, 0],
            [1, 0, 0],
            [1, 0, 0],
            [1, 0, 0],
            [1, 0, 0],
          ],
          [
            [1, 1, 1],
            [0, 0, 0],
            [0, 0, 0],
            [0, 0, 0],
            [0, 0, 0],
          ],
        ],
        [3, 5, 3],
        'bool',
      );
      const plainQ = tf.clone(q);
      const plainV = tf.clone(v);
      const manual = layer.apply([plainQ, plainV], {attentionMask: explicit}) as tf.Tensor;
      expectClose(auto, manual, 1e-6, 1e-6);
      // the output carries the query's mask
      expect(auto.kerasMask?.arraySync()).toEqual(q.kerasMask?.arraySync());
      layer.dispose();
      emb.dispose();
    });
  });

  it('gives uniform weights, never NaN, for fully masked rows', () => {
    tf.tidy(() => {
      const layer = new MultiHeadAttention({numHeads: 2, keyDim: 3});
      const x = randTensor([2, 3, 4], 13);
      const [out, scores] = layer.apply(x, {
        validLens: tf.tensor1d([0, 3], 'int32'),
        returnAttentionScores: true,
      }) as tf.Tensor[];
      expect(tf.any(tf.isNaN(out)).dataSync()[0]).toBe(0);
      expectClose(
        tf.slice(scores, [0, 0, 0, 0], [1, 2, 3, 3]),
        tf.fill([1, 2, 3, 3], 1 / 3),
        1e-6,
        0,
      );
      layer.dispose();
    });
  });

  it('applies dropout to the weights in training only and returns pre-dropout scores', () => {
    tf.tidy(() => {
      const layer = new MultiHeadAttention({numHeads: 2, keyDim: 4, dropout: 0.5, seed: 3});
      const x = randTensor([2, 6, 8], 14);
      const [inf, sInf] = layer.apply(x, {returnAttentionScores: true}) as tf.Tensor[];
      const [inf2] = layer.apply(x, {returnAttentionScores: true}) as tf.Tensor[];
      expectClose(inf, inf2, 0, 0);
      const [train, sTrain] = layer.apply(x, {
        training: true,
        returnAttentionScores: true,
      }) as tf.Tensor[];
      expect(tf.max(tf.abs(tf.sub(train, inf))).dataSync()[0]).toBeGreaterThan(1e-3);
      expectClose(sTrain, sInf, 1e-6, 1e-6);
      const noDrop = new MultiHeadAttention({numHeads: 2, keyDim: 4});
      noDrop.apply(x);
      noDrop.setWeights(layer.getWeights());
      expectClose(noDrop.apply(x) as tf.Tensor, inf, 1e-6, 1e-6);
      layer.dispose();
      noDrop.dispose();
    });
  });

  it('keeps masked weights exactly 0 with a sliding window, causal or not', () => {
    tf.tidy(() => {
      for (const causal of [false, true]) {
        const layer = new MultiHeadAttention({
          numHeads: 1,
          keyDim: 4,
          slidingWindow: 3,
          useCausalMask: causal,
        });
        const [, s] = layer.apply(randTensor([1, 6, 8], 15), {
          returnAttentionScores: true,
        }) as tf.Tensor[];
        const w = (s.arraySync() as number[][][][])[0][0];
        for (let i = 0; i < 6; i++) {
          for (let j = 0; j < 6; j++) {
            const allowed = Math.abs(i - j) < 3 && (!causal || j <= i);
            expect(w[i][j] > 0).toBe(allowed);
          }
        }
        layer.dispose();
      }
    });
  });

  it('honours useCausalMask as a call kwarg, overriding the config', () => {
    tf.tidy(() => {
      const layer = new MultiHeadAttention({numHeads: 1, keyDim: 2});
      const x = randTensor([1, 4, 3], 16);
      const [, s] = layer.apply(x, {
        useCausalMask: true,
        returnAttentionScores: true,
      }) as tf.Tensor[];
      const upper = tf.mul(s, tf.sub(1, tf.linalg.bandPart(tf.ones([4, 4]), -1, 0)));
      expect(tf.max(upper).dataSync()[0]).toBe(0);
      const [, s2] = layer.apply(x, {returnAttentionScores: true}) as tf.Tensor[];
      expect(
        tf.max(tf.mul(s2, tf.sub(1, tf.linalg.bandPart(tf.ones([4, 4]), -1, 0)))).dataSync()[0],
      ).toBeGreaterThan(0);
      layer.dispose();
    });
  });

  it('folds symbolic call options into the config and lengths into the inputs', () => {
    const x = tf.input({shape: [4, 6]});
    const lens = tf.input({shape: [1], dtype: 'int32'});
    const layer = new MultiHeadAttention({numHeads: 2, keyDim: 3});
    const outs = layer.apply([x, x], {
      useCausalMask: true,
      returnAttentionScores: true,
      validLens: lens,
    }) as tf.SymbolicTensor[];
    expect(outs.map((o) => o.shape)).toEqual([
      [null, 4, 6],
      [null, 2, 4, 4],
    ]);
    expect(layer.useCausalMask).toBe(true);
    expect(layer.getConfig().useCausalMask).toBe(true);
    expect(layer.inboundNodes[0].inboundLayers.length).toBe(2); // [x, lens]: x is not handed over twice
    expect(() => layer.apply(x, {useCausalMask: false})).toThrow(
      /useCausalMask=false differs from an earlier call/,
    );
    layer.dispose();
  });

  it('trains no weight when trainable is false, and passes regularizers and constraints on', async () => {
    const layer = new MultiHeadAttention({
      numHeads: 2,
      keyDim: 2,
      kernelRegularizer: 'l1l2',
      kernelConstraint: 'nonNeg',
    });
    const x = tf.input({shape: [3, 4]});
    const head = tf.layers.dense({units: 4});
    const model = tf.model({inputs: x, outputs: head.apply(layer.apply(x)) as tf.SymbolicTensor});
    expect(layer.losses.length).toBe(4); // one regularizer loss per kernel, collected by fit
    // Constraints act where tfjs-layers applies them (on writes; tfjs's fit applies none, as for
    // tf.layers.dense): negative kernels written with setWeights come back clipped at 0.
    layer.setWeights(layer.getWeights().map((w) => tf.fill(w.shape, -1)));
    for (const d of [layer.queryDense!, layer.keyDense!, layer.valueDense!, layer.outputDense!]) {
      expect(tf.min(d.kernel!.read()).dataSync()[0]).toBe(0);
    }
    expect(tf.min(layer.queryDense!.bias!.read()).dataSync()[0]).toBe(-1);
    const xs = randTensor([4, 3, 4], 17);
    const ys = randTensor([4, 3, 4], 18, 5);
    layer.trainable = false;
    expect(layer.trainableWeights.length).toBe(0);
    expect(layer.nonTrainableWeights.length).toBe(8);
    expect(layer.queryDense!.trainable).toBe(false);
    model.compile({optimizer: tf.train.sgd(0.5), loss: 'meanSquaredError'});
    const before = layer.getWeights().map((w) => w.arraySync());
    await model.fit(xs, ys, {epochs: 1, verbose: 0});
    expect(layer.getWeights().map((w) => w.arraySync())).toEqual(before);
    expect(model.trainableWeights.length).toBe(2); // the dense head still trains
    tf.dispose([xs, ys]);
    model.dispose();
  });

  it('answers bad arguments and inputs with errors that name them', () => {
    expect(() => new MultiHeadAttention({numHeads: 0, keyDim: 2})).toThrow(
      /numHeads to be a positive integer, received 0/,
    );
    expect(() => new MultiHeadAttention({numHeads: 2, keyDim: 1.5})).toThrow(
      /keyDim to be a positive integer, received 1.5/,
    );
    expect(() => new MultiHeadAttention({numHeads: 2, keyDim: 2, valueDim: -2})).toThrow(
      /valueDim/,
    );
    expect(() => new MultiHeadAttention({numHeads: 2, keyDim: 2, dropout: 1.5})).toThrow(
      /dropout to be a number in \[0, 1\), received 1.5/,
    );
    expect(() => new MultiHeadAttention({numHeads: 2, keyDim: 2, outputShape: [0]})).toThrow(
      /outputShape/,
    );
    expect(
      () => new MultiHeadAttention({numHeads: 2, keyDim: 2, activityRegularizer: 'l1l2'}),
    ).toThrow(/activityRegularizer is not supported/);
    expect(
      () => new MultiHeadAttention({numHeads: 2, keyDim: 2, kernelInitializer: 'noSuchInit'}),
    ).toThrow(/Unknown initializer: 'noSuchInit'/);
    tf.tidy(() => {
      const mk = () => new MultiHeadAttention({numHeads: 2, keyDim: 2, name: 'mha'});
      expect(() =>
        mk().apply([tf.ones([2, 3, 4]), tf.ones([2, 5, 4]), tf.ones([2, 6, 4])]),
      ).toThrow(
        /value and key, except the last one, must be equal; received value \[2, 5, 4\] and key \[2, 6, 4\]/,
      );
      expect(() => mk().apply(tf.ones([2, 4]))).toThrow(
        /expected the query to have rank >= 3|expected \[query\]/,
      );
      expect(() => mk().apply(tf.ones([2, 3, 4]), {validLens: tf.ones([3], 'int32')})).toThrow(
        /expected validLens of shape \[2\] or \[2, 1\].*received \[3\]/,
      );
      expect(() =>
        mk().apply(tf.ones([2, 3, 4]), {attentionMask: tf.ones([2, 3, 5], 'bool')}),
      ).toThrow(
        /attentionMask of shape \[2, 1, 3, 5\] does not broadcast to the attention scores \[2, 2, 3, 3\]/,
      );
      const twoAxes = new MultiHeadAttention({
        numHeads: 1,
        keyDim: 2,
        attentionAxes: [1, 2],
        useCausalMask: true,
      });
      expect(() => twoAxes.apply(tf.ones([1, 2, 2, 3]))).toThrow(
        /useCausalMask needs a single attention axis/,
      );
      expect(() =>
        new MultiHeadAttention({numHeads: 1, keyDim: 2, attentionAxes: [3]}).apply(
          tf.ones([1, 2, 3]),
        ),
      ).toThrow(/attentionAxes \[3\] must name axes between the batch axis and the feature axis/);
      expect(() =>
        mk().apply([
          tf.ones([1, 2, 3]),
          tf.ones([1, 2, 3]),
          tf.ones([1, 2, 3]),
          tf.ones([1, 2, 3]),
        ]),
      ).toThrow(/expected \[query\], \[query, value\] or \[query, value, key\].*received 4 inputs/);
    });
  });
});

describe('input roles of functional models', () => {
  it('keeps a float attention-mask input apart from a key, after save and load', async () => {
    await tf.setBackend('cpu');
    const q = tf.input({shape: [3, 4]});
    const v = tf.input({shape: [5, 4]});
    const mask = tf.input({shape: [3, 5]}); // float32, the same rank as a key
    const layer = new MultiHeadAttention({numHeads: 1, keyDim: 2, name: 'mha'});
    const y = layer.apply([q, v], {attentionMask: mask}) as tf.SymbolicTensor;
    expect(layer.inputRoles).toEqual(['query', 'value', 'attentionMask']);
    const model = tf.model({inputs: [q, v, mask], outputs: y});
    const saved = await saveToMemory(model);
    expect(JSON.stringify(saved.modelTopology)).toContain(
      '"input_roles":["query","value","attention_mask"]',
    );
    const loaded = await tf.loadLayersModel(tf.io.fromMemory(saved));
    tf.tidy(() => {
      const qs = randTensor([2, 3, 4], 1);
      const vs = randTensor([2, 5, 4], 2);
      const m = tf.cast(tf.greater(randTensor([2, 3, 5], 3), -0.3), 'float32');
      const expected = layer.apply([qs, vs], {attentionMask: m}) as tf.Tensor;
      expectClose(model.predict([qs, vs, m]) as tf.Tensor, expected, 1e-6, 1e-6);
      expectClose(loaded.predict([qs, vs, m]) as tf.Tensor, expected, 1e-6, 1e-6);
    });
    model.dispose();
    loaded.dispose();
  });
});
