import {AttendResult, TensorSpec} from '../engine/base_attention';
import {MultiHeadAttention} from '../attention/multi_head_attention';
import {LayerContract} from '../engine/contract';
import {multiHeadDecoding} from '../engine/decoding_checks';
import {MULTI_HEAD_KERAS3_KEYS, refuseMultiHeadCache} from '../attention/attention_contract';
import {HUB_NEEDS_KERAS3} from './hub_contract';

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
  /** What the package knows about this class (contract.ts). */
  static override readonly contract: LayerContract = {
    ...MultiHeadAttention.contract,
    keras: {
      ...MultiHeadAttention.contract.keras,
      keras3: {pkg: 'keras_hub', keys: MULTI_HEAD_KERAS3_KEYS},
      keras2: {refused: HUB_NEEDS_KERAS3},
    },
    // keras-hub's layer ignores the Keras masks of its inputs
    decoding: {
      ...multiHeadDecoding(
        (c) => c.numHeads as number,
        (c) => c.keyDim as number,
        refuseMultiHeadCache,
        false,
      ),
    },
  };

  protected override attend(spec: TensorSpec): AttendResult {
    return super.attend({...spec, queryMask: null, valueMask: null, keyMask: null});
  }
}
