/**
 * The compile rule of the multi-head layers (MultiHeadAttention, keras-hub's
 * CachedMultiHeadAttention, GroupQueryAttention) for the compiled decoding step
 * (generate/step_program.ts): causal self-attention on one input `[batch, T, D]`, whose projections
 * are plain products (`abc,cde->abde`: kernels `[D, heads, headDim]`, read as `[D, heads *
 * headDim]`; the output `abcd,cde->abe`: `[heads, headDim, D']`, read as `[heads * headDim, D']`).
 * int8 projections (Keras 3's int8 EinsumDense, `quantize(model, 'int8')`) are Keras' int8
 * products: the input rows quantized over the contracted axes, the int8 kernel, the kernel scale
 * per output channel (`[1, 1, heads, headDim]` or `[1, 1, D']`, read flat). Gated attention and a
 * sliding window are declined.
 */
import type {EinsumDense} from '../../layers/core/einsum_dense';
import type {StepDecline, StepEmitter, StepValue} from '../step_program';
import type {GroupQueryAttention} from '../../layers/attention/group_query_attention';
import type {MultiHeadAttention} from '../../layers/attention/multi_head_attention';
import type {MultiHeadBase} from '../../layers/attention/multi_head_base';
import type {StepCompile} from '../step_program';
import {compileEinsumProduct, projectsIn, projectsOut} from './einsum_projection';

/** Query, key / value heads and the head size of a multi-head layer. */
export interface StepHeads {
  heads: number;
  kvHeads: number;
  headDim: number;
}

/** The ops of one call of a multi-head layer on `x` (see the file's notes). */
export function compileMultiHead(
  layer: MultiHeadBase,
  x: StepValue,
  emit: StepEmitter,
  {heads, kvHeads, headDim}: StepHeads,
): StepValue[] | StepDecline {
  if (layer.useGate) return {declined: 'gated attention (useGate) does not compile'};
  if (layer.slidingWindow != null) {
    return {declined: `a sliding window (${layer.slidingWindow}) does not compile`};
  }
  const d = layer.dense;
  const parts: Array<[string, EinsumDense | undefined, number[], (e: string) => boolean]> = [
    ['query', d.query, [x.width, heads, headDim], projectsIn],
    ['key', d.key, [x.width, kvHeads, headDim], projectsIn],
    ['value', d.value, [x.width, kvHeads, headDim], projectsIn],
    ['attention_output', d.attention_output, [heads, headDim, -1], projectsOut],
  ];
  const out: StepValue[] = [];
  for (const [name, dense, shape, fits] of parts) {
    if (dense == null) return {declined: `its ${name} projection is not built`};
    const input = name === 'attention_output' ? out[3] : x;
    const y = compileEinsumProduct(dense, input, emit, shape, fits, `its ${name} projection`);
    if ('declined' in y) return y;
    out.push(y);
    if (name === 'value') {
      const scale = 1 / Math.sqrt(headDim);
      out.push(emit.attention(out[0], out[1], out[2], {heads, kvHeads, headDim, scale}));
    }
  }
  return [out[4]];
}

/** MultiHeadAttention's rule (and keras-hub's CachedMultiHeadAttention's): keyDim-sized heads. */
export const compileMultiHeadAttention: StepCompile = (layer, [x], emit) => {
  const {numHeads, keyDim} = layer as MultiHeadAttention;
  return compileMultiHead(layer as MultiHeadAttention, x, emit, {
    heads: numHeads,
    kvHeads: numHeads,
    headDim: keyDim,
  });
};

/** GroupQueryAttention's rule: query heads grouped over fewer key / value heads. */
export const compileGroupQueryAttention: StepCompile = (layer, [x], emit) => {
  const {numQueryHeads, numKeyValueHeads, headDim} = layer as GroupQueryAttention;
  return compileMultiHead(layer as GroupQueryAttention, x, emit, {
    heads: numQueryHeads,
    kvHeads: numKeyValueHeads,
    headDim,
  });
};
