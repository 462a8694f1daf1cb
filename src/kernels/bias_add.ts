/**
 * A bias over the columns of a matrix, `y [n, o] + b [o]`, for the dense projections.
 *
 * On tfjs' cpu backend this is one kernel of the package's (a plain loop over rows): tfjs' cpu
 * `Add` broadcasts through per-element index arithmetic, ~2.5 ms for [512, 256] + [256] against
 * ~0.2 ms for the loop, four times per MultiHeadAttention call. Its bias gradient (the column
 * sums of `dy`) is one product `ones [1, n] · dy` through the SIMD sgemm when that is loaded:
 * tfjs' cpu `Sum` over axis 0 transposes first, ~8 ms for a [512, 256] gradient against well
 * under 1 ms. Elsewhere (other backends, or the kernels off) it is `tf.add`, with tfjs' own
 * gradient.
 */
import * as tf from '@tensorflow/tfjs-core';

import {wasmKernelsLoaded} from './wasm_kernels';
import type {CpuBackend} from './cpu_backend';
import {ownKernels} from './flags';
import {mm} from './matmul';

const KERNEL = 'TfjsAttentionBiasAdd';

/** The column sums of `dy [n, o]`: a SIMD product where the module is loaded, else tfjs' Sum. */
function columnSums(dy: tf.Tensor): tf.Tensor {
  const [n, o] = dy.shape;
  if (!wasmKernelsLoaded()) return tf.sum(dy, 0);
  return tf.reshape(mm(tf.ones([1, n]), dy), [o]);
}

function registerKernel(): void {
  if (tf.getKernel(KERNEL, 'cpu') != null) return;
  tf.registerKernel({
    kernelName: KERNEL,
    backendName: 'cpu',
    kernelFunc: ({inputs, backend}) => {
      const cpu = backend as unknown as CpuBackend;
      const {y, b} = inputs as {y: tf.TensorInfo; b: tf.TensorInfo};
      const yv = cpu.readSync(y.dataId);
      const bv = cpu.readSync(b.dataId);
      const [n, o] = y.shape;
      const out = new Float32Array(n * o);
      for (let r = 0, at = 0; r < n; r++) {
        for (let c = 0; c < o; c++, at++) out[at] = yv[at] + bv[c];
      }
      return cpu.makeTensorInfo(y.shape, 'float32', out);
    },
  });
  tf.registerGradient({
    kernelName: KERNEL,
    gradFunc: (dy) => ({
      // a new handle on dy's values (no copy), never dy itself: a caller disposing the gradient
      // must not dispose the dy it passed in
      y: () => tf.reshape(dy as tf.Tensor, (dy as tf.Tensor).shape),
      b: () => columnSums(dy as tf.Tensor),
    }),
  });
}

registerKernel();

export function addBias(y: tf.Tensor, b: tf.Tensor): tf.Tensor {
  const fast =
    ownKernels() &&
    tf.getBackend() === 'cpu' &&
    y.rank === 2 &&
    b.rank === 1 &&
    y.dtype === 'float32' &&
    b.dtype === 'float32' &&
    y.shape[1] === b.shape[0];
  if (!fast) return tf.add(y, b);
  return tf.engine().runKernel(KERNEL, {y, b}) as tf.Tensor;
}
