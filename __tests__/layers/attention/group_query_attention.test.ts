/**
 * GroupQueryAttention (its layer harness cases: helpers/layer_harness.ts): numerics against the
 * plain-loop reference with key / value heads repeated by hand (query head u uses kv head
 * floor(u * V / U)), with masks, causal, sliding window, gate and returned scores. Tolerance 1e-5
 * (abs and rel).
 */
import * as tf from '@tensorflow/tfjs';

import {GroupQueryAttention, toKerasArtifacts} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';
import {saveToMemory} from '../../helpers/save';
import {
  Allowed,
  allowAll,
  andAllowed,
  causalAllowed,
  lensAllowed,
  M2,
  M3,
  refMultiHeadAttention,
} from '../../helpers/reference_attention';

const TOL = 1e-5;

/** The layer's weights with kv heads repeated to U heads, by index arithmetic on plain arrays. */
function repeatedWeights(layer: GroupQueryAttention) {
  const paths = layer.weightPaths();
  const get = (p: string) => paths.get(p)?.read().arraySync() ?? null;
  const U = layer.numQueryHeads;
  const V = layer.numKeyValueHeads;
  const kvHead = (u: number) => Math.floor((u * V) / U);
  const kernel = (w: M3) => w.map((row) => Array.from({length: U}, (_, u) => row[kvHead(u)]));
  const bias = (b: M2 | null) => b && Array.from({length: U}, (_, u) => b[kvHead(u)]);
  return {
    wq: get('query/kernel') as M3,
    bq: get('query/bias') as M2 | null,
    wk: kernel(get('key/kernel') as M3),
    bk: bias(get('key/bias') as M2 | null),
    wv: kernel(get('value/kernel') as M3),
    bv: bias(get('value/bias') as M2 | null),
    wo: get('attention_output/kernel') as M3,
    bo: get('attention_output/bias') as number[] | null,
  };
}

function build(args: ConstructorParameters<typeof GroupQueryAttention>[0], inputs: tf.Tensor[]) {
  const layer = new GroupQueryAttention(args);
  layer.apply(inputs);
  layer.setWeights(layer.getWeights().map((w, i) => randTensor(w.shape, 30 + i, 0.5)));
  return layer;
}

describeBackends('GroupQueryAttention', () => {
  const cases: Array<{
    name: string;
    args: ConstructorParameters<typeof GroupQueryAttention>[0];
    kwargs: () => Record<string, unknown>;
    allowed: Allowed;
  }> = [
    {
      name: 'U = V',
      args: {headDim: 2, numQueryHeads: 2, numKeyValueHeads: 2},
      kwargs: () => ({}),
      allowed: allowAll,
    },
    {
      name: 'U = 4, V = 2, lengths and causal',
      args: {headDim: 3, numQueryHeads: 4, numKeyValueHeads: 2, useCausalMask: true},
      kwargs: () => ({validLens: tf.tensor1d([3, 5], 'int32')}),
      allowed: andAllowed(lensAllowed([3, 5]), causalAllowed),
    },
    {
      name: 'U = 4, V = 1, sliding window 2 with causal',
      args: {
        headDim: 2,
        numQueryHeads: 4,
        numKeyValueHeads: 1,
        slidingWindow: 2,
        useCausalMask: true,
      },
      kwargs: () => ({}),
      allowed: (_b, t, s) => s <= t && Math.abs(t - s) < 2,
    },
    {
      name: 'U = 6, V = 3, sliding window 3 without causal',
      args: {headDim: 2, numQueryHeads: 6, numKeyValueHeads: 3, slidingWindow: 3},
      kwargs: () => ({}),
      allowed: (_b, t, s) => Math.abs(t - s) < 3,
    },
  ];
  for (const c of cases) {
    it(`= plain loops with repeated kv heads: ${c.name}`, () => {
      tf.tidy(() => {
        const x = randTensor([2, 5, 6], 1);
        const layer = build(c.args, [x]);
        const [y, scores] = layer.apply(x, {
          ...c.kwargs(),
          returnAttentionScores: true,
        }) as tf.Tensor[];
        const X = x.arraySync() as M3;
        const ref = refMultiHeadAttention(
          X,
          X,
          X,
          repeatedWeights(layer),
          layer.numQueryHeads,
          c.allowed,
        );
        expectClose(y, ref.out, TOL, TOL);
        expectClose(scores, ref.weights, TOL, TOL);
        expect(scores.shape).toEqual([2, layer.numQueryHeads, 5, 5]);
      });
    });
  }

  it('gate: output projection of heads times sigmoid(gate(query))', () => {
    tf.tidy(() => {
      const x = randTensor([1, 3, 4], 2);
      const layer = build({headDim: 2, numQueryHeads: 2, numKeyValueHeads: 1, useGate: true}, [x]);
      const plain = new GroupQueryAttention({headDim: 2, numQueryHeads: 2, numKeyValueHeads: 1});
      plain.apply(x);
      const w = layer.weightPaths();
      plain.setWeights(
        ['query', 'key', 'value', 'attention_output'].flatMap((n) => [
          w.get(`${n}/kernel`)!.read(),
          w.get(`${n}/bias`)!.read(),
        ]),
      );
      // heads of the plain layer = its output before projection: recover them from the
      // reference, then gate with loops: out = Σ_u,h heads[t][u][h] g[t][u][h] Wo[u][h] + bo
      const X = x.arraySync() as M3;
      const gk = w.get('gate/kernel')!.read().arraySync() as M3;
      const gb = w.get('gate/bias')!.read().arraySync() as M2;
      const wo = w.get('attention_output/kernel')!.read().arraySync() as M3;
      const bo = w.get('attention_output/bias')!.read().arraySync() as number[];
      const rw = repeatedWeights(layer);
      // per-head attention outputs with an identity output projection
      const U = 2;
      const H = 2;
      const eye: M3 = Array.from({length: U}, (_, u) =>
        Array.from({length: H}, (_h, h) =>
          Array.from({length: U * H}, (_c, c) => (c === u * H + h ? 1 : 0)),
        ),
      );
      const heads = refMultiHeadAttention(X, X, X, {...rw, wo: eye, bo: null}, U).out[0]; // [T][U*H]
      const expected = heads.map((row, t) => {
        const out = bo.slice();
        for (let u = 0; u < U; u++)
          for (let h = 0; h < H; h++) {
            let g = gb[u][h];
            for (let m = 0; m < 4; m++) g += X[0][t][m] * gk[m][u][h];
            const gated = row[u * H + h] / (1 + Math.exp(-g));
            for (let c = 0; c < out.length; c++) out[c] += gated * wo[u][h][c];
          }
        return out;
      });
      expectClose(layer.apply(x) as tf.Tensor, [expected], TOL, TOL);
    });
  });

  it('is refused by the tf-keras 2 export, which has no such class', async () => {
    const x = tf.input({shape: [3, 4]});
    const y = new GroupQueryAttention({headDim: 2, numQueryHeads: 2, numKeyValueHeads: 1}).apply(x);
    const model = tf.model({inputs: x, outputs: y as tf.SymbolicTensor});
    const artifacts = await saveToMemory(model);
    expect(() => toKerasArtifacts(artifacts)).toThrow(
      /is a GroupQueryAttention, which tf-keras 2 does not have \(Keras 3 does\)/,
    );
    model.dispose();
  });

  it('refuses bad arguments, naming them', () => {
    expect(
      () => new GroupQueryAttention({headDim: 2, numQueryHeads: 3, numKeyValueHeads: 2}),
    ).toThrow(
      'GroupQueryAttention: expected numQueryHeads to be a multiple of numKeyValueHeads, received numQueryHeads 3 and numKeyValueHeads 2',
    );
    expect(
      () => new GroupQueryAttention({headDim: 0, numQueryHeads: 2, numKeyValueHeads: 2}),
    ).toThrow('GroupQueryAttention: expected headDim to be a positive integer, received 0');
    tf.tidy(() => {
      const layer = new GroupQueryAttention({headDim: 2, numQueryHeads: 2, numKeyValueHeads: 1});
      expect(() => layer.apply(tf.ones([2, 3, 4, 5]))).toThrow(/expected a query of rank 3/);
    });
  });

  it("refuses a query and a value of different widths in computeOutputShape, as Keras' does", () => {
    // Keras 3.15 GroupedQueryAttention.compute_output_shape raises "The last dimension of
    // `query_shape` and `value_shape` must be equal"; its eager call does not check
    const layer = new GroupQueryAttention({
      name: 'gqa',
      headDim: 2,
      numQueryHeads: 2,
      numKeyValueHeads: 1,
    });
    expect(() =>
      layer.computeOutputShape([
        [null, 3, 8],
        [null, 5, 6],
      ]),
    ).toThrow(
      "Layer 'gqa' (GroupQueryAttention): the last dimension of the query and the value must " +
        'be equal, but are 8 and 6; received query [null, 3, 8] and value [null, 5, 6]',
    );
    const q = tf.input({shape: [3, 8]});
    const v = tf.input({shape: [5, 6]});
    expect(() => layer.apply([q, v])).toThrow('must be equal, but are 8 and 6');
    // equal widths (and a key of another width) are fine, as in Keras
    const k = tf.input({shape: [5, 4]});
    const out = layer.apply([q, tf.input({shape: [5, 8]}), k]) as tf.SymbolicTensor;
    expect(out.shape).toEqual([null, 3, 8]);
  });
});
