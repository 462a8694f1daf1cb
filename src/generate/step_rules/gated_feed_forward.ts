/**
 * The shared gated feed-forward of rotary decoders in the compiled decoding step
 * (generate/step_program.ts): Llama's SwiGLU, Gemma's GELU-tanh gate, Qwen's, Mistral's.
 */
import type {StepActivation} from '../../kernels/step_kernels_api';
import type {GraphLayer} from '../../layers/engine/contract';
import type {StepDecline, StepEmitter, StepValue} from '../step_program';
import {compileProjection} from './einsum_projection';

/**
 * `down(act(gate(x)) * up(x))`: `gate`, `up` and `down` are EinsumDense products or layers with
 * a rule (tfjs' Dense, QuantizedDense); `activation` the gate's (fused into its product where it
 * is an EinsumDense, else an op after it). Returns the output, or the first part's decline.
 */
export function compileGatedFeedForward(
  gate: GraphLayer,
  up: GraphLayer,
  down: GraphLayer,
  activation: StepActivation,
  x: StepValue,
  emit: StepEmitter,
): StepValue | StepDecline {
  const g = compileProjection(gate, x, emit, 'its gate projection', activation);
  if ('declined' in g) return g;
  const u = compileProjection(up, x, emit, 'its up projection');
  if ('declined' in u) return u;
  if (g.width !== u.width) {
    return {declined: `its gate gives rows of ${g.width} and its up projection ${u.width}`};
  }
  return compileProjection(down, emit.mul(g, u), emit, 'its down projection');
}
