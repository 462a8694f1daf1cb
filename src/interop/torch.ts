/**
 * Loading PyTorch `nn.MultiheadAttention` weights into {@link MultiHeadAttention}.
 *
 * PyTorch keeps `in_proj_weight [3E, E]` (query, key, value stacked; `Linear` layout
 * `[out, in]`), `in_proj_bias [3E]`, `out_proj.weight [E, E]` and `out_proj.bias [E]`; with
 * `kdim`/`vdim` it keeps `q_proj_weight [E, E]`, `k_proj_weight [E, kdim]`, `v_proj_weight
 * [E, vdim]` instead. Head `h` uses features `h * d .. h * d + d - 1` (d = E / numHeads), so:
 *
 * - `query/kernel [E, H, d] = W_q.T.reshape(E, H, d)`, `query/bias [H, d] = b_q.reshape(H, d)`;
 *   likewise key and value;
 * - `attention_output/kernel [H, d, E] = out_proj.weight.T.reshape(H, d, E)`,
 *   `attention_output/bias = out_proj.bias`.
 *
 * Both scale the query by `1/sqrt(d)`. A `key_padding_mask` (true = ignore) is `validLens`;
 * `is_causal` with a causal `attn_mask` is `useCausalMask`. `add_bias_kv` / `add_zero_attn` have
 * no equivalent and are refused. The d2l `MultiHeadAttention` maps the same way, with
 * `W_q.weight`, `W_k.weight`, `W_v.weight`, `W_o.weight` as `q_proj_weight`, `k_proj_weight`,
 * `v_proj_weight`, `out_proj.weight`.
 */
import * as tf from '@tensorflow/tfjs-core';

import {MultiHeadAttention} from '../layers/multi_head_attention';

/** Nested arrays (e.g. from `tensor.tolist()` in Python) or tensors, by PyTorch parameter name. */
export type TorchStateDict = Record<string, tf.Tensor | number[] | number[][]>;

function asTensor(value: tf.Tensor | number[] | number[][], name: string): tf.Tensor {
  if (value instanceof tf.Tensor) return value;
  if (Array.isArray(value)) return tf.tensor(value as number[][]);
  throw new Error(`loadTorchMultiheadAttention: '${name}' must be a tensor or a nested array`);
}

function expectShape(t: tf.Tensor, shape: number[], name: string): void {
  if (t.rank !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    throw new Error(
      `loadTorchMultiheadAttention: expected '${name}' of shape [${shape.join(', ')}], received [${t.shape.join(', ')}]`,
    );
  }
}

/**
 * Copies a PyTorch `nn.MultiheadAttention` state dict into a built MultiHeadAttention with
 * `numHeads = num_heads`, `keyDim = valueDim = embed_dim / num_heads`, `useBias = bias` and the
 * default output size (the query's last dim, `embed_dim`).
 *
 * ```js
 * const mha = new MultiHeadAttention({numHeads: 4, keyDim: 8}); // embed_dim 32
 * mha.apply(tf.zeros([1, 1, 32]));                               // build
 * loadTorchMultiheadAttention(mha, stateDict);                   // from torch's state_dict()
 * ```
 */
export function loadTorchMultiheadAttention(
  layer: MultiHeadAttention,
  state: TorchStateDict,
): void {
  if (!(layer instanceof MultiHeadAttention)) {
    throw new Error('loadTorchMultiheadAttention: expected a MultiHeadAttention layer');
  }
  if (!layer.built || layer.queryDense?.kernel == null) {
    throw new Error(
      `loadTorchMultiheadAttention: layer '${layer.name}' is not built; apply it to an input first`,
    );
  }
  for (const name of ['bias_k', 'bias_v']) {
    if (name in state) {
      throw new Error(
        `loadTorchMultiheadAttention: '${name}' (add_bias_kv=True) has no equivalent in MultiHeadAttention`,
      );
    }
  }
  const H = layer.numHeads;
  const d = layer.keyDim;
  const E = H * d;
  if (layer.valueDim !== d) {
    throw new Error(
      `loadTorchMultiheadAttention: torch uses one head size; the layer has keyDim ${d} but valueDim ${layer.valueDim}`,
    );
  }
  const [dq] = layer.queryDense.kernel.shape as number[];
  const [dk] = (layer.keyDense?.kernel?.shape as number[]) ?? [];
  const [dv] = (layer.valueDense?.kernel?.shape as number[]) ?? [];
  const outDim = (layer.outputDense?.kernel?.shape as number[])[2];
  if (dq !== E || outDim !== E) {
    throw new Error(
      `loadTorchMultiheadAttention: torch maps embed_dim ${E} to itself; the layer maps a query of ${dq} features to ${outDim}`,
    );
  }
  const values = tf.tidy(() => {
    let wq: tf.Tensor;
    let wk: tf.Tensor;
    let wv: tf.Tensor;
    if (state.in_proj_weight !== undefined) {
      const w = asTensor(state.in_proj_weight, 'in_proj_weight');
      expectShape(w, [3 * E, E], 'in_proj_weight');
      [wq, wk, wv] = tf.split(w, 3, 0);
    } else {
      for (const name of ['q_proj_weight', 'k_proj_weight', 'v_proj_weight']) {
        if (state[name] === undefined) {
          throw new Error(
            `loadTorchMultiheadAttention: expected 'in_proj_weight' or '${name}' in the state dict`,
          );
        }
      }
      wq = asTensor(state.q_proj_weight, 'q_proj_weight');
      wk = asTensor(state.k_proj_weight, 'k_proj_weight');
      wv = asTensor(state.v_proj_weight, 'v_proj_weight');
    }
    expectShape(wq, [E, dq], 'q_proj_weight');
    expectShape(wk, [E, dk], 'k_proj_weight');
    expectShape(wv, [E, dv], 'v_proj_weight');
    const wo = asTensor(state['out_proj.weight'], 'out_proj.weight');
    expectShape(wo, [E, E], 'out_proj.weight');
    const kernel = (w: tf.Tensor) => tf.reshape(tf.transpose(w), [w.shape[1] as number, H, d]); // [in, H, d]
    const weights: tf.Tensor[] = [];
    const hasBias = state.in_proj_bias !== undefined || state['out_proj.bias'] !== undefined;
    if (hasBias !== layer.useBias) {
      throw new Error(
        `loadTorchMultiheadAttention: the state dict ${hasBias ? 'has' : 'has no'} biases but the layer has useBias=${layer.useBias}`,
      );
    }
    let bq: tf.Tensor | null = null;
    let bk: tf.Tensor | null = null;
    let bv: tf.Tensor | null = null;
    if (hasBias) {
      const b = asTensor(state.in_proj_bias, 'in_proj_bias');
      expectShape(b, [3 * E], 'in_proj_bias');
      [bq, bk, bv] = tf.split(b, 3, 0).map((x) => tf.reshape(x, [H, d]));
    }
    for (const [w, b] of [
      [wq, bq],
      [wk, bk],
      [wv, bv],
    ] as Array<[tf.Tensor, tf.Tensor | null]>) {
      weights.push(kernel(w));
      if (b != null) weights.push(b);
    }
    weights.push(tf.reshape(tf.transpose(wo), [H, d, E]));
    if (hasBias) {
      const bo = asTensor(state['out_proj.bias'], 'out_proj.bias');
      expectShape(bo, [E], 'out_proj.bias');
      weights.push(bo.clone());
    }
    return weights;
  });
  if (layer.useGate) {
    tf.dispose(values);
    throw new Error(
      'loadTorchMultiheadAttention: torch has no gated attention; use a layer with useGate=false',
    );
  }
  layer.setWeights(values);
  tf.dispose(values);
}
