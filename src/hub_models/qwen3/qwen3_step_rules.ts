/**
 * How Qwen 3's own layers compile into `generate`'s compiled decoding step: Qwen's rules
 * (qwen/qwen_step_rules.ts), the attention's per-head query / key norms given to the shared core.
 */
import type {GraphLayer} from '../../layers/engine/contract';
import type {StepCompile} from '../../generate/step_program';
import {compileQwenNorm, qwenAttentionParts, qwenDecoderRule} from '../qwen/qwen_step_rules';
import type {Qwen3Attention} from './qwen3_attention';

/** Qwen 3's compile rules, by class name. */
export const QWEN3_STEP_RULES: Readonly<Record<string, StepCompile>> = {
  Qwen3LayerNorm: compileQwenNorm,
  Qwen3TransformerDecoder: qwenDecoderRule((d) => {
    const a = d.selfAttention as Qwen3Attention;
    return qwenAttentionParts(a, {
      queryNorm: a.queryNorm as GraphLayer | null,
      keyNorm: a.keyNorm as GraphLayer | null,
    });
  }),
};
