/**
 * How the toy family's layers compile into `generate`'s compiled decoding step: the family's
 * `stepRules` (by class name, each a `StepCompile`, the public rule API), registered with the
 * family by `registerKerasHubFamily`; `generate`'s `onCompile` report then says it compiled.
 */
import type {GraphLayer, StepCompile, StepDecline, StepValue} from '../../../src';
import {ToyDecoder} from './toy_decoder';
import {ToyRMSNorm} from './toy_rms_norm';

/** `x / sqrt(mean(x²) + epsilon) * scale`: one kernel op. */
const compileRMSNorm: StepCompile = (layer, [x], emit) => {
  const {scale, epsilon} = layer as ToyRMSNorm;
  if (scale == null) return {declined: 'it is not built'};
  const w = emit.weight(scale);
  return 'declined' in w ? w : [emit.rmsNorm(x, w, epsilon)];
};

/**
 * `x + attention(norm(x))`, then `+ down(relu(up(norm(·))))`: each sublayer through its own rule
 * (the attention's writes this call's keys and values into the decoder's cache; the padding mask
 * is left out of a step, as in the eager stepper).
 */
const compileDecoder: StepCompile = (layer, inputs, emit) => {
  const d = layer as ToyDecoder;
  if (inputs.length !== 1)
    return {declined: `it is given ${inputs.length} inputs, not the sequence alone`};
  const parts = [
    d.selfAttentionNorm,
    d.selfAttention,
    d.feedforwardNorm,
    d.feedforwardIntermediate,
    d.feedforwardOutput,
  ];
  if (parts.some((p) => p == null)) return {declined: 'it is not built'};
  const [attentionNorm, attention, ffNorm, up, down] = parts as GraphLayer[];
  // one sublayer's output, or why it declined (named by the sublayer)
  const one = (sub: GraphLayer, x: StepValue): StepValue | StepDecline => {
    const r = emit.layer(sub, [x]);
    return 'declined' in r ? {declined: `its ${sub.name}: ${r.declined}`} : r[0];
  };
  // the sublayers in order, stopping at the first that declines
  const chain = (x: StepValue, subs: GraphLayer[]): StepValue | StepDecline =>
    subs.reduce<StepValue | StepDecline>((v, s) => ('declined' in v ? v : one(s, v)), x);
  const x = inputs[0];
  const attended = chain(x, [attentionNorm, attention]);
  if ('declined' in attended) return attended;
  const h = emit.add(attended, x);
  const fed = chain(h, [ffNorm, up, down]);
  return 'declined' in fed ? fed : [emit.add(fed, h)];
};

/** The family's compile rules, by class name. */
export const TOY_STEP_RULES: Readonly<Record<string, StepCompile>> = {
  [ToyDecoder.className]: compileDecoder,
  [ToyRMSNorm.className]: compileRMSNorm,
};
