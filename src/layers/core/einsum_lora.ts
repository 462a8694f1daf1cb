/**
 * LoRA's arithmetic on an EinsumDense (Keras 3.15's `einsum_dense.py`): the update's term after
 * a quantized product, and the kernel as Keras saves it with LoRA on
 * (`_get_kernel_with_merged_lora`): float, the update added; int8, the kernel dequantized
 * (`q / scale`), the update added, and quantized again with a new scale.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {einsum} from '../../ops/einsum';
import {absMaxQuantizeValues, int8ToFloat, ownedInt8Tensor} from '../../ops/int8';
import {loraDelta, loraOutput, LoraWeights} from './lora';
import type {Int8Weight} from './quantization';

/** `(alpha / rank) · einsum(x, A) @ B`: what Keras adds after an int8 / int4 product. */
export function einsumLoraTerm(equation: string, x: tf.Tensor, lora: LoraWeights): tf.Tensor {
  return loraOutput(einsum(equation, x, lora.a.read()), lora);
}

/** A float kernel with LoRA's update merged in, as a new tensor (a clone without LoRA). */
export function mergedFloatKernel(kernel: tf.Tensor, lora: LoraWeights | null): tf.Tensor {
  return lora == null ? tf.clone(kernel) : tf.tidy(() => tf.add(kernel, loraDelta(lora)));
}

/**
 * An int8 kernel with LoRA's update merged in, as Keras saves it: new int8 values (bytes) and
 * their scale in the stored layout. `where` names the layer in the refusal of a scale stored
 * transposed (no keras-hub projection has one).
 */
export function mergedInt8Weights(
  w: Int8Weight,
  lora: LoraWeights,
  where: string,
): Map<LayerVariable, tf.Tensor> {
  const shape = w.values.shape as number[];
  const kept = shape.map((d, i) => (w.axes.includes(i) ? 1 : d));
  const stored = w.scale.read();
  const scale = tf.tidy(() => {
    // the kept-dims scale whose stored layout is the layer's: a reshape where the layout keeps
    // the values' order
    const candidate = tf.reshape(stored, kept);
    const back = tf.reshape(w.layout?.(candidate) ?? candidate, stored.shape);
    if (tf.all(tf.equal(back, stored)).dataSync()[0] !== 1) {
      throw new Error(
        `${where}: merging LoRA into this int8 kernel is not implemented (its scale is stored ` +
          'transposed)',
      );
    }
    return candidate;
  });
  try {
    const merged = tf.tidy(() =>
      tf.add(tf.div(int8ToFloat(w.values.read()), scale), loraDelta(lora)),
    );
    const q = absMaxQuantizeValues(merged.dataSync() as Float32Array, shape, w.axes);
    merged.dispose();
    const newScale = tf.tidy(() => {
      const s = tf.tensor(q.scale, q.scaleShape);
      return tf.reshape(w.layout?.(s) ?? s, stored.shape as number[]);
    });
    return new Map([
      [w.values, ownedInt8Tensor(q.values, shape)],
      [w.scale, newScale],
    ]);
  } finally {
    scale.dispose();
  }
}
