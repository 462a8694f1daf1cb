/** tf.layers-style factory functions: `layers.multiHeadAttention({...})` and so on. */
import {AdditiveAttention, AdditiveAttentionArgs} from './additive_attention';
import {
  Attention,
  AttentionArgs,
  DotProductAttention,
  DotProductAttentionArgs,
} from './dot_product_attention';
import {CachedMultiHeadAttention} from './cached_multi_head_attention';
import {EinsumDense, EinsumDenseArgs} from './einsum_dense';
import {GroupQueryAttention, GroupQueryAttentionArgs} from './group_query_attention';
import {MultiHeadAttention, MultiHeadAttentionArgs} from './multi_head_attention';
import {TransformerDecoder, TransformerDecoderArgs} from './hub/transformer_decoder';
import {TransformerEncoder, TransformerEncoderArgs} from './hub/transformer_encoder';
import {
  TokenAndPositionEmbedding,
  TokenAndPositionEmbeddingArgs,
} from './token_and_position_embedding';

export const layers = {
  multiHeadAttention: (args: MultiHeadAttentionArgs): MultiHeadAttention =>
    new MultiHeadAttention(args),
  cachedMultiHeadAttention: (args: MultiHeadAttentionArgs): CachedMultiHeadAttention =>
    new CachedMultiHeadAttention(args),
  groupQueryAttention: (args: GroupQueryAttentionArgs): GroupQueryAttention =>
    new GroupQueryAttention(args),
  dotProductAttention: (args: DotProductAttentionArgs = {}): DotProductAttention =>
    new DotProductAttention(args),
  attention: (args: AttentionArgs = {}): Attention => new Attention(args),
  additiveAttention: (args: AdditiveAttentionArgs = {}): AdditiveAttention =>
    new AdditiveAttention(args),
  einsumDense: (args: EinsumDenseArgs): EinsumDense => new EinsumDense(args),
  tokenAndPositionEmbedding: (args: TokenAndPositionEmbeddingArgs): TokenAndPositionEmbedding =>
    new TokenAndPositionEmbedding(args),
  transformerEncoder: (args: TransformerEncoderArgs): TransformerEncoder =>
    new TransformerEncoder(args),
  transformerDecoder: (args: TransformerDecoderArgs): TransformerDecoder =>
    new TransformerDecoder(args),
};
