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
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {MultiHeadAttention} from '../layers/attention/multi_head_attention';
import {MHA_SUBLAYERS} from '../layers/attention/multi_head_attention_sublayers';

/** Nested arrays (e.g. from `tensor.tolist()` in Python) or tensors, by PyTorch parameter name. */
export type TorchStateDict = Record<string, tf.Tensor | number[] | number[][]>;

function fail(message: string): never {
  throw new Error(`loadTorchMultiheadAttention: ${message}`);
}

/** The float32 values of a state-dict entry (a tensor or nested array), checked for shape. */
function values(state: TorchStateDict, name: string, shape: number[]): tf.Tensor {
  const value = state[name];
  if (value === undefined) fail(`expected '${name}' in the state dict`);
  let t: tf.Tensor;
  if (value instanceof tf.Tensor) {
    if (value.dtype !== 'float32')
      fail(`expected '${name}' to be float32, received ${value.dtype}`);
    t = value;
  } else if (Array.isArray(value)) {
    t = tf.tensor(value as number[][], undefined, 'float32');
  } else {
    fail(`'${name}' must be a tensor or a nested array, received ${typeof value}`);
  }
  if (t.rank !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
    const got = `[${t.shape.join(', ')}]`;
    if (t !== value) t.dispose();
    fail(`expected '${name}' of shape [${shape.join(', ')}], received ${got}`);
  }
  return t;
}

/**
 * Copies a PyTorch `nn.MultiheadAttention` state dict into a built MultiHeadAttention with
 * `numHeads = num_heads`, `keyDim = valueDim = embed_dim / num_heads`, `useBias = bias` and the
 * default output size (the query's last dim, `embed_dim`). Every entry is checked before any
 * weight is written: on an error the layer is unchanged.
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
  if (!(layer instanceof MultiHeadAttention)) fail('expected a MultiHeadAttention layer');
  if (!layer.built || layer.queryDense?.kernel == null) {
    fail(`layer '${layer.name}' is not built; apply it to an input first`);
  }
  if (state == null || typeof state !== 'object') fail('expected a state dict object');
  for (const name of ['bias_k', 'bias_v']) {
    if (name in state) fail(`'${name}' (add_bias_kv=True) has no equivalent in MultiHeadAttention`);
  }
  if (layer.useGate) fail('torch has no gated attention; use a layer with useGate=false');
  const H = layer.numHeads;
  const d = layer.keyDim;
  const E = H * d;
  if (layer.valueDim !== d) {
    fail(`torch uses one head size; the layer has keyDim ${d} but valueDim ${layer.valueDim}`);
  }
  const weights = layer.weightPaths();
  const inDim = (sub: string) => (weights.get(`${sub}/kernel`) as LayerVariable).shape[0] as number;
  const outDim = (weights.get('attention_output/kernel') as LayerVariable).shape[2] as number;
  if (inDim('query') !== E || outDim !== E) {
    fail(
      `torch maps embed_dim ${E} to itself; the layer maps a query of ${inDim('query')} features to ${outDim}`,
    );
  }
  const packed = state.in_proj_weight !== undefined;
  const hasBias = state.in_proj_bias !== undefined || state['out_proj.bias'] !== undefined;
  if (hasBias !== layer.useBias) {
    fail(
      `the state dict ${hasBias ? 'has' : 'has no'} biases but the layer has useBias=${layer.useBias}`,
    );
  }
  const expected = new Set([
    'out_proj.weight',
    ...(hasBias ? ['in_proj_bias', 'out_proj.bias'] : []),
  ]);
  for (const sub of MHA_SUBLAYERS) {
    if (sub.torch?.packed != null) expected.add(packed ? 'in_proj_weight' : sub.torch.weight);
  }
  const unknown = Object.keys(state).filter((k) => !expected.has(k));
  if (unknown.length > 0) {
    fail(
      `unknown state-dict entries ${unknown.map((k) => `'${k}'`).join(', ')}; expected ${[...expected].join(', ')}`,
    );
  }
  // every value, by weight path, computed before anything is written
  const updates = tf.tidy(() => {
    const out: Record<string, tf.Tensor> = {};
    const inProj = packed ? tf.split(values(state, 'in_proj_weight', [3 * E, E]), 3, 0) : null;
    const inBias = hasBias ? tf.split(values(state, 'in_proj_bias', [3 * E]), 3, 0) : null;
    for (const sub of MHA_SUBLAYERS) {
      if (sub.torch == null) continue;
      if (sub.torch.packed != null) {
        const i = sub.torch.packed;
        const w = inProj ? inProj[i] : values(state, sub.torch.weight, [E, inDim(sub.name)]); // [E, in]
        out[`${sub.name}/kernel`] = tf.reshape(tf.transpose(w), [inDim(sub.name), H, d]); // [in, H, d]
        if (inBias) out[`${sub.name}/bias`] = tf.reshape(inBias[i], [H, d]); // [H, d]
      } else {
        const w = values(state, sub.torch.weight, [E, E]); // [E (out), H * d (in)]
        out[`${sub.name}/kernel`] = tf.reshape(tf.transpose(w), [H, d, E]); // [H, d, E]
        if (hasBias) out[`${sub.name}/bias`] = tf.clone(values(state, sub.torch.bias, [E]));
      }
    }
    return out;
  });
  const missing = [...weights.keys()].filter((p) => updates[p] === undefined);
  if (missing.length > 0) {
    tf.dispose(Object.values(updates));
    fail(`no torch value for the layer's weights ${missing.join(', ')}`);
  }
  for (const [p, t] of Object.entries(updates)) (weights.get(p) as LayerVariable).write(t);
  tf.dispose(Object.values(updates));
}
