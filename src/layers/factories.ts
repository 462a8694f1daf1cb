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

/**
 * Factory functions in the style of `tf.layers`: `layers.multiHeadAttention(args)` is
 * `new MultiHeadAttention(args)`, and so on for each layer.
 */
export const layers = {
  /** Creates a {@link MultiHeadAttention}. */
  multiHeadAttention: (args: MultiHeadAttentionArgs): MultiHeadAttention =>
    new MultiHeadAttention(args),
  /** Creates a {@link CachedMultiHeadAttention}. */
  cachedMultiHeadAttention: (args: MultiHeadAttentionArgs): CachedMultiHeadAttention =>
    new CachedMultiHeadAttention(args),
  /** Creates a {@link GroupQueryAttention}. */
  groupQueryAttention: (args: GroupQueryAttentionArgs): GroupQueryAttention =>
    new GroupQueryAttention(args),
  /** Creates a {@link DotProductAttention}. */
  dotProductAttention: (args: DotProductAttentionArgs = {}): DotProductAttention =>
    new DotProductAttention(args),
  /** Creates a {@link Attention}. */
  attention: (args: AttentionArgs = {}): Attention => new Attention(args),
  /** Creates a {@link AdditiveAttention}. */
  additiveAttention: (args: AdditiveAttentionArgs = {}): AdditiveAttention =>
    new AdditiveAttention(args),
  /** Creates a {@link EinsumDense}. */
  einsumDense: (args: EinsumDenseArgs): EinsumDense => new EinsumDense(args),
  /** Creates a {@link TokenAndPositionEmbedding}. */
  tokenAndPositionEmbedding: (args: TokenAndPositionEmbeddingArgs): TokenAndPositionEmbedding =>
    new TokenAndPositionEmbedding(args),
  /** Creates a {@link TransformerEncoder}. */
  transformerEncoder: (args: TransformerEncoderArgs): TransformerEncoder =>
    new TransformerEncoder(args),
  /** Creates a {@link TransformerDecoder}. */
  transformerDecoder: (args: TransformerDecoderArgs): TransformerDecoder =>
    new TransformerDecoder(args),
};
