/**
 * useSharedIdentity (src/kernels/shared_identity.ts): while on, tfjs-wasm's `Identity` (what
 * `tf.clone` and the gradient tape's saved tensors run) shares its input's buffer as tfjs' cpu
 * backend does; restored, it copies again. Elsewhere it changes nothing.
 */
import * as tf from '@tensorflow/tfjs';

import {useSharedIdentity} from '../../src/kernels/shared_identity';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';

describeBackends('useSharedIdentity', (backend) => {
  it(`${backend === 'wasm' ? 'shares' : 'leaves'} the clone's buffer, then restores`, () => {
    const x = tf.tensor([1, 2, 3]);
    const copies = tf.memory().numDataBuffers;
    const restore = useSharedIdentity();
    const shared = tf.clone(x);
    const during = tf.memory().numDataBuffers;
    restore();
    const copied = tf.clone(x);
    if (backend === 'wasm') {
      expect(shared.dataId).toBe(x.dataId);
      expect(during).toBe(copies);
      expect(copied.dataId).not.toBe(x.dataId);
    }
    // values and lifetimes as before: disposing the source leaves the clone readable
    x.dispose();
    expect(Array.from(shared.dataSync())).toEqual([1, 2, 3]);
    expect(Array.from(copied.dataSync())).toEqual([1, 2, 3]);
    tf.dispose([shared, copied]);
  });

  it('keeps the gradients of a taped computation', () => {
    const x = tf.tensor([0.5, -1, 2]);
    const restore = useSharedIdentity();
    try {
      const g = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(tf.exp(t), t)))(x);
      // d/dt Σ e^t · t = e^t (1 + t)
      expectClose(
        g,
        [0.5, -1, 2].map((v) => Math.exp(v) * (1 + v)),
        1e-5,
        1e-6,
      );
      g.dispose();
    } finally {
      restore();
    }
    x.dispose();
  });
});
