/**
 * `tf.reshape`, skipped when the tensor already has the shape: on tfjs-node's `tensorflow`
 * backend every reshape is a native op call (~0.03 ms), and MultiHeadAttention's layout changes
 * are no-ops in its common layout (5 of a forward pass' 43 kernels there).
 */
import * as tf from '@tensorflow/tfjs-core';

export function reshapeTo(x: tf.Tensor, shape: number[]): tf.Tensor {
  const same = x.rank === shape.length && shape.every((d, i) => d === x.shape[i]);
  return same ? x : tf.reshape(x, shape);
}
