/**
 * The pure mask functions of ops/masking.ts against masks written out by plain loops: sliding
 * window, key / query padding, Keras' expansion to the scores' rank (heads axis or leading
 * axes), broadcast checks and combination.
 */
import * as tf from '@tensorflow/tfjs';

import {
  causalMask,
  checkMaskBroadcasts,
  combineMasks,
  expandMask,
  keyPaddingMask,
  queryPaddingMask,
  slidingWindowMask,
  trailingMask,
} from '../../src/ops/masking';
import {describeBackends} from '../helpers/backends';

function loops(T: number, S: number, f: (t: number, s: number) => boolean): number[][] {
  return Array.from({length: T}, (_, t) => Array.from({length: S}, (_s, s) => (f(t, s) ? 1 : 0)));
}

const values = (t: tf.Tensor) => tf.cast(t, 'int32').arraySync();

describeBackends('mask functions', () => {
  it('slidingWindowMask: |i - j| < window, for square and non-square scores', () => {
    for (const [T, S, w] of [
      [5, 5, 2],
      [3, 6, 3],
      [4, 2, 1],
    ]) {
      const m = slidingWindowMask(T, S, w);
      expect(m.dtype).toBe('bool');
      expect(values(m)).toEqual(loops(T, S, (t, s) => Math.abs(t - s) < w));
      m.dispose();
    }
  });

  it('causal and window masks shift with the first query position (cached decoding)', () => {
    for (const offset of [0, 2, 5]) {
      const c = causalMask(2, 6, offset);
      expect(values(c)).toEqual(loops(2, 6, (t, s) => s <= t + offset));
      const w = slidingWindowMask(2, 6, 3, offset);
      expect(values(w)).toEqual(loops(2, 6, (t, s) => Math.abs(t + offset - s) < 3));
      tf.dispose([c, w]);
    }
  });

  it('key and query padding masks put the mask on the key / query axis', () => {
    tf.tidy(() => {
      const m = tf.tensor2d([1, 1, 0, 1, 0, 0], [2, 3], 'bool');
      expect(keyPaddingMask(m).shape).toEqual([2, 1, 3]);
      expect(queryPaddingMask(m).shape).toEqual([2, 3, 1]);
      expect(values(keyPaddingMask(m))).toEqual([[[1, 1, 0]], [[1, 0, 0]]]);
      expect(values(queryPaddingMask(m))).toEqual([
        [[1], [1], [0]],
        [[1], [0], [0]],
      ]);
    });
  });

  it("expandMask: Keras MultiHeadAttention's heads axis, or leading axes", () => {
    tf.tidy(() => {
      const m = tf.ones([2, 3, 5], 'bool');
      expect(expandMask(m, 4, -3).shape).toEqual([2, 1, 3, 5]); // one attention axis
      expect(expandMask(tf.ones([2, 3, 4, 5, 6], 'bool'), 7, -5).shape).toEqual([
        2, 1, 1, 3, 4, 5, 6,
      ]);
      expect(expandMask(m, 5, null).shape).toEqual([1, 1, 2, 3, 5]);
      expect(trailingMask(tf.ones([3, 5], 'bool'), 4).shape).toEqual([1, 1, 3, 5]);
    });
  });

  it('checkMaskBroadcasts names the mask and both shapes', () => {
    tf.tidy(() => {
      expect(() =>
        checkMaskBroadcasts(tf.ones([2, 1, 3, 4]), [2, 2, 3, 5], 'attentionMask', "Layer 'm'"),
      ).toThrow(
        "Layer 'm': attentionMask of shape [2, 1, 3, 4] does not broadcast to the attention scores [2, 2, 3, 5]",
      );
      const ok = tf.ones([1, 1, 3, 5]);
      expect(checkMaskBroadcasts(ok, [2, 2, 3, 5], 'm', 'c')).toBe(ok);
    });
  });

  it('combineMasks ANDs bool and 0/1 masks with broadcasting; none gives null', () => {
    tf.tidy(() => {
      expect(combineMasks(null, undefined)).toBeNull();
      const a = tf.tensor2d([1, 1, 0, 1], [2, 2], 'bool');
      const b = tf.tensor2d([1, 0], [1, 2], 'float32');
      const c = combineMasks(a, null, b) as tf.Tensor;
      expect(c.dtype).toBe('bool');
      expect(values(c)).toEqual([
        [1, 0],
        [0, 0],
      ]);
      // a single mask is copied, not shared (callers dispose what they combine)
      const single = combineMasks(a) as tf.Tensor;
      expect(single).not.toBe(a);
      expect(values(single)).toEqual(values(a));
    });
  });

  it('causalMask is lower triangular, top-left aligned', () => {
    tf.tidy(() => {
      const m = causalMask(2, 3);
      expect(m.dtype).toBe('bool');
      expect(m.arraySync()).toEqual([
        [1, 0, 0],
        [1, 1, 0],
      ]);
    });
  });
});
