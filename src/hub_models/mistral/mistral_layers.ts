/** Mistral's own layer classes (keras-hub's `MistralLayerNormalization`, `CachedMistralAttention`, `MistralTransformerDecoder`). */
import type {KerasHubLayerClass} from '../family';
import {CachedMistralAttention} from './mistral_attention';
import {MistralTransformerDecoder} from './mistral_decoder';
import {MistralLayerNormalization} from './mistral_layer_norm';

/** The layer classes of the Mistral family, registered with tfjs' serialization. */
export const MISTRAL_LAYERS: readonly KerasHubLayerClass[] = [
  MistralLayerNormalization,
  CachedMistralAttention,
  MistralTransformerDecoder,
];
