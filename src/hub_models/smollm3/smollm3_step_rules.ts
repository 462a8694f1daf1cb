/**
 * The compile rules of SmolLM3's layers for `generate`'s compiled decoding step
 * (generate/step_program.ts), registered through the family's `stepRules`: Keras'
 * RMSNormalization and the decoder block are Llama's (the same computation), SmolLM3Attention is
 * grouped-query attention rotated with the inverse frequencies it holds, or not rotated at all
 * on its no-rope layers.
 */
import type {StepCompile} from '../../generate/step_program';
import {compileRotaryAttention} from '../../generate/step_rules/rotary_attention';
import {LlamaTransformerDecoder} from '../llama3/llama_decoder';
import {LlamaLayerNorm} from '../llama3/llama_layer_norm';
import {LLAMA3_STEP_RULES} from '../llama3/llama3_step_rules';
import {RMSNormalization} from './rms_normalization';
import {SmolLM3Attention} from './smollm3_attention';
import {SmolLM3DecoderLayer} from './smollm3_decoder';

/** Grouped-query attention, rotary on the layers that have rope (inverseFrequencies null else). */
const compileSmolLM3Attention: StepCompile = (layer, [x], emit) => {
  const a = layer as SmolLM3Attention;
  const p = a.projections;
  if (p == null || (a.useRope && a.stepFrequencies == null)) return {declined: 'it is not built'};
  const out = compileRotaryAttention(
    {
      ...p,
      heads: a.numQueryHeads,
      kvHeads: a.numKeyValueHeads,
      headDim: p.headDim,
      scale: 1 / Math.sqrt(p.headDim),
      inverseFrequencies: a.stepFrequencies,
    },
    x,
    emit,
  );
  return 'declined' in out ? out : [out];
};

/** The SmolLM3 family's compile rules, by class name. */
export const SMOLLM3_STEP_RULES: Readonly<Record<string, StepCompile>> = {
  [RMSNormalization.className]: LLAMA3_STEP_RULES[LlamaLayerNorm.className],
  [SmolLM3Attention.className]: compileSmolLM3Attention,
  [SmolLM3DecoderLayer.className]: LLAMA3_STEP_RULES[LlamaTransformerDecoder.className],
};
