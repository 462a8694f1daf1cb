/**
 * tfjs-attention: attention layers for TensorFlow.js.
 *
 * Importing the package registers every layer class with `tf.serialization.registerClass`.
 */
import './layers/register';

export {MultiHeadAttention} from './layers/multi_head_attention';
export type {MultiHeadAttentionArgs} from './layers/multi_head_attention';
export {CachedMultiHeadAttention} from './layers/cached_multi_head_attention';
export {GroupQueryAttention} from './layers/group_query_attention';
export type {GroupQueryAttentionArgs} from './layers/group_query_attention';
export {Attention, DotProductAttention} from './layers/dot_product_attention';
export type {
  AttentionArgs,
  DotProductAttentionArgs,
  ScoreMode,
} from './layers/dot_product_attention';
export {AdditiveAttention} from './layers/additive_attention';
export type {AdditiveAttentionArgs} from './layers/additive_attention';
export {EinsumDense} from './layers/einsum_dense';
export {TokenAndPositionEmbedding} from './layers/token_and_position_embedding';
export {PositionEmbedding} from './layers/hub/position_embedding';
export type {PositionEmbeddingArgs} from './layers/hub/position_embedding';
export {ReversibleEmbedding} from './layers/hub/reversible_embedding';
export type {ReversibleEmbeddingArgs} from './layers/hub/reversible_embedding';
export {RotaryEmbedding} from './layers/hub/rotary_embedding';
export type {RotaryEmbeddingArgs} from './layers/hub/rotary_embedding';
export {SinePositionEncoding} from './layers/hub/sine_position_encoding';
export type {SinePositionEncodingArgs} from './layers/hub/sine_position_encoding';
export {TransformerEncoder} from './layers/hub/transformer_encoder';
export type {
  TransformerEncoderArgs,
  TransformerEncoderCallArgs,
} from './layers/hub/transformer_encoder';
export {TransformerDecoder} from './layers/hub/transformer_decoder';
export type {
  TransformerDecoderArgs,
  TransformerDecoderCallArgs,
} from './layers/hub/transformer_decoder';
export type {TransformerBlockArgs} from './layers/hub/transformer_block_args';
export {GetItem} from './layers/ops/get_item';
export type {GetItemArgs, IndexItem} from './layers/ops/get_item';
export type {EinsumDenseArgs} from './layers/einsum_dense';
export type {TokenAndPositionEmbeddingArgs} from './layers/token_and_position_embedding';
export {BaseAttention} from './layers/base_attention';
export type {
  AnyTensor,
  AttentionCallArgs,
  AttentionOutput,
  BaseAttentionArgs,
  CacheCallArgs,
  CachedOutput,
  EagerCallArgs,
  EagerInputs,
  ScoresOption,
  SymbolicCallArgs,
  SymbolicInputs,
} from './layers/base_attention';
export {layers} from './layers/factories';

export {einsum} from './ops/einsum';
export {simdKernelsReady} from './kernels/wasm_kernels';
export {causalMask} from './ops/masking';
export {maskedSoftmax, sequenceMask} from './ops/masked_softmax';

export {generate} from './generate/generate';
export {cachedDecodingRefusal} from './generate/graph_plan';
export type {GenerateOptions} from './generate/generate';
export type {SamplerName, SamplerOptions} from './generate/samplers';

export {fileSystem} from './io/file_system';
export type {FileSystemHandler, FileSystemOptions} from './io/file_system';
export {loadKerasModel} from './io/load_keras_model';
export {convertKerasArtifacts} from './interop/keras';
export {toKerasArtifacts} from './interop/keras_export';
export {toKeras3Artifacts} from './interop/keras3_export';
export type {Keras3ExportOptions} from './interop/keras3_export';
export {loadTorchMultiheadAttention} from './interop/torch';
export type {TorchStateDict} from './interop/torch';

export {attentionHeatmapSvg} from './viz/heatmap';
export type {HeatmapInput, HeatmapOptions} from './viz/heatmap';
export {attentionHeatmapPng, heatmapPngSize, writeAttentionHeatmapPng} from './viz/heatmap_png';
export type {HeatmapPngOptions} from './viz/heatmap_png';
