/**
 * Keras 3.15's int4 EinsumDense (`_int4_call`): the kernel viewed as Keras views it, `[rows,
 * cols]` (rows: the product of the kernel axes the equation contracts, cols: of the others; a
 * reshape, not a transpose), and the weight-only product on that view.
 */
import * as tf from '@tensorflow/tfjs-core';

import {einsum} from '../../ops/einsum';
import {int4MatMul, int4ToFloat} from '../../ops/int4_products';
import {reshapeTo} from '../../ops/reshape';
import type {EinsumInt8Plan} from './einsum_int8';
import {int4TensorsOf, Int4Weight} from './quantization';

/** An int4 kernel's `[rows, cols]` view and the shape the equation takes. */
export interface Int4KernelView {
  rows: number;
  cols: number;
  kernelShape: number[];
}

/** Keras' view of a kernel of `kernelShape`, its contracted axes from the int8 plan. */
export function int4KernelView(plan: EinsumInt8Plan, kernelShape: number[]): Int4KernelView {
  let rows = 1;
  let cols = 1;
  kernelShape.forEach((d, i) => {
    if (plan.kernelLayout.reduced.includes(i)) rows *= d;
    else cols *= d;
  });
  return {rows, cols, kernelShape};
}

/**
 * The int4 product without bias: a dense equation (its contracted kernel axes leading, `bound`
 * of them, so Keras' view is the 2-D product's kernel) a block of kernel rows at a time; any
 * other the whole kernel dequantized and reshaped, then the einsum.
 */
export function einsumInt4Product(
  equation: string,
  x: tf.Tensor,
  w: Int4Weight,
  view: Int4KernelView,
  bound: number | null,
): tf.Tensor {
  if (bound != null) {
    const free = x.shape.slice(0, x.rank - bound); // F
    const rows = reshapeTo(x, [-1, view.rows]) as tf.Tensor2D;
    const product = int4MatMul(rows, int4TensorsOf(w), w.layout, true); // [prod F, cols]
    return reshapeTo(product, [...free, ...view.kernelShape.slice(bound)]);
  }
  const kernel = reshapeTo(int4ToFloat(int4TensorsOf(w), w.layout), view.kernelShape);
  return einsum(equation, x, kernel);
}
