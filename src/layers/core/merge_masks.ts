/**
 * Keras masks through tfjs' element-wise merge layers. Keras 3 gives `Add`, `Subtract`,
 * `Multiply`, `Average`, `Maximum` and `Minimum` the OR of their inputs' masks (none when an
 * input has none: `Merge.compute_mask`); tfjs 4.22's `Merge.computeMask` ANDs all masks but the
 * last after adding a leading axis, a mask of the wrong shape downstream. `Multiply`, `Maximum`
 * and `Minimum` also use the masks in their values in Keras 3, which tfjs does not: these three
 * refuse a call that a mask reaches, on any of their inputs. `Concatenate` gets
 * Keras' mask too. Each class here is
 * tfjs' own, extended, and registered under tfjs' name (`layers/register.ts`), so loaded models
 * use it.
 */
import * as tf from '@tensorflow/tfjs-core';
// tfjs-layers registers its merge classes on import; this module extends them
import '@tensorflow/tfjs-layers';
import type {layers} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {tfjsClass} from './tfjs_classes';

type LayerClass = new (args?: object) => layers.Layer;
/** A merge class of this module: tfjs' class, extended, under tfjs' name. */
export type MergeClass = LayerClass & {readonly className: string};

/** Keras' `Merge.compute_mask`: the OR of the masks, or none when an input has none. */
function orOfMasks(mask: tf.Tensor | Array<tf.Tensor | null> | null | undefined): tf.Tensor {
  const none = null as unknown as tf.Tensor;
  if (mask == null) return none;
  const list = Array.isArray(mask) ? mask : [mask];
  if (list.length === 0 || list.some((m) => m == null)) return none;
  return tf.tidy(() =>
    (list as tf.Tensor[]).map((m) => tf.cast(m, 'bool')).reduce((a, b) => tf.logicalOr(a, b)),
  );
}

function hasMask(mask: unknown): boolean {
  return Array.isArray(mask) ? mask.some((m) => m != null) : mask != null;
}

/** tfjs' merge layer `name` with Keras' output mask; `usesMasks`: Keras uses them in values. */
function kerasMaskedMerge(name: string, usesMasks: boolean): MergeClass {
  const Base = tfjsClass(name);
  return class extends Base {
    /** @nocollapse */
    static readonly className = name;

    override computeMask(
      _inputs: tf.Tensor | tf.Tensor[],
      mask?: tf.Tensor | tf.Tensor[],
    ): tf.Tensor | tf.Tensor[] {
      // the masks of every input (call sees the first input's only): a mask on any is refused
      if (usesMasks && hasMask(mask)) this.refuseMask();
      return orOfMasks(mask);
    }

    override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
      if (usesMasks && hasMask(kwargs?.mask)) this.refuseMask();
      return super.call(inputs, kwargs);
    }

    refuseMask(): never {
      throw new Error(
        `Layer '${this.name}' (${name}): a Keras mask reaches it, which Keras 3 uses in its ` +
          `values (a masked position of an input does not take part) and tfjs' ${name} does ` +
          'not implement; this package refuses it rather than give other values',
      );
    }
  };
}

/** Keras' output mask (the OR) on tfjs' Add and Average (tfjs has no Subtract). */
export const Add = kerasMaskedMerge('Add', false);
export const Average = kerasMaskedMerge('Average', false);
/**
 * tfjs' Multiply, Maximum and Minimum, refused when a Keras mask reaches any input: Keras 3 uses
 * the masks in their values (Multiply counts a masked position as 1 and zeroes the output outside
 * the masks' OR; Maximum / Minimum leave masked positions out).
 */
export const Multiply = kerasMaskedMerge('Multiply', true);
export const Maximum = kerasMaskedMerge('Maximum', true);
export const Minimum = kerasMaskedMerge('Minimum', true);

const TfjsConcatenate = tfjsClass<layers.Layer & {axis: number}>('Concatenate');

/**
 * tfjs' Concatenate with Keras' `compute_mask`: each mask broadcast to its input's shape (all true
 * for an input without one), concatenated on the layer's axis, then `any` over the last axis.
 * tfjs' took `all` without broadcasting, so masks concatenated on the feature axis came out ANDed.
 */
export class Concatenate extends TfjsConcatenate {
  /** @nocollapse */
  static readonly className = 'Concatenate';

  override computeMask(
    inputs: tf.Tensor | tf.Tensor[],
    mask?: tf.Tensor | tf.Tensor[],
  ): tf.Tensor | tf.Tensor[] {
    const none = null as unknown as tf.Tensor;
    const list = (Array.isArray(mask) ? mask : [mask]) as Array<tf.Tensor | null | undefined>;
    if (mask == null || list.every((m) => m == null)) return none;
    const xs = Array.isArray(inputs) ? inputs : [inputs];
    return tf.tidy(() => {
      const full = xs.map((x, i) => {
        const m = list[i];
        if (m == null) return tf.cast(tf.onesLike(x), 'bool');
        const b = tf.cast(m, 'bool');
        return m.rank < x.rank ? tf.broadcastTo(tf.expandDims(b, -1), x.shape) : b;
      });
      return tf.any(tf.concat(full, this.axis), -1);
    });
  }
}

/** The merge classes, registered under tfjs' names by `layers/register.ts`. */
export const MERGE_CLASSES: readonly MergeClass[] = [
  Concatenate as unknown as MergeClass,
  Add,
  Multiply,
  Average,
  Maximum,
  Minimum,
];
