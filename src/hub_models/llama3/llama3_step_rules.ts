/**
 * The compile rules of keras-hub's Llama layers for `generate`'s compiled decoding step
 * (generate/step_program.ts), registered through the family's `stepRules`: LlamaLayerNorm as an
 * RMS norm, LlamaAttention as rotary grouped-query attention (its frequencies with Llama 3.1's
 * smoothing), LlamaTransformerDecoder as the pre-norm block with its SwiGLU feed-forward. The
 * logits are the ReversibleEmbedding's reverse call (the package's rule: tied or untied, float32
 * or int8); int8 projections (`quantize(model, 'int8')`, Keras int8 presets) compile as Keras'
 * int8 products.
 */
import {StepActivation} from '../../kernels/step_kernels_api';
import type {GraphLayer} from '../../layers/engine/contract';
import type {StepCompile, StepDecline, StepValue} from '../../generate/step_program';
import {compileGatedFeedForward} from '../../generate/step_rules/gated_feed_forward';
import {compileRotaryAttention} from '../../generate/step_rules/rotary_attention';
import {LlamaAttention} from './llama_attention';
import {LlamaTransformerDecoder} from './llama_decoder';
import {LlamaLayerNorm} from './llama_layer_norm';
import {llamaInverseFrequencies} from './llama_rope';

/**
 * `x / sqrt(mean(x²) + epsilon) * scale`, over each part of the width its scale covers (the whole
 * width, or per head where a family norms its projected queries and keys with it).
 */
const compileLlamaLayerNorm: StepCompile = (layer, [x], emit) => {
  const n = layer as LlamaLayerNorm;
  if (n.scale == null) return {declined: 'it is not built'};
  const w = emit.weight(n.scale);
  if ('declined' in w) return w;
  if (x.width % w.size !== 0) {
    return {declined: `its scale of ${w.size} values does not divide rows of ${x.width}`};
  }
  return [emit.rmsNorm(x, w, n.epsilon, {groups: x.width / w.size})];
};

/** Grouped-query attention with keras-hub's rotary embedding (Llama 3.1's smoothing included). */
const compileLlamaAttention: StepCompile = (layer, [x], emit) => {
  const a = layer as LlamaAttention;
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
    },
    x,
    emit,
  );
  return 'declined' in out ? out : [out];
};

/**
 * `h = x + attention(norm(x))`, then `h + down(silu(gate(norm(h))) * up(norm(h)))` (dropout is
 * the identity at inference; the padding mask is left out of a step, as in the eager stepper).
 */
const compileLlamaDecoder: StepCompile = (layer, inputs, emit) => {
  const d = layer as LlamaTransformerDecoder;
  if (inputs.length !== 1) {
    return {declined: `it is given ${inputs.length} inputs, not the sequence alone`};
  }
  const parts = d.stepParts;
  if (parts == null) return {declined: 'it is not built'};
  const one = (sub: GraphLayer, v: StepValue): StepValue | StepDecline => {
    const r = emit.layer(sub, [v]);
    return 'declined' in r ? {declined: `its ${sub.name}: ${r.declined}`} : r[0];
  };
  const x = inputs[0];
  const normed = one(parts.attentionNorm, x);
  if ('declined' in normed) return normed;
  const attended = one(parts.attention, normed);
  if ('declined' in attended) return attended;
  const h = emit.add(x, attended);
  const ffIn = one(parts.ffNorm, h);
  if ('declined' in ffIn) return ffIn;
  const {gate, up, down} = parts;
  const fed = compileGatedFeedForward(gate, up, down, StepActivation.Silu, ffIn, emit);
  return 'declined' in fed ? fed : [emit.add(h, fed)];
};

/** The Llama family's compile rules, by class name. */
export const LLAMA3_STEP_RULES: Readonly<Record<string, StepCompile>> = {
  [LlamaLayerNorm.className]: compileLlamaLayerNorm,
  [LlamaAttention.className]: compileLlamaAttention,
  [LlamaTransformerDecoder.className]: compileLlamaDecoder,
};
