/** Llama 3's own layer classes (keras-hub's `LlamaLayerNorm`, `LlamaAttention`, `LlamaTransformerDecoder`). */
import type {KerasHubLayerClass} from '../family';
import {LlamaAttention} from './llama_attention';
import {LlamaTransformerDecoder} from './llama_decoder';
import {LlamaLayerNorm} from './llama_layer_norm';

/** The layer classes of the Llama 3 family, registered with tfjs' serialization. */
export const LLAMA3_LAYERS: readonly KerasHubLayerClass[] = [
  LlamaLayerNorm,
  LlamaAttention,
  LlamaTransformerDecoder,
];
