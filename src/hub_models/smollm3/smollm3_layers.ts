/** SmolLM3's own layer classes (keras-hub's `SmolLM3Attention`, `SmolLM3DecoderLayer`, `SmolLM3RotaryEmbedding`; Keras' `RMSNormalization`). */
import type {KerasHubLayerClass} from '../family';
import {RMSNormalization} from './rms_normalization';
import {SmolLM3Attention} from './smollm3_attention';
import {SmolLM3DecoderLayer} from './smollm3_decoder';
import {SmolLM3RotaryEmbedding} from './smollm3_rotary_embedding';

/** The layer classes of the SmolLM3 family, registered with tfjs' serialization. */
export const SMOLLM3_LAYERS: readonly KerasHubLayerClass[] = [
  RMSNormalization,
  SmolLM3RotaryEmbedding,
  SmolLM3Attention,
  SmolLM3DecoderLayer,
];
