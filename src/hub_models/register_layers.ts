/**
 * The built-in families' own layer classes registered with tfjs' serialization at import (as
 * layers/register.ts registers the package's generic layers), so that a saved tfjs model holding
 * them loads without a preset having been read. The families themselves are registered when the
 * registry is first used (registry.ts).
 */
import * as tf from '@tensorflow/tfjs-core';

import type {KerasHubLayerClass} from './family';
import {LLAMA3_LAYERS} from './llama3/llama3_layers';
import {QWEN_LAYERS} from './qwen/qwen_layers';
import {QWEN3_LAYERS} from './qwen3/qwen3_layers';
import {MISTRAL_LAYERS} from './mistral/mistral_layers';
import {SMOLLM3_LAYERS} from './smollm3/smollm3_layers';
import {GEMMA3_LAYERS} from './gemma3/gemma3_layers';

/** Every layer class of the built-in families (Llama 3's; GPT-2 and BERT use generic layers). */
export const FAMILY_LAYER_CLASSES: readonly KerasHubLayerClass[] = [
  ...LLAMA3_LAYERS,
  ...QWEN_LAYERS,
  ...QWEN3_LAYERS,
  ...MISTRAL_LAYERS,
  ...SMOLLM3_LAYERS,
  ...GEMMA3_LAYERS,
];

for (const cls of FAMILY_LAYER_CLASSES) tf.serialization.registerClass(cls);
