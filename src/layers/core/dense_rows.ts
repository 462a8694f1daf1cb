/**
 * tfjs' `Dense` on 2-D rows `[N, D]`, as its own `call`, except while a gradient is recorded
 * (fine-tuning): then a plain product, bias and activation, whose gradients are computed only for
 * what needs one. tfjs' `Dense` runs its fused product, whose gradient computes the kernel's
 * gradient too: a frozen kernel's gradient, thrown away, at every layer and step (most of a LoRA
 * step's time on wasm at GPT-2 small's shape).
 */
import type * as tf from '@tensorflow/tfjs-core';
import type {layers, LayerVariable} from '@tensorflow/tfjs-layers';

import {addBias} from '../../kernels/bias_add';
import {mm} from '../../kernels/matmul';
import {recordingGradients} from '../../ops/gradient_recording';

/**
 * `layer.call(rows)` for a float tfjs Dense, with a plain product while recording gradients
 * (a Dense with LoRA's adapters runs its own call, which adds them).
 */
export function denseRows(layer: layers.Layer, rows: tf.Tensor): tf.Tensor {
  const d = layer as unknown as {
    kernel?: LayerVariable | null;
    bias?: LayerVariable | null;
    activation?: {apply(x: tf.Tensor): tf.Tensor};
    quantizationMode?: unknown;
    lora?: unknown;
  };
  if (
    !recordingGradients() ||
    d.quantizationMode !== undefined ||
    d.kernel == null ||
    d.lora != null
  ) {
    return layer.call(rows, {}) as tf.Tensor;
  }
  let y = mm(rows, d.kernel.read());
  if (d.bias != null) y = addBias(y, d.bias.read());
  return d.activation != null ? d.activation.apply(y) : y;
}
