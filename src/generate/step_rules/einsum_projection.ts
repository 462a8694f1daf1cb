/**
 * Keras' EinsumDense as a product of the compiled decoding step (generate/step_program.ts): the
 * equations that are one 2-D product of the step's rows `[rows, width]` — heads out
 * (`abc,cde->abde`, kernel `[D, heads, headDim]` read as `[D, heads * headDim]`), heads in
 * (`abcd,cde->abe`, kernel `[heads, headDim, D']` read as `[heads * headDim, D']`) and plain
 * (`abc,cd->abd`) — float32 or Keras 3's int8 (rows quantized, the kernel scale per output
 * channel read flat). Other layers (tfjs' Dense, QuantizedDense) compile through their own rule.
 */
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {StepActivation} from '../../kernels/step_kernels_api';
import type {EinsumDense} from '../../layers/core/einsum_dense';
import type {GraphLayer} from '../../layers/engine/contract';
import type {
  StepDecline,
  StepEmitter,
  StepInt8Weight,
  StepValue,
  StepWeight,
} from '../step_program';

/** Whether `equation` contracts the last axis of a 3-D input into trailing kernel axes. */
export function projectsIn(equation: string): boolean {
  const m = /^(\w)(\w)(\w),(\w)(\w)(\w)->(\w{4})$/.exec(equation.replace(/\s/g, ''));
  return m != null && m[3] === m[4] && m[7] === m[1] + m[2] + m[5] + m[6];
}

/** Whether `equation` contracts the two head axes of a 4-D input into the kernel's last axis. */
export function projectsOut(equation: string): boolean {
  const m = /^(\w)(\w)(\w)(\w),(\w)(\w)(\w)->(\w{3})$/.exec(equation.replace(/\s/g, ''));
  return m != null && m[3] === m[5] && m[4] === m[6] && m[8] === m[1] + m[2] + m[7];
}

/** Whether `equation` projects a 3-D input with a head-major kernel (`btd,ndh->btnh`: Gemma's). */
export function projectsHeadMajor(equation: string): boolean {
  const m = /^(\w)(\w)(\w),(\w)(\w)(\w)->(\w{4})$/.exec(equation.replace(/\s/g, ''));
  return m != null && m[3] === m[5] && m[7] === m[1] + m[2] + m[4] + m[6];
}

/** Whether `equation` is a plain product of the last axis of a 3-D input (`abc,cd->abd`). */
export function projectsPlain(equation: string): boolean {
  const m = /^(\w)(\w)(\w),(\w)(\w)->(\w{3})$/.exec(equation.replace(/\s/g, ''));
  return m != null && m[3] === m[4] && m[6] === m[1] + m[2] + m[5];
}

/** Whether a layer is an EinsumDense (by its tfjs class name). */
export function isEinsumDense(layer: GraphLayer): layer is GraphLayer & EinsumDense {
  return layer.getClassName() === 'EinsumDense';
}

/**
 * `act(x · kernel + bias)` of an EinsumDense whose equation is one 2-D product (see the file's
 * notes): `expected` the kernel's shape (-1: any size), `fits` its equation's form; `act` is
 * applied after the layer's own activation, which must then be linear. `what` names it in a
 * decline ("its query projection").
 */
export function compileEinsumProduct(
  dense: EinsumDense,
  x: StepValue,
  emit: StepEmitter,
  expected: readonly number[],
  fits: (equation: string) => boolean,
  what: string,
  act: StepActivation = StepActivation.None,
): StepValue | StepDecline {
  const kernelShape = dense.kernelShape();
  if (dense.kernel == null || kernelShape == null) return {declined: `${what} is not built`};
  if (dense.lora != null) return loraDeclined(dense, what);
  if (
    !fits(dense.equation) ||
    kernelShape.length !== expected.length ||
    !expected.every((s, i) => s < 0 || s === kernelShape[i])
  ) {
    return {
      declined:
        `${what} '${dense.equation}' with kernel [${kernelShape.join(', ')}] ` +
        `is not a product with a [${expected.map((s) => (s < 0 ? 'D' : s)).join(', ')}] kernel`,
    };
  }
  const own = emit.activation(dense.getConfig().activation);
  if (own == null || (own !== StepActivation.None && act !== StepActivation.None)) {
    return {declined: `${what} has an activation`};
  }
  const inner = fits === projectsOut ? 2 : 1;
  const units = kernelShape.slice(inner).reduce((a, b) => a * b, 1);
  const a = own === StepActivation.None ? act : own;
  const int4 = dense.int4Weights()[0];
  if (int4 != null) {
    // Keras' [rows, cols] view of a kernel whose contracted axes lead: the 2-D product's kernel
    const kernel = emit.int4Weight(int4);
    const bias = dense.bias == null ? null : emit.weight(dense.bias);
    if ('declined' in kernel) return kernel;
    if (bias != null && 'declined' in bias) return bias;
    return emit.denseInt4(x, kernel, bias, units, a);
  }
  const int8 = dense.kernelScale != null;
  const kernel = int8
    ? emit.int8Weight(dense.kernel, dense.kernelScale as LayerVariable)
    : emit.weight(dense.kernel);
  const bias = dense.bias == null ? null : emit.weight(dense.bias);
  if ('declined' in kernel) return kernel;
  if (bias != null && 'declined' in bias) return bias;
  return int8
    ? emit.denseInt8(x, kernel as StepInt8Weight, bias, units, a)
    : emit.dense(x, kernel as StepWeight, bias, units, a);
}

/**
 * A projection of `x` by any sublayer: an EinsumDense as one product (heads out, heads in or
 * plain), any other layer through its own rule (tfjs' Dense, QuantizedDense); then `act` (fused
 * into an EinsumDense's product).
 */
export function compileProjection(
  layer: GraphLayer,
  x: StepValue,
  emit: StepEmitter,
  what: string,
  act: StepActivation = StepActivation.None,
): StepValue | StepDecline {
  if (isEinsumDense(layer)) {
    const eq = layer.equation;
    if (projectsOut(eq)) {
      const k = layer.kernelShape() ?? undefined;
      if (k != null && k.length === 3 && k[0] * k[1] !== x.width) {
        return {
          declined: `${what} '${eq}' with kernel [${k.join(', ')}] does not take rows of ${x.width}`,
        };
      }
      return compileEinsumProduct(layer, x, emit, [-1, -1, -1], projectsOut, what, act);
    }
    if (projectsHeadMajor(eq)) return compileHeadMajor(layer, x, emit, what, act);
    return projectsIn(eq)
      ? compileEinsumProduct(layer, x, emit, [x.width, -1, -1], projectsIn, what, act)
      : compileEinsumProduct(layer, x, emit, [x.width, -1], projectsPlain, what, act);
  }
  const r = emit.layer(layer, [x]);
  if ('declined' in r) return {declined: `${what} (${layer.name}): ${r.declined}`};
  return act === StepActivation.None ? r[0] : emit.activate(r[0], act);
}

/** Why a layer with LoRA's adapters does not compile (the eager stepper applies them). */
const loraDeclined = (dense: EinsumDense, what: string): StepDecline => ({
  declined:
    `${what} '${dense.name}' has LoRA adapters (rank ${dense.lora?.rank}); the eager stepper ` +
    'applies them (mergeLora(model) merges them into the kernels, which compile)',
});

/**
 * A head-major EinsumDense (`btd,ndh->btnh`, kernel `[heads, D, headDim]`), float32 or Keras 3's
 * int8 (the rows quantized over D, the scale `[1, 1, heads, headDim]` one per output channel,
 * read flat in the output's order).
 */
function compileHeadMajor(
  dense: EinsumDense,
  x: StepValue,
  emit: StepEmitter,
  what: string,
  act: StepActivation,
): StepValue | StepDecline {
  if (dense.kernel == null) return {declined: `${what} is not built`};
  if (dense.lora != null) return loraDeclined(dense, what);
  if (dense.quantizationMode === 'int4') {
    // Keras views the kernel [heads, D, headDim] as [D, heads * headDim] by a reshape: no product
    return {declined: `${what} '${dense.equation}' is int4 (Keras' reshaped view is no product)`};
  }
  const shape = dense.kernel.shape as number[];
  if (shape.length !== 3 || shape[1] !== x.width) {
    return {
      declined: `${what} '${dense.equation}' with kernel [${shape.join(', ')}] does not take rows of ${x.width}`,
    };
  }
  const own = emit.activation(dense.getConfig().activation);
  if (own !== StepActivation.None) return {declined: `${what} has an activation`};
  if (dense.kernelScale != null) {
    const kernel = emit.int8Weight(dense.kernel, dense.kernelScale);
    const bias = dense.bias == null ? null : emit.weight(dense.bias);
    if ('declined' in kernel) return kernel;
    if (bias != null && 'declined' in bias) return bias;
    return emit.denseHeadsInt8(x, kernel, bias, shape[0], shape[2], act);
  }
  const kernel = emit.weight(dense.kernel);
  const bias = dense.bias == null ? null : emit.weight(dense.bias);
  if ('declined' in kernel) return kernel;
  if (bias != null && 'declined' in bias) return bias;
  const y = emit.denseHeads(x, kernel, bias, shape[0], shape[2]);
  return act === StepActivation.None ? y : emit.activate(y, act);
}
