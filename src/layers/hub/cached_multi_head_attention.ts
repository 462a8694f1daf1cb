import {AttendResult, TensorSpec} from '../engine/base_attention';
import {MultiHeadAttention} from '../attention/multi_head_attention';

/**
 * keras-hub's `CachedMultiHeadAttention`: MultiHeadAttention for autoregressive decoding, with
 * keras-hub's semantics and weights (those of MultiHeadAttention). Like keras-hub's layer it
 * ignores the Keras masks of its inputs (a decoder passes its masks as `attentionMask`); the
 * key / value cache (`cache`, `cacheUpdateIndex`) works as in MultiHeadAttention.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {CachedMultiHeadAttention} from 'tfjs-attention';
 *
 * const att = new CachedMultiHeadAttention({numHeads: 2, keyDim: 8});
 * const cache = tf.zeros([1, 2, 10, 2, 8]); // [batch, 2, maxLength, numHeads, keyDim]
 * const x = tf.randomNormal([1, 1, 16]); // the position being decoded
 * const [y, updated] = att.apply(x, {cache, cacheUpdateIndex: 0}); // y [1, 1, 16]
 * ```
 */
export class CachedMultiHeadAttention<S extends boolean = false> extends MultiHeadAttention<S> {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static override readonly className = 'CachedMultiHeadAttention';

  protected override attend(spec: TensorSpec): AttendResult {
    return super.attend({...spec, queryMask: null, valueMask: null, keyMask: null});
  }
}
