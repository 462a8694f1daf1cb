/**
 * The compile rules of keras-hub's Mistral layers for `generate`'s compiled decoding step
 * (generate/step_program.ts), registered through the family's `stepRules`: the norm and the
 * decoder block are Llama's (the same computation; the decoder's sliding window is its
 * attention's), CachedMistralAttention is rotary grouped-query attention over a sliding window.
 */
import type {StepCompile} from '../../generate/step_program';
import {compileRotaryAttention} from '../../generate/step_rules/rotary_attention';
import {LlamaAttention} from '../llama3/llama_attention';
import {LlamaTransformerDecoder} from '../llama3/llama_decoder';
import {LlamaLayerNorm} from '../llama3/llama_layer_norm';
import {LLAMA3_STEP_RULES} from '../llama3/llama3_step_rules';
import {llamaInverseFrequencies} from '../llama3/llama_rope';
import {CachedMistralAttention} from './mistral_attention';
import {MistralTransformerDecoder} from './mistral_decoder';
import {MistralLayerNormalization} from './mistral_layer_norm';

/** Grouped-query rotary attention whose keys are limited to the last `slidingWindow` positions. */
const compileMistralAttention: StepCompile = (layer, [x], emit) => {
  const a = layer as CachedMistralAttention;
  if (!(a instanceof LlamaAttention)) return {declined: 'it is not a Mistral attention layer'};
  const p = a.projections;
  if (p == null) return {declined: 'it is not built'};
  const out = compileRotaryAttention(
    {
      ...p,
      heads: a.numQueryHeads,
      kvHeads: a.numKeyValueHeads,
      headDim: p.headDim,
      scale: 1 / Math.sqrt(p.headDim),
      inverseFrequencies: Float32Array.from(
        llamaInverseFrequencies(p.headDim, a.ropeMaxWavelength, a.rope),
      ),
      window: a.slidingWindow,
    },
    x,
    emit,
  );
  return 'declined' in out ? out : [out];
};

/** The Mistral family's compile rules, by class name. */
export const MISTRAL_STEP_RULES: Readonly<Record<string, StepCompile>> = {
  [MistralLayerNormalization.className]: LLAMA3_STEP_RULES[LlamaLayerNorm.className],
  [CachedMistralAttention.className]: compileMistralAttention,
  [MistralTransformerDecoder.className]: LLAMA3_STEP_RULES[LlamaTransformerDecoder.className],
};
