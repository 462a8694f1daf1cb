/**
 * tfjs' `Softmax` layer as Keras 3 computes it with a mask: masked positions set to -1e9 before
 * the softmax and to 0 after it (a row masked entirely gives zeros, not tfjs' uniform weights),
 * a mask that does not broadcast to the input refused as Keras refuses it, and the mask passed on
 * to the next layer (Keras' `supports_masking`; tfjs' class drops it). Registered under tfjs'
 * name (`layers/register.ts`), so loaded models use it.
 */
import * as tf from '@tensorflow/tfjs-core';
// tfjs-layers registers its Softmax on import; this module extends it
import '@tensorflow/tfjs-layers';
import type {layers} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {formatShape} from '../engine/shapes';
import {tfjsClass} from './tfjs_classes';

type SoftmaxLike = layers.Layer & {axis: number | number[]};

const TfjsSoftmax = tfjsClass<SoftmaxLike>('Softmax');

/** Keras 3's `Softmax` layer (its `call(inputs, mask)`), on tfjs' class. */
export class Softmax extends TfjsSoftmax {
  /**
   * The name of tfjs' class, which this one replaces in deserialization.
   * @nocollapse
   */
  static readonly className = 'Softmax';

  constructor(args?: object) {
    super(args);
    this.supportsMasking = true;
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    const given = kwargs?.mask as tf.Tensor | Array<tf.Tensor | null> | null | undefined;
    const mask = Array.isArray(given) ? (given[0] ?? null) : (given ?? null);
    if (mask == null) return super.call(inputs, {...kwargs, mask: undefined});
    const x = Array.isArray(inputs) ? inputs[0] : inputs;
    const [ms, xs] = [mask.shape, x.shape];
    const fits =
      ms.length <= xs.length && ms.every((d, i) => d === 1 || d === xs[xs.length - ms.length + i]);
    if (!fits) {
      throw new Error(
        `Layer '${this.name}' (Softmax): the mask must be broadcastable to the inputs (each ` +
          `mask dimension 1 or the input's, aligned on the right), as Keras requires; received ` +
          `inputs ${formatShape(xs)} and mask ${formatShape(ms)}`,
      );
    }
    return tf.tidy(() => {
      const keep = tf.broadcastTo(mask.dtype === 'bool' ? mask : tf.greater(mask, 0.5), xs);
      const masked = tf.where(keep, x, tf.fill(xs, -1e9));
      const axes = Array.isArray(this.axis) ? this.axis : [this.axis];
      const out =
        axes.length > 1
          ? tf.exp(tf.sub(masked, tf.logSumExp(masked, axes, true)))
          : tf.softmax(
              axes[0] === -1 || axes[0] === xs.length - 1
                ? masked
                : tf.transpose(masked, swapLast(xs.length, axes[0])),
            );
      const back =
        axes.length > 1 || axes[0] === -1 || axes[0] === xs.length - 1
          ? out
          : tf.transpose(out, swapLast(xs.length, axes[0]));
      return tf.where(keep, back, tf.zerosLike(back));
    });
  }
}

/** The permutation swapping `axis` with the last axis (its own inverse). */
function swapLast(rank: number, axis: number): number[] {
  const a = axis < 0 ? rank + axis : axis;
  const perm = [...Array(rank).keys()];
  [perm[a], perm[rank - 1]] = [perm[rank - 1], perm[a]];
  return perm;
}
