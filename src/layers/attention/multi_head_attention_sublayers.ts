/**
 * MultiHeadAttention's sublayer table: names here (and in tf-keras 2), in Keras 3's saved weights,
 * and where PyTorch's `nn.MultiheadAttention` keeps them. Build order, the Keras 3 weight mapping
 * and the torch loader all read it.
 */
import type {SublayerTable} from './multi_head_base';

/** In Keras' build order, which is also the weight order. */
export const MHA_SUBLAYERS: SublayerTable = [
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
