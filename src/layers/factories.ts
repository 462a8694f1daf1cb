/** tf.layers-style factory functions: `layers.multiHeadAttention({...})` and so on. */
import type {ScoresOption} from './engine/base_attention';
import {AdditiveAttention, AdditiveAttentionArgs} from './attention/additive_attention';
import {
  Attention,
  AttentionArgs,
  DotProductAttention,
  DotProductAttentionArgs,
} from './attention/dot_product_attention';
import {CachedMultiHeadAttention} from './hub/cached_multi_head_attention';
import {EinsumDense, EinsumDenseArgs} from './core/einsum_dense';
import {GroupQueryAttention, GroupQueryAttentionArgs} from './attention/group_query_attention';
import {MultiHeadAttention, MultiHeadAttentionArgs} from './attention/multi_head_attention';
import {TransformerDecoder, TransformerDecoderArgs} from './hub/transformer_decoder';
import {TransformerEncoder, TransformerEncoderArgs} from './hub/transformer_encoder';
import {
  TokenAndPositionEmbedding,
  TokenAndPositionEmbeddingArgs,
} from './hub/token_and_position_embedding';

/**
 * Factory functions in the style of `tf.layers`: `layers.multiHeadAttention(args)` is
 * `new MultiHeadAttention(args)`, and so on for each layer.
 */
export const layers = {
  /** Creates a {@link MultiHeadAttention}. */
  multiHeadAttention: <S extends boolean = false>(
    args: MultiHeadAttentionArgs & ScoresOption<S>,
  ): MultiHeadAttention<S> => new MultiHeadAttention<S>(args),
  /** Creates a {@link CachedMultiHeadAttention}. */
  cachedMultiHeadAttention: <S extends boolean = false>(
    args: MultiHeadAttentionArgs & ScoresOption<S>,
  ): CachedMultiHeadAttention<S> => new CachedMultiHeadAttention<S>(args),
  /** Creates a {@link GroupQueryAttention}. */
  groupQueryAttention: <S extends boolean = false>(
    args: GroupQueryAttentionArgs & ScoresOption<S>,
  ): GroupQueryAttention<S> => new GroupQueryAttention<S>(args),
  /** Creates a {@link DotProductAttention}. */
  dotProductAttention: <S extends boolean = false>(
    args: DotProductAttentionArgs & ScoresOption<S> = {},
  ): DotProductAttention<S> => new DotProductAttention<S>(args),
  /** Creates a {@link Attention}. */
  attention: <S extends boolean = false>(
    args: AttentionArgs & ScoresOption<S> = {},
  ): Attention<S> => new Attention<S>(args),
  /** Creates a {@link AdditiveAttention}. */
  additiveAttention: <S extends boolean = false>(
    args: AdditiveAttentionArgs & ScoresOption<S> = {},
  ): AdditiveAttention<S> => new AdditiveAttention<S>(args),
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
