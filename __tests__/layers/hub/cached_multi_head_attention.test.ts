/**
 * keras-hub's CachedMultiHeadAttention: MultiHeadAttention's numbers and weights, Keras masks
 * ignored (a decoder passes its masks explicitly), and keras-hub's decoding loop (an explicit
 * causal attention mask over the whole cache, one token at a time) equal to the whole sequence.
 */
import * as tf from '@tensorflow/tfjs';

import {CachedMultiHeadAttention, MultiHeadAttention} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';

function pair(x: tf.Tensor) {
  const cached = new CachedMultiHeadAttention({numHeads: 2, keyDim: 3});
  const plain = new MultiHeadAttention({numHeads: 2, keyDim: 3});
  cached.apply(x);
  plain.apply(x);
  cached.setWeights(cached.getWeights().map((w, i) => randTensor(w.shape, 70 + i, 0.5)));
  plain.setWeights(cached.getWeights());
  return {cached, plain};
}

describeBackends('CachedMultiHeadAttention', () => {
  it('computes what MultiHeadAttention computes, but ignores Keras masks', () => {
    tf.tidy(() => {
      const x = randTensor([2, 4, 6], 1);
      const {cached, plain} = pair(x);
      expectClose(cached.apply(x) as tf.Tensor, plain.apply(x) as tf.Tensor, 1e-6, 1e-6);
      const masked = tf.clone(x);
      masked.kerasMask = tf.tensor2d([1, 1, 0, 0, 1, 1, 1, 0], [2, 4], 'bool');
      const withMask = plain.apply(masked) as tf.Tensor;
      const ignored = cached.apply(masked) as tf.Tensor;
      expectClose(ignored, plain.apply(x) as tf.Tensor, 1e-6, 1e-6);
      expect(tf.max(tf.abs(tf.sub(withMask, ignored))).dataSync()[0]).toBeGreaterThan(1e-3);
    });
  });

  it("keras-hub's decoding loop (explicit causal mask over the cache) = the whole sequence", () => {
    tf.tidy(() => {
      const [B, T] = [2, 5];
      const x = randTensor([B, T, 6], 2);
      const {cached} = pair(x);
      const causal = tf.linalg.bandPart(tf.ones([T, T]), -1, 0); // [T, T], 1 where key <= query
      const whole = cached.apply(x, {attentionMask: tf.tile(tf.expandDims(causal, 0), [B, 1, 1])});
      let cache = tf.zeros([B, 2, T, 2, 3]);
      const steps: tf.Tensor[] = [];
      for (let t = 0; t < T; t++) {
        const row = tf.tile(tf.slice(causal, [t, 0], [1, T]).expandDims(0), [B, 1, 1]); // [B, 1, T]
        const [y, next] = cached.apply(tf.slice(x, [0, t, 0], [B, 1, 6]), {
          attentionMask: row,
          cache,
          cacheUpdateIndex: t,
        }) as tf.Tensor[];
        steps.push(y);
        cache = next;
      }
      expectClose(tf.concat(steps, 1), whole as tf.Tensor, 1e-5, 1e-5);
    });
  });
});
