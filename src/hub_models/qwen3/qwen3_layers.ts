/** Qwen 3's own layer classes (keras-hub's `Qwen3LayerNorm`, `Qwen3Attention`, `Qwen3TransformerDecoder`). */
import type {KerasHubLayerClass} from '../family';
import {Qwen3Attention} from './qwen3_attention';
import {Qwen3TransformerDecoder} from './qwen3_decoder';
import {Qwen3LayerNorm} from './qwen3_layer_norm';

/** The layer classes of the Qwen 3 family, registered with tfjs' serialization. */
export const QWEN3_LAYERS: readonly KerasHubLayerClass[] = [
  Qwen3LayerNorm,
  Qwen3Attention,
  Qwen3TransformerDecoder,
];
