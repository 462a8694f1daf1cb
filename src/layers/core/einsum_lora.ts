/**
 * LoRA's arithmetic on an EinsumDense (Keras 3.15's `einsum_dense.py`) of its own: the update's
 * term after a quantized product. The kernel as Keras saves it with LoRA on
 * (`_get_kernel_with_merged_lora`) is lora.ts' `mergedFloatKernel` / `mergedInt8Weights`, shared
 * with Dense and Embedding.
 */
import * as tf from '@tensorflow/tfjs-core';

import {einsum} from '../../ops/einsum';
import {loraOutput, LoraWeights} from './lora';

/** `(alpha / rank) · einsum(x, A) @ B`: what Keras adds after an int8 / int4 product. */
export function einsumLoraTerm(equation: string, x: tf.Tensor, lora: LoraWeights): tf.Tensor {
  return loraOutput(einsum(equation, x, lora.a.read()), lora);
}
