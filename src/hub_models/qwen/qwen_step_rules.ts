/**
 * How Qwen 2.5's own layers (and Qwen 3's, which subclass them) compile into `generate`'s compiled
 * decoding step: the RMS norm as one op (per head where its scale is one head wide), the decoder
 * block through the shared rotary attention and gated feed-forward cores.
 */
import type {GraphLayer} from '../../layers/engine/contract';
import {compileGatedFeedForward} from '../../generate/step_rules/gated_feed_forward';
import {compileRotaryAttention} from '../../generate/step_rules/rotary_attention';
import type {StepCompile, StepDecline, StepEmitter, StepValue} from '../../generate/step_program';
import type {QwenAttention} from './qwen_attention';
import type {QwenTransformerDecoder} from './qwen_decoder';
import {LlamaLayerNorm} from '../llama3/llama_layer_norm';
import {LLAMA3_STEP_RULES} from '../llama3/llama3_step_rules';

/**
 * `x / sqrt(mean(x²) + epsilon) * scale` over each part of the width as wide as the scale (the
 * whole width, or each head of Qwen 3's query / key norms): QwenLayerNorm is a LlamaLayerNorm, and
 * compiles by Llama's rule.
 */
export const compileQwenNorm: StepCompile = LLAMA3_STEP_RULES[LlamaLayerNorm.className];

/** The attention's parts for the shared core (its norms: Qwen 3's query / key norms, or none). */
export function qwenAttentionParts(
  a: QwenAttention,
  norms: {queryNorm: GraphLayer | null; keyNorm: GraphLayer | null} = {
    queryNorm: null,
    keyNorm: null,
  },
) {
  return {
    query: a.query as GraphLayer,
    key: a.key as GraphLayer,
    value: a.value as GraphLayer,
    output: a.outputDense as GraphLayer,
    ...norms,
    heads: a.numQueryHeads,
    kvHeads: a.numKeyValueHeads,
    headDim: a.headDim,
    scale: 1 / Math.sqrt(a.headDim),
    inverseFrequencies: a.inverseFrequencies(),
    window: a.window,
  };
}

/**
 * A Qwen decoder block: `h = x + attention(norm(x))`, then `h + down(silu(gate(n)) * up(n))` with
 * `n = norm(h)`; the attention over the block's cache (keras-hub's sliding window where set), the
 * padding mask left out of a step (as in the eager stepper). `attentionParts` gives the attention's
 * parts (Qwen 3 adds its norms).
 */
export function qwenDecoderRule(
  attentionParts: (d: QwenTransformerDecoder) => ReturnType<typeof qwenAttentionParts>,
): StepCompile {
  return (layer, inputs, emit: StepEmitter) => {
    const d = layer as QwenTransformerDecoder;
    if (inputs.length !== 1) {
      return {declined: `it is given ${inputs.length} inputs, not the sequence alone`};
    }
    const a = d.selfAttention;
    const subs = [d.selfAttentionNorm, a, d.feedForwardNorm, d.gate, d.up, d.down];
    if (subs.some((s) => s == null) || a == null || a.query == null) {
      return {declined: 'it is not built'};
    }
    const act = emit.activation(d.activation);
    if (act == null) return {declined: `its activation ${d.activation} has no kernel`};
    const one = (sub: GraphLayer, x: StepValue): StepValue | StepDecline => {
      const r = emit.layer(sub, [x]);
      return 'declined' in r ? {declined: `its ${sub.name}: ${r.declined}`} : r[0];
    };
    const x = inputs[0];
    const normed = one(d.selfAttentionNorm as GraphLayer, x);
    if ('declined' in normed) return normed;
    const attended = compileRotaryAttention(attentionParts(d), normed, emit);
    if ('declined' in attended) return {declined: `its self_attention: ${attended.declined}`};
    const h = emit.add(attended, x);
    const n = one(d.feedForwardNorm as GraphLayer, h);
    if ('declined' in n) return n;
    const fed = compileGatedFeedForward(
      d.gate as GraphLayer,
      d.up as GraphLayer,
      d.down as GraphLayer,
      act,
      n,
      emit,
    );
    return 'declined' in fed ? fed : [emit.add(fed, h)];
  };
}

/** Qwen 2.5's compile rules, by class name. */
export const QWEN_STEP_RULES: Readonly<Record<string, StepCompile>> = {
  QwenLayerNorm: compileQwenNorm,
  QwenTransformerDecoder: qwenDecoderRule((d) =>
    qwenAttentionParts(d.selfAttention as QwenAttention),
  ),
};
