/** Qwen 2.5's own layer classes (keras-hub's `QwenLayerNorm`, `QwenAttention`, `QwenTransformerDecoder`). */
import type {KerasHubLayerClass} from '../family';
import {QwenAttention} from './qwen_attention';
import {QwenTransformerDecoder} from './qwen_decoder';
import {QwenLayerNorm} from './qwen_layer_norm';

/** The layer classes of the Qwen 2.5 family, registered with tfjs' serialization. */
export const QWEN_LAYERS: readonly KerasHubLayerClass[] = [
  QwenLayerNorm,
  QwenAttention,
  QwenTransformerDecoder,
];
