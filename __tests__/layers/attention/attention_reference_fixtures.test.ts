/**
 * The seed notebooks' layers (d2l PyTorch MultiHeadAttention, JAX/Flax AdditiveAttention and
 * DotProductAttention) and PyTorch nn.MultiheadAttention, given the same weights, compute what
 * our layers compute (fixtures/reference_models.py). Tolerance: atol 1e-5, rtol 1e-5.
 *
 * Weight mapping:
 * - d2l MultiHeadAttention(bias=False): W_q/W_k/W_v/W_o `.weight` are torch's q/k/v_proj_weight and
 *   out_proj.weight, loaded with loadTorchMultiheadAttention (kernel = W.T.reshape(in, heads, d));
 *   `MultiHeadAttention({numHeads, keyDim: num_hiddens / num_heads, useBias: false})`.
 * - Flax AdditiveAttention: Dense_0 (W_q) kernel -> query_kernel, Dense_1 (W_k) -> key_kernel,
 *   Dense_2 (w_v, [h, 1]) -> scale ([h]); `AdditiveAttention({numHiddens})`.
 * - Flax DotProductAttention: no weights; `DotProductAttention()`.
 * - nn.MultiheadAttention: state_dict through loadTorchMultiheadAttention; key_padding_mask is
 *   `validLens`; is_causal + a causal attn_mask is `useCausalMask`; average_attn_weights=False
 *   gives our per-head scores.
 */
import * as tf from '@tensorflow/tfjs';

import {
  AdditiveAttention,
  DotProductAttention,
  loadTorchMultiheadAttention,
  MultiHeadAttention,
} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose, maxAbsDiff} from '../../helpers/close';
import {recordFidelity} from '../../helpers/fidelity';
import fixtures from '../../fixtures/reference.json';

type N = number[] | number[][] | number[][][] | number[][][][];
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Case = Record<string, any>;

const cases = fixtures.cases as Case[];
const TOL = 1e-5;

function check(
  name: string,
  reference: string,
  backend: string,
  pairs: Array<[tf.Tensor, N]>,
): void {
  let worst = 0;
  for (const [got, want] of pairs) {
    worst = Math.max(worst, maxAbsDiff(got, want as number[][]));
    expectClose(got, want as number[][], TOL, TOL);
  }
  recordFidelity({case: name, reference, backend, maxAbsError: worst});
}

describe('reference fixtures', () => {
  it('hold exactly the cases the tests below expect (a lost case would drop a test)', () => {
    expect(cases.map((c) => c.case).sort()).toEqual(
      [
        'd2l_mha_valid_lens_1d',
        'd2l_mha_valid_lens_2d',
        'flax_additive_notebook',
        'flax_additive_random_2d',
        'flax_dot_notebook',
        'flax_dot_random_2d',
        'torch_mha_causal',
        'torch_mha_kdim_vdim_no_bias',
        'torch_mha_key_padding',
      ].sort(),
    );
  });
});

describeBackends('reference implementations', (backend) => {
  for (const c of cases.filter((x) => x.case.startsWith('d2l_'))) {
    it(`${c.case}: d2l PyTorch MultiHeadAttention`, () => {
      tf.tidy(() => {
        const heads = c.num_heads as number;
        const hidden = (c.weights['W_q.weight'] as number[][]).length;
        const layer = new MultiHeadAttention({
          numHeads: heads,
          keyDim: hidden / heads,
          useBias: false,
        });
        const q = tf.tensor(c.queries);
        const kv = tf.tensor(c.keys_values);
        const lens = tf.tensor(c.valid_lens, undefined, 'int32');
        layer.apply([q, kv, kv]);
        loadTorchMultiheadAttention(layer, {
          q_proj_weight: c.weights['W_q.weight'],
          k_proj_weight: c.weights['W_k.weight'],
          v_proj_weight: c.weights['W_v.weight'],
          'out_proj.weight': c.weights['W_o.weight'],
        });
        const [out, scores] = layer.apply([q, kv, kv], {
          validLens: lens,
          returnAttentionScores: true,
        }) as tf.Tensor[];
        check(c.case, c.reference, backend, [
          [out, c.output],
          [scores, c.attention_weights],
        ]);
      });
    });
  }

  for (const c of cases.filter((x) => x.case.startsWith('flax_additive'))) {
    it(`${c.case}: Flax AdditiveAttention`, () => {
      tf.tidy(() => {
        const layer = new AdditiveAttention({numHiddens: 8});
        const [q, k, v] = [tf.tensor(c.queries), tf.tensor(c.keys), tf.tensor(c.values)];
        layer.apply([q, v, k]);
        layer.setWeights([
          tf.tensor(c.params.Dense_0),
          tf.tensor(c.params.Dense_1),
          tf.squeeze(tf.tensor(c.params.Dense_2), [1]),
        ]);
        const [out, w] = layer.apply([q, v, k], {
          validLens: tf.tensor(c.valid_lens, undefined, 'int32'),
          returnAttentionScores: true,
        }) as tf.Tensor[];
        check(c.case, c.reference, backend, [
          [out, c.output],
          [w, c.attention_weights],
        ]);
      });
    });
  }

  for (const c of cases.filter((x) => x.case.startsWith('flax_dot'))) {
    it(`${c.case}: Flax DotProductAttention`, () => {
      tf.tidy(() => {
        const [q, k, v] = [tf.tensor(c.queries), tf.tensor(c.keys), tf.tensor(c.values)];
        const [out, w] = new DotProductAttention().apply([q, v, k], {
          validLens: tf.tensor(c.valid_lens, undefined, 'int32'),
          returnAttentionScores: true,
        }) as tf.Tensor[];
        check(c.case, c.reference, backend, [
          [out, c.output],
          [w, c.attention_weights],
        ]);
      });
    });
  }

  for (const c of cases.filter((x) => x.case.startsWith('torch_mha'))) {
    it(`${c.case}: torch.nn.MultiheadAttention via loadTorchMultiheadAttention`, () => {
      tf.tidy(() => {
        const heads = c.num_heads as number;
        const layer = new MultiHeadAttention({
          numHeads: heads,
          keyDim: c.embed_dim / heads,
          useBias: c.bias,
          useCausalMask: c.causal,
        });
        const [q, k, v] = [tf.tensor(c.query), tf.tensor(c.key), tf.tensor(c.value)];
        layer.apply([q, v, k]);
        loadTorchMultiheadAttention(layer, c.state_dict);
        const kwargs = c.lengths ? {validLens: tf.tensor1d(c.lengths, 'int32')} : {};
        const [out, w] = layer.apply([q, v, k], {
          ...kwargs,
          returnAttentionScores: true,
        }) as tf.Tensor[];
        check(c.case, c.reference, backend, [
          [out, c.output],
          [w, c.attention_weights],
        ]);
      });
    });
  }
});

describe('loadTorchMultiheadAttention errors', () => {
  it('names what does not fit', () => {
    tf.tidy(() => {
      const torchCase = cases.find((x) => x.case === 'torch_mha_key_padding') as Case;
      const unbuilt = new MultiHeadAttention({numHeads: 2, keyDim: 4});
      expect(() => loadTorchMultiheadAttention(unbuilt, torchCase.state_dict)).toThrow(
        /is not built; apply it to an input first/,
      );
      const wrong = new MultiHeadAttention({numHeads: 2, keyDim: 3});
      wrong.apply(tf.zeros([1, 2, 8]));
      expect(() => loadTorchMultiheadAttention(wrong, torchCase.state_dict)).toThrow(
        /embed_dim 6 to itself; the layer maps a query of 8 features to 8/,
      );
      const noBias = new MultiHeadAttention({numHeads: 2, keyDim: 4, useBias: false});
      noBias.apply(tf.zeros([1, 2, 8]));
      expect(() => loadTorchMultiheadAttention(noBias, torchCase.state_dict)).toThrow(
        /has biases but the layer has useBias=false/,
      );
      const ok = new MultiHeadAttention({numHeads: 2, keyDim: 4});
      ok.apply(tf.zeros([1, 2, 8]));
      expect(() =>
        loadTorchMultiheadAttention(ok, {...torchCase.state_dict, bias_k: [[[0]]]}),
      ).toThrow(/add_bias_kv/);
      expect(() =>
        loadTorchMultiheadAttention(ok, {...torchCase.state_dict, in_proj_weight: [[1, 2]]}),
      ).toThrow(/expected 'in_proj_weight' of shape \[24, 8\], received \[1, 2\]/);
    });
  });
});
