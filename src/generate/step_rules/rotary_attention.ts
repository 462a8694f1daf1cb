/**
 * The shared core of rotary decoders' attention in the compiled decoding step
 * (generate/step_program.ts): keras-hub's Llama, Qwen, Qwen 3, Mistral, Gemma 3 and SmolLM3
 * attention layers compile through {@link compileRotaryAttention} with their own parts.
 */
import type {GraphLayer} from '../../layers/engine/contract';
import type {StepDecline, StepEmitter, StepValue} from '../step_program';
import {compileProjection} from './einsum_projection';

/** The parts of a rotary self-attention (keras-hub's order: project, norm, rope, attend, project). */
export interface RotaryAttentionParts {
  /** The query projection (`[rows, width]` to `[rows, heads * headDim]`): an EinsumDense, or a layer with a rule (Dense, QuantizedDense). */
  query: GraphLayer;
  /** The key projection (to `[rows, kvHeads * headDim]`). */
  key: GraphLayer;
  /** The value projection (to `[rows, kvHeads * headDim]`). */
  value: GraphLayer;
  /** The output projection (`[rows, heads * headDim]` to `[rows, width]`). */
  output: GraphLayer;
  /** A norm of the projected queries, compiled through its own rule on `[rows, heads * headDim]` (per head: its scale has headDim values). */
  queryNorm?: GraphLayer | null;
  /** A norm of the projected keys, as `queryNorm`. */
  keyNorm?: GraphLayer | null;
  /** Query heads. */
  heads: number;
  /** Key / value heads (a divisor of `heads`). */
  kvHeads: number;
  /** The size of each head. */
  headDim: number;
  /** The scores' scale (`1 / sqrt(headDim)` for most). */
  scale: number;
  /** The rotary inverse frequencies (`headDim / 2`), or null: no rotary embedding (SmolLM3's no-rope layers). */
  inverseFrequencies: Float32Array | null;
  /** A sliding window (StepAttention.window), or null. */
  window?: number | null;
  /** A logit soft cap (StepAttention.softCap), or null. */
  softCap?: number | null;
}

/**
 * Rotary causal self-attention of `x` over the step's cache: queries, keys and values projected,
 * the queries and keys normalised (when the parts have norms) and rotated at their positions
 * (when they have frequencies), attention over the cache (grouped heads, window, soft cap), the
 * output projected. Returns its output, or the first part's decline.
 */
export function compileRotaryAttention(
  parts: RotaryAttentionParts,
  x: StepValue,
  emit: StepEmitter,
): StepValue | StepDecline {
  const {heads, kvHeads, headDim, inverseFrequencies: freqs} = parts;
  const project = (
    layer: GraphLayer,
    norm: GraphLayer | null | undefined,
    n: number,
    what: string,
  ): StepValue | StepDecline => {
    const p = compileProjection(layer, x, emit, `its ${what} projection`);
    if ('declined' in p) return p;
    if (p.width !== n * headDim) {
      return {
        declined: `its ${what} projection gives rows of ${p.width}, expected ${n} x ${headDim}`,
      };
    }
    let y = p;
    if (norm != null) {
      const r = emit.layer(norm, [y]);
      if ('declined' in r) return {declined: `its ${what} norm (${norm.name}): ${r.declined}`};
      y = r[0];
    }
    return freqs == null ? y : emit.rope(y, n, headDim, freqs);
  };
  const q = project(parts.query, parts.queryNorm, heads, 'query');
  if ('declined' in q) return q;
  const k = project(parts.key, parts.keyNorm, kvHeads, 'key');
  if ('declined' in k) return k;
  const v = compileProjection(parts.value, x, emit, 'its value projection');
  if ('declined' in v) return v;
  const attended = emit.attention(q, k, v, {
    heads,
    kvHeads,
    headDim,
    scale: parts.scale,
    window: parts.window ?? null,
    softCap: parts.softCap ?? null,
  });
  return compileProjection(parts.output, attended, emit, 'its output projection');
}
