/**
 * One tensor used by several query blocks, with one gradient sum instead of many.
 *
 * When the blocks of {@link ./attention_core} each read the whole keys and values, tfjs' tape
 * adds their gradients pairwise, one `Add` per block; tfjs' cpu `Add` allocates and indexes per
 * element (4-16 ms per [4, 2048, 32] pair in a 2048-token training step, 16 of them). On cpu with
 * the package's kernels, {@link fanOut} hands each block its own handle on the same values (no
 * copy), and the gradient is one `AddN` of the blocks' gradients. Elsewhere the blocks share the
 * tensor itself.
 */
import * as tf from '@tensorflow/tfjs-core';

import {ownKernels} from './flags';

const KERNEL = 'TfjsAttentionFanOut';

/** The part of tfjs' cpu backend used here. */
interface RefCounting {
  incRef(dataId: tf.DataId): void;
}

function register(): void {
  if (tf.getKernel(KERNEL, 'cpu') != null) return;
  tf.registerKernel({
    kernelName: KERNEL,
    backendName: 'cpu',
    kernelFunc: ({inputs, backend, attrs}) => {
      const {x} = inputs as {x: tf.TensorInfo};
      const {count} = attrs as unknown as {count: number};
      return Array.from({length: count}, () => {
        (backend as unknown as RefCounting).incRef(x.dataId); // as tfjs' Identity
        return {dataId: x.dataId, shape: x.shape, dtype: x.dtype};
      });
    },
  });
  tf.registerGradient({
    kernelName: KERNEL,
    gradFunc: (dy) => ({
      // one sum of every block's gradient (tfjs gives zeros for a handle without one)
      x: () => (Array.isArray(dy) ? tf.addN(dy) : tf.reshape(dy, dy.shape)),
    }),
  });
}

register();

/** `count` handles on `x` for `count` readers (see above): `[x, x, ...]` but on cpu. */
export function fanOut(x: tf.Tensor, count: number): tf.Tensor[] {
  if (count < 2 || !(ownKernels() && tf.getBackend() === 'cpu')) {
    return new Array<tf.Tensor>(count).fill(x);
  }
  return tf.engine().runKernel(KERNEL, {x}, {count} as never) as unknown as tf.Tensor[];
}
