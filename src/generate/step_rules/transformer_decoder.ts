/**
 * keras-hub's TransformerDecoder in the compiled decoding step (generate/step_program.ts): the
 * decoder-only call, its sublayers compiled through their own rules.
 */
import type {GraphLayer} from '../../layers/engine/contract';
import type {TransformerDecoder} from '../../layers/hub/transformer_decoder';
import type {StepCompile, StepDecline, StepValue} from '../step_program';

/**
 * Causal self-attention with its residual and norm, then the feed-forward with its residual and
 * norm, pre- or post-norm (`normalizeFirst`); dropout is the identity at inference.
 */
export const compileTransformerDecoder: StepCompile = (layer, inputs, emit) => {
  const d = layer as TransformerDecoder;
  if (inputs.length !== 1 || d.hasCrossAttention) {
    return {declined: 'cross-attention (an encoder sequence) does not compile'};
  }
  if (!d.useCausalMask) return {declined: 'it is not causal'};
  const parts = d.selfAttentionParts;
  if (parts == null) return {declined: 'it is not built'};
  const {attention, attentionNorm, inner, outer, ffNorm} = parts;
  const one = (sub: GraphLayer, x: StepValue[]): StepValue | StepDecline => {
    const r = emit.layer(sub, x);
    return 'declined' in r ? {declined: `its ${sub.name}: ${r.declined}`} : r[0];
  };
  // x + f(LN(x)) (normalizeFirst) or LN(x + f(x))
  const residual = (
    x: StepValue,
    norm: GraphLayer,
    f: (y: StepValue) => StepValue | StepDecline,
  ): StepValue | StepDecline => {
    const h = d.normalizeFirst ? one(norm, [x]) : x;
    if ('declined' in h) return h;
    const y = f(h);
    if ('declined' in y) return y;
    const sum = emit.add(y, x);
    return d.normalizeFirst ? sum : one(norm, [sum]);
  };
  const attended = residual(inputs[0], attentionNorm, (h) => one(attention, [h]));
  if ('declined' in attended) return attended;
  const out = residual(attended, ffNorm, (h) => {
    const mid = one(inner, [h]);
    return 'declined' in mid ? mid : one(outer, [mid]);
  });
  return 'declined' in out ? out : [out];
};
