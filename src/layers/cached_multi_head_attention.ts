import {AttendResult, TensorSpec} from './base_attention';
import {MultiHeadAttention} from './multi_head_attention';

/**
 * keras-hub's `CachedMultiHeadAttention`: MultiHeadAttention for autoregressive decoding, with
 * keras-hub's semantics and weights (those of MultiHeadAttention). Like keras-hub's layer it
 * ignores the Keras masks of its inputs (a decoder passes its masks as `attentionMask`); the
 * key / value cache (`cache`, `cacheUpdateIndex`) works as in MultiHeadAttention.
 *
 * ```js
 * const att = new CachedMultiHeadAttention({numHeads: 2, keyDim: 8});
 * const [y, cache] = att.apply(x, {cache: tf.zeros([batch, 2, maxLength, 2, 8]), cacheUpdateIndex: 0});
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
