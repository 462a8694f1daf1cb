/** Gemma 3's own layer classes (keras-hub's RMSNormalization, CachedGemma3Attention, Gemma3DecoderBlock, Gemma3MeanPooling; the embedding scale; Keras' UnitNormalization). */
import type {KerasHubLayerClass} from '../family';
import {CachedGemma3Attention} from './gemma3_attention';
import {Gemma3DecoderBlock} from './gemma3_decoder_block';
import {Gemma3EmbeddingScale} from './gemma3_embedding_scale';
import {Gemma3MeanPooling} from './gemma3_mean_pooling';
import {Gemma3RMSNormalization} from './gemma3_rms_norm';
import {UnitNormalization} from './unit_normalization';

/** The layer classes of the Gemma 3 family, registered with tfjs' serialization. */
export const GEMMA3_LAYERS: readonly KerasHubLayerClass[] = [
  Gemma3RMSNormalization,
  CachedGemma3Attention,
  Gemma3DecoderBlock,
  Gemma3EmbeddingScale,
  Gemma3MeanPooling,
  UnitNormalization,
];
