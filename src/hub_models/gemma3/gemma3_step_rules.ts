/**
 * The compile rules of keras-hub's Gemma 3 layers for `generate`'s compiled decoding step
 * (generate/step_program.ts), registered through the family's `stepRules`: the RMS norm as
 * `x * (1 + scale)` (per head for the query / key norms), the embedding scale, the attention as
 * rotary grouped-query attention with its own rope base and scaling, sliding window and soft
 * cap, and the decoder block with its post norms and GELU-tanh gated feed-forward. The logits
 * are the ReversibleEmbedding's reverse call (the package's rule, float32 or int8).
 */
import {StepActivation} from '../../kernels/step_kernels_api';
import type {GraphLayer} from '../../layers/engine/contract';
import type {StepCompile, StepDecline, StepValue} from '../../generate/step_program';
import {compileGatedFeedForward} from '../../generate/step_rules/gated_feed_forward';
import {compileRotaryAttention} from '../../generate/step_rules/rotary_attention';
import {CachedGemma3Attention} from './gemma3_attention';
import {Gemma3DecoderBlock} from './gemma3_decoder_block';
import {Gemma3EmbeddingScale} from './gemma3_embedding_scale';
import {Gemma3RMSNormalization} from './gemma3_rms_norm';

/** `x / sqrt(mean(x²) + epsilon) * (1 + scale)`, over each part of the width its scale covers. */
const compileGemma3RMSNorm: StepCompile = (layer, [x], emit) => {
  const n = layer as Gemma3RMSNormalization;
  if (n.scale == null) return {declined: 'it is not built'};
  const w = emit.weight(n.scale);
  if ('declined' in w) return w;
  if (x.width % w.size !== 0) {
    return {declined: `its scale of ${w.size} values does not divide rows of ${x.width}`};
  }
  return [emit.rmsNorm(x, w, n.epsilon, {groups: x.width / w.size, offset: 1})];
};

/** `x * factor`. */
const compileGemma3EmbeddingScale: StepCompile = (layer, [x], emit) => [
  emit.scale(x, (layer as Gemma3EmbeddingScale).factor),
];

/** Grouped-query attention: query / key norms per head, its rope, window and soft cap. */
const compileGemma3Attention: StepCompile = (layer, [x], emit) => {
  const a = layer as CachedGemma3Attention;
  if (a.useBidirectionalAttention) return {declined: 'it attends bidirectionally'};
  const p = a.stepParts;
  if (p == null) return {declined: 'it is not built'};
  const out = compileRotaryAttention(
    {
      ...p,
      heads: a.numQueryHeads,
      kvHeads: a.numKeyValueHeads,
      headDim: a.headDim,
      scale: a.queryScale,
      inverseFrequencies: a.inverseFrequencies(),
      window: a.useSlidingWindowAttention ? a.slidingWindowSize : null,
      softCap: a.logitSoftCap,
    },
    x,
    emit,
  );
  return 'declined' in out ? out : [out];
};

/**
 * `h = x + postNorm(attention(preNorm(x)))`, then
 * `h + postFfwNorm(down(gelu_tanh(gate(preFfwNorm(h))) * up(preFfwNorm(h))))` (the post norms
 * when used; dropout is the identity at inference; the padding mask is left out of a step, as in
 * the eager stepper).
 */
const compileGemma3DecoderBlock: StepCompile = (layer, inputs, emit) => {
  const d = layer as Gemma3DecoderBlock;
  if (inputs.length !== 1) {
    return {declined: `it is given ${inputs.length} inputs, not the sequence alone`};
  }
  const parts = d.stepParts;
  if (parts == null) return {declined: 'it is not built'};
  const one = (sub: GraphLayer | null, v: StepValue): StepValue | StepDecline => {
    if (sub == null) return v;
    const r = emit.layer(sub, [v]);
    return 'declined' in r ? {declined: `its ${sub.name}: ${r.declined}`} : r[0];
  };
  const x = inputs[0];
  const normed = one(parts.preAttentionNorm, x);
  if ('declined' in normed) return normed;
  const attended = one(parts.attention, normed);
  if ('declined' in attended) return attended;
  const post = one(parts.postAttentionNorm, attended);
  if ('declined' in post) return post;
  const h = emit.add(x, post);
  const ffIn = one(parts.preFfwNorm, h);
  if ('declined' in ffIn) return ffIn;
  const {gate, up, down} = parts;
  const fed = compileGatedFeedForward(gate, up, down, StepActivation.GeluTanh, ffIn, emit);
  if ('declined' in fed) return fed;
  const out = one(parts.postFfwNorm, fed);
  return 'declined' in out ? out : [emit.add(h, out)];
};

/** The Gemma 3 family's compile rules, by class name. */
export const GEMMA3_STEP_RULES: Readonly<Record<string, StepCompile>> = {
  [Gemma3RMSNormalization.className]: compileGemma3RMSNorm,
  [Gemma3EmbeddingScale.className]: compileGemma3EmbeddingScale,
  [CachedGemma3Attention.className]: compileGemma3Attention,
  [Gemma3DecoderBlock.className]: compileGemma3DecoderBlock,
};
