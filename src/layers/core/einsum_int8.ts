/**
 * Keras 3.15's int8 EinsumDense for any equation it quantizes: which axes of the input and the
 * kernel are quantized together, the shape of the stored `kernel_scale`, how a scale is laid out
 * against the output, and the exact int8 product. A port of `_analyze_quantization_info`,
 * `_get_kernel_scale_shape` and `_adjust_scale_for_quant` (keras/src/layers/core/einsum_dense.py),
 * quirks included, so the scale a Keras file holds is the one this computes.
 */
import * as tf from '@tensorflow/tfjs-core';

import {absMaxQuantize, int8BatchMatMul, int8ToFloat, isInt8Tensor} from '../../ops/int8';

/** How one operand's abs-max scale (reduced axes kept as 1) is moved to the output's layout. */
export interface ScaleLayout {
  /** The operand's axes the quantizer reduces (labels not in the output). */
  reduced: number[];
  /** Keras' `ops.transpose` of the kept-dims scale. */
  transpose: number[];
  /** Keras' `ops.expand_dims` axes after the transpose. */
  expand: number[];
  /** Keras' `ops.squeeze` axes after the expansion. */
  squeeze: number[];
}

/** What Keras derives from an EinsumDense equation for its int8 form. */
export interface EinsumInt8Plan {
  input: string;
  kernel: string;
  output: string;
  inputLayout: ScaleLayout;
  kernelLayout: ScaleLayout;
}

/**
 * Keras' `_analyze_quantization_info(equation, ...)` for an equation of letters only; a reason
 * (a string) where Keras 3.15 cannot quantize the equation.
 */
export function einsumInt8Plan(equation: string): EinsumInt8Plan | string {
  if (equation.includes('...')) {
    return (
      "Keras 3.15 cannot quantize an equation with an ellipsis ('...'): its " +
      '_set_quantization_info fails (no Keras int8 file has one)'
    );
  }
  const m = /^([a-zA-Z]+),([a-zA-Z]+)->([a-zA-Z]+)$/.exec(equation);
  if (m == null) return 'expected an equation of the form X,Y->Z (letters only)';
  const [, input, kernel, output] = m;
  const inputReduced: number[] = [];
  const kernelReduced: number[] = [];
  // Keras keeps one variable `index` across its loops; its quirks depend on it
  let index = -1;
  [...input].forEach((c, i) => {
    index = output.indexOf(c);
    if (index === -1) inputReduced.push(i);
  });
  [...kernel].forEach((c, i) => {
    index = output.indexOf(c);
    if (index === -1) kernelReduced.push(i);
  });
  const inputExpand: number[] = [];
  const kernelExpand: number[] = [];
  const inputTranspose: number[] = [];
  const kernelTranspose: number[] = [];
  [...output].forEach((c, i) => {
    if (!input.includes(c)) inputExpand.push(i);
    if (!kernel.includes(c)) kernelExpand.push(i);
  });
  for (const c of output) {
    if (input.includes(c)) inputTranspose.push(input.indexOf(c));
    if (kernel.includes(c)) kernelTranspose.push(kernel.indexOf(c));
  }
  const place = (reduced: number[], expand: number[], transpose: number[]): number[] => {
    const squeeze: number[] = [];
    for (const ori of reduced) {
      if (expand.length > 0) index = expand.shift() as number;
      else squeeze.push(ori);
      transpose.splice(index, 0, ori); // Python's list.insert (clamped)
    }
    return squeeze;
  };
  const inputSqueeze = place(inputReduced, inputExpand, inputTranspose);
  const kernelSqueeze = place(kernelReduced, kernelExpand, kernelTranspose);
  return {
    input,
    kernel,
    output,
    inputLayout: {
      reduced: inputReduced,
      transpose: inputTranspose,
      expand: inputExpand,
      squeeze: inputSqueeze,
    },
    kernelLayout: {
      reduced: kernelReduced,
      transpose: kernelTranspose,
      expand: kernelExpand,
      squeeze: kernelSqueeze,
    },
  };
}

/** Keras' `_get_kernel_scale_shape` (per-channel): the stored `kernel_scale`'s shape. */
export function kernelScaleShape(plan: EinsumInt8Plan, kernelShape: readonly number[]): number[] {
  const {reduced, transpose, expand, squeeze} = plan.kernelLayout;
  const kept = kernelShape.map((d, i) => (reduced.includes(i) ? 1 : d));
  const shape = transpose.map((a) => kept[a]);
  for (const a of [...expand].sort((x, y) => x - y)) shape.splice(a, 0, 1);
  for (const a of [...squeeze].sort((x, y) => y - x)) shape.splice(a, 1);
  return shape;
}

/** Keras' `_adjust_scale_for_quant`: a kept-dims scale moved to the output's layout. */
export function layoutScale(scale: tf.Tensor, layout: ScaleLayout): tf.Tensor {
  return tf.tidy(() => {
    let s = layout.transpose.length > 0 ? tf.transpose(scale, layout.transpose) : scale;
    if (layout.expand.length > 0) {
      // ops.expand_dims with several axes: each axis a position in the result
      const rank = s.rank + layout.expand.length;
      const shape: number[] = [];
      let k = 0;
      for (let i = 0; i < rank; i++) {
        shape.push(layout.expand.includes(i) ? 1 : s.shape[k++]);
      }
      s = tf.reshape(s, shape);
    }
    if (layout.squeeze.length > 0) s = tf.squeeze(s, layout.squeeze);
    return s;
  });
}

/**
 * Keras' `_int8_call` product for a plan: the input quantized over its reduced axes, the exact
 * integer einsum of the int8 values (as a batched product: labels shared by all three operands,
 * then the input's free labels, the contracted ones, the kernel's output labels), cast to float32
 * and divided by (input scale · kernel scale), both laid out against the output as Keras does.
 */
export function int8Einsum(
  plan: EinsumInt8Plan,
  x: tf.Tensor,
  kernelValues: tf.Tensor,
  kernelScale: tf.Tensor,
): tf.Tensor {
  return tf.tidy(() => {
    // an equation of no dense form: the kernel held as bytes is read whole, as float32, per call
    // (the dense forms, all of keras-hub's projections, go through int8Dense a block at a time)
    const kernel = isInt8Tensor(kernelValues) ? int8ToFloat(kernelValues) : kernelValues;
    const {input, kernel: k, output} = plan;
    const {values, scale} = absMaxQuantize(x, plan.inputLayout.reduced);
    const shared = [...output].filter((c) => input.includes(c) && k.includes(c));
    const free = [...output].filter((c) => input.includes(c) && !k.includes(c));
    // input labels not in the output, summed (a label the kernel lacks: the kernel broadcast)
    const contracted = [...input].filter((c) => !output.includes(c));
    const outs = [...output].filter((c) => k.includes(c) && !input.includes(c));
    const size = new Map<string, number>();
    [...input].forEach((c, i) => size.set(c, x.shape[i]));
    [...k].forEach((c, i) => size.set(c, kernel.shape[i]));
    const prod = (labels: string[]) => labels.reduce((p, c) => p * (size.get(c) as number), 1);
    const xs = tf.reshape(
      tf.transpose(
        values,
        [...shared, ...free, ...contracted].map((c) => input.indexOf(c)),
      ),
      [prod(shared), prod(free), prod(contracted)],
    ) as tf.Tensor3D;
    const kLabels = [...shared, ...contracted, ...outs];
    const own = kLabels.filter((c) => k.includes(c));
    const kt = tf.reshape(
      tf.transpose(
        kernel,
        own.map((c) => k.indexOf(c)),
      ),
      kLabels.map((c) => (k.includes(c) ? (size.get(c) as number) : 1)),
    );
    const ks = tf.reshape(
      own.length === kLabels.length
        ? kt
        : tf.broadcastTo(
            kt,
            kLabels.map((c) => size.get(c) as number),
          ),
      [prod(shared), prod(contracted), prod(outs)],
    ) as tf.Tensor3D;
    const order = [...shared, ...free, ...outs];
    const y = tf.transpose(
      tf.reshape(
        int8BatchMatMul(xs, ks),
        order.map((c) => size.get(c) as number),
      ),
      [...output].map((c) => order.indexOf(c)),
    );
    const scales = tf.mul(layoutScale(scale, plan.inputLayout), kernelScale);
    return tf.div(tf.cast(y, 'float32'), scales);
  });
}
