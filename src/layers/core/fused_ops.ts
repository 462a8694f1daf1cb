/**
 * Fewer programs per call on webgl / webgpu, with the same values: a projection's bias inside its
 * product, and layer normalization without its tiles.
 *
 * tfjs' `LayerNormalization` over the last axis in fewer kernels, with the same values: tfjs'
 * layer tiles its mean, variance, gamma and beta to the input's shape before `batchNorm` (four
 * `Tile` programs, and a `Cast` of float32 to float32, at every call); here the mean and variance
 * are tiled only when there are several rows (tfjs' cpu `batchNorm` indexes them cyclically) and
 * gamma and beta are reshaped to `[1, ..., D]` (a view), which every backend's `batchNorm` reads
 * cyclically or broadcasts. Same moments (`mean`, `square(x - mean)`, `mean`) and the same
 * `batchNorm` kernel on the same values, so the result is tfjs' to the bit. At one row (a
 * decoding step at batch 1) that is 5 programs on webgl / webgpu instead of 10.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {layers} from '@tensorflow/tfjs-layers';

import {ownKernels} from '../../kernels/flags';
import {recordingGradients} from '../../ops/gradient_recording';

/**
 * `rows · w + bias` (2-D rows `[N, k]`, a weight `w` `[k, units]`, a bias `[units]`) as tfjs'
 * fused product where the package's own product and bias kernels do not run (cpu with them), and
 * not on wasm: the bias is added in the product's program, one program on webgl / webgpu instead of
 * two, the same sum of the product and the bias; `activation` one tfjs' fused product knows
 * (`linear`, `relu`, `relu6`, `elu`, `sigmoid`). Elsewhere (or without a bias): `null`.
 */
export function fusedBiasProduct(
  rows: tf.Tensor,
  w: tf.Tensor,
  bias: tf.Tensor | null,
  activation: string = 'linear',
): tf.Tensor | null {
  const backend = tf.getBackend();
  // not on wasm: tfjs-wasm's fused product reads the bias' stored shape, which a reshaped bias
  // (EinsumDense's [heads, width]) does not change
  if (bias == null || backend === 'wasm' || (ownKernels() && backend === 'cpu')) return null;
  if (rows.rank !== 2 || w.rank !== 2 || bias.rank !== 1 || bias.shape[0] !== w.shape[1]) {
    return null;
  }
  if (rows.dtype !== 'float32' || w.dtype !== 'float32' || bias.dtype !== 'float32') return null;
  if (rows.shape[1] === 0) return null; // an empty inner axis: the package's zero product
  return tf.fused.matMul({a: rows, b: w, bias, activation: activation as tf.fused.Activation});
}

/** What this module reads of tfjs' LayerNormalization (its fields are not in its public type). */
interface TfjsLayerNorm {
  axis: number[] | number;
  epsilon: number;
  center: boolean;
  scale: boolean;
  gamma?: {read(): tf.Tensor} | null;
  beta?: {read(): tf.Tensor} | null;
}

/**
 * `layer.call(x, {})` for tfjs' LayerNormalization (built) on float32 input normalized over its
 * last axis, in fewer kernels with the same result; any other layer or case: `null` (call the
 * layer). Not while a gradient is recorded: the gradient of tfjs' `batchNorm` does not reduce a
 * broadcast gamma or beta (why tfjs' layer tiles them).
 */
export function layerNormLastAxis(
  layer: Pick<layers.Layer, 'getClassName'>,
  x: tf.Tensor,
): tf.Tensor | null {
  if (
    layer.getClassName() !== 'LayerNormalization' ||
    (layer as {built?: boolean}).built !== true ||
    x.dtype !== 'float32' ||
    recordingGradients()
  ) {
    return null;
  }
  const ln = layer as unknown as TfjsLayerNorm;
  const axes = Array.isArray(ln.axis) ? ln.axis : [ln.axis];
  const r = x.rank;
  if (r < 2 || axes.length !== 1 || (axes[0] !== r - 1 && axes[0] !== -1)) return null;
  const gamma = ln.scale ? (ln.gamma?.read() ?? null) : null;
  const beta = ln.center ? (ln.beta?.read() ?? null) : null;
  if ((ln.scale && gamma == null) || (ln.center && beta == null)) return null;
  return tf.tidy(() => {
    const D = x.shape[r - 1];
    // tfjs' moments (keepDims): mean, square(x - mean), mean
    let mean = tf.mean(x, r - 1, true); // [..., 1]
    let variance = tf.mean(tf.square(tf.sub(x, mean)), r - 1, true);
    if (mean.size > 1) {
      const reps = [...new Array<number>(r - 1).fill(1), D];
      mean = tf.tile(mean, reps);
      variance = tf.tile(variance, reps);
    }
    const row = [...new Array<number>(r - 1).fill(1), D];
    const g = gamma == null ? undefined : tf.reshape(gamma, row);
    const b = beta == null ? undefined : tf.reshape(beta, row);
    return tf.batchNorm(x, mean, variance, b, g, ln.epsilon);
  });
}
