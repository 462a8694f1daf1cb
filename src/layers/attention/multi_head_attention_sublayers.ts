/**
 * MultiHeadAttention's sublayers in one table: their names in this package (and tf-keras 2,
 * which uses the same), in Keras 3's saved weights, and where PyTorch's `nn.MultiheadAttention`
 * keeps them. Build order, the Keras 3 weight mapping and the torch loader all read this table.
 */

export type MhaSublayer = 'query' | 'key' | 'gate' | 'value' | 'attention_output';

export interface MhaSublayerNames {
  /** Sublayer name here and in tf-keras 2 (weights `<mha>/<name>/kernel`, `.../bias`). */
  name: MhaSublayer;
  /** Keras 3's attribute, the folder of its weights (`layers/<mha>/<keras3>/vars/0`). */
  keras3: string;
  /**
   * PyTorch: the `Linear`-layout weight `[out, in]` and bias (`out_proj.*`), or the slice of the
   * packed `in_proj_weight [3E, E]` / `in_proj_bias [3E]` with its unpacked name; null: none.
   */
  torch: {packed: number; weight: string} | {packed: null; weight: string; bias: string} | null;
}

/** In Keras' build order, which is also the weight order. */
export const MHA_SUBLAYERS: readonly MhaSublayerNames[] = [
  {name: 'query', keras3: 'query_dense', torch: {packed: 0, weight: 'q_proj_weight'}},
  {name: 'key', keras3: 'key_dense', torch: {packed: 1, weight: 'k_proj_weight'}},
  {name: 'gate', keras3: '_gate_dense', torch: null},
  {name: 'value', keras3: 'value_dense', torch: {packed: 2, weight: 'v_proj_weight'}},
  {
    name: 'attention_output',
    keras3: 'output_dense',
    torch: {packed: null, weight: 'out_proj.weight', bias: 'out_proj.bias'},
  },
];
