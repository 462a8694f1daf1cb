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
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {StepActivation} from '../../kernels/step_kernels_api';
import type {EinsumDense} from '../../layers/core/einsum_dense';
import type {
  StepDecline,
  StepEmitter,
  StepInt8Weight,
  StepValue,
  StepWeight,
} from '../step_program';
import type {GroupQueryAttention} from '../../layers/attention/group_query_attention';
import type {MultiHeadAttention} from '../../layers/attention/multi_head_attention';
import type {MultiHeadBase} from '../../layers/attention/multi_head_base';
import type {StepCompile} from '../step_program';

/** Query, key / value heads and the head size of a multi-head layer. */
export interface StepHeads {
  heads: number;
  kvHeads: number;
  headDim: number;
}

/** Whether `equation` contracts the last axis of a 3-D input into trailing kernel axes. */
function projectsIn(equation: string): boolean {
  const m = /^(\w)(\w)(\w),(\w)(\w)(\w)->(\w{4})$/.exec(equation.replace(/\s/g, ''));
  return m != null && m[3] === m[4] && m[7] === m[1] + m[2] + m[5] + m[6];
}

/** Whether `equation` contracts the two head axes of a 4-D input into the kernel's last axis. */
function projectsOut(equation: string): boolean {
  const m = /^(\w)(\w)(\w)(\w),(\w)(\w)(\w)->(\w{3})$/.exec(equation.replace(/\s/g, ''));
  return m != null && m[3] === m[5] && m[4] === m[6] && m[8] === m[1] + m[2] + m[7];
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
    if (dense?.kernel == null) return {declined: `its ${name} projection is not built`};
    const kernelShape = dense.kernel.shape as number[];
    if (
      !fits(dense.equation) ||
      kernelShape.length !== 3 ||
      !shape.every((s, i) => s < 0 || s === kernelShape[i])
    ) {
      return {
        declined:
          `its ${name} projection '${dense.equation}' with kernel [${kernelShape.join(', ')}] ` +
          `is not a product with a [${shape.map((s) => (s < 0 ? 'D' : s)).join(', ')}] kernel`,
      };
    }
    const act = emit.activation(dense.getConfig().activation);
    if (act !== StepActivation.None) return {declined: `its ${name} projection has an activation`};
    const int8 = dense.kernelScale != null;
    const kernel = int8
      ? emit.int8Weight(dense.kernel, dense.kernelScale as LayerVariable)
      : emit.weight(dense.kernel);
    const bias = dense.bias == null ? null : emit.weight(dense.bias);
    if ('declined' in kernel) return kernel;
    if (bias != null && 'declined' in bias) return bias;
    const input = name === 'attention_output' ? out[3] : x;
    const units = name === 'attention_output' ? kernelShape[2] : kernelShape[1] * kernelShape[2];
    out.push(
      int8
        ? emit.denseInt8(input, kernel as StepInt8Weight, bias, units, act)
        : emit.dense(input, kernel as StepWeight, bias, units, act),
    );
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
