/**
 * Entry of the browser bundle (`dist/tfjs-attention.min.js`, global `tfAttention`): everything
 * but the Node-only file-system helper. tfjs comes from the page's global `tf`.
 */
import './layers/register';

export {MultiHeadAttention} from './layers/multi_head_attention';
export {Attention, DotProductAttention} from './layers/dot_product_attention';
export {AdditiveAttention} from './layers/additive_attention';
export {EinsumDense} from './layers/einsum_dense';
export {CachedMultiHeadAttention} from './layers/cached_multi_head_attention';
export {GroupQueryAttention} from './layers/group_query_attention';
export {TokenAndPositionEmbedding} from './layers/token_and_position_embedding';
export {PositionEmbedding} from './layers/hub/position_embedding';
export {ReversibleEmbedding} from './layers/hub/reversible_embedding';
export {RotaryEmbedding} from './layers/hub/rotary_embedding';
export {SinePositionEncoding} from './layers/hub/sine_position_encoding';
export {TransformerEncoder} from './layers/hub/transformer_encoder';
export {TransformerDecoder} from './layers/hub/transformer_decoder';
export {GetItem} from './layers/ops/get_item';
export {BaseAttention} from './layers/base_attention';
export {layers} from './layers/factories';
export {einsum} from './ops/einsum';
export {generate} from './generate/generate';
export {cachedDecodingRefusal} from './generate/graph_plan';
export {causalMask} from './ops/masking';
export {maskedSoftmax, sequenceMask} from './ops/masked_softmax';
export {attentionHeatmapSvg} from './viz/heatmap';
export {convertKerasArtifacts, loadKerasModel} from './interop/keras';
export {loadTorchMultiheadAttention} from './interop/torch';
export {toKerasArtifacts} from './interop/keras_export';
export {simdKernelsReady} from './kernels/wasm_kernels';
