/**
 * What the int8 layers share: the `quantizationMode` option, Keras 3's `QuantizedDTypePolicy`
 * config, and the int8 weights a layer holds (values and scale, and how `quantize` fills them from
 * the float weight they replace).
 */
import * as tf from '@tensorflow/tfjs-core';
import type {layers, LayerVariable} from '@tensorflow/tfjs-layers';

import {absMaxQuantizeValues, int8Rows, isInt8Tensor, ownedInt8Tensor} from '../../ops/int8';
import type {LayerContract} from '../engine/contract';

/** The quantization modes the package implements (Keras 3's `int8`). */
export type QuantizationMode = 'int8';

/** Keras 3.15's dtype policy of an int8 layer, as its config writes it. */
export const KERAS_INT8_POLICY = {
  module: 'keras.dtype_policies',
  class_name: 'QuantizedDTypePolicy',
  config: {mode: 'int8', source_name: 'float32'},
  registered_name: null,
} as const;

/** The mode {@link withQuantizationMode} gives layers made without one, or null. */
let scopedMode: QuantizationMode | null = null;

/**
 * Runs `build` with `mode` as the quantization mode of every layer made in it that takes one and
 * is not given one (EinsumDense, ReversibleEmbedding, the composite layers, which pass it on to
 * their sublayers): a model built in its int8 form directly, no float weight allocated (a
 * keras-hub int8 preset, hub_models/build.ts).
 */
export function withQuantizationMode<T>(mode: QuantizationMode, build: () => T): T {
  const saved = scopedMode;
  scopedMode = mode;
  try {
    return build();
  } finally {
    scopedMode = saved;
  }
}

/**
 * The `quantizationMode` option checked: `'int8'`, or null for a float layer (absent: the mode
 * of {@link withQuantizationMode} around it, else null).
 */
export function quantizationModeOf(value: unknown, where: string): QuantizationMode | null {
  if (value === undefined) return scopedMode;
  if (value == null) return null;
  if (value === 'int8') return value;
  throw new Error(
    `${where}: expected quantizationMode 'int8' or null, received ${JSON.stringify(value)}`,
  );
}

/**
 * The first scale value Keras could not have written, or null: Keras' int8 scales are
 * `127 / (max|w| + 1e-7)` (positive and finite by construction); a zero, negative, NaN or
 * infinite one would make every output of the layer NaN or wrong. Loaders call this on each int8
 * weight's scale before building and name the layer.
 */
export function badScaleValue(values: ArrayLike<number>): {index: number; value: number} | null {
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (!(v > 0 && v < Infinity)) return {index: i, value: v};
  }
  return null;
}

/** The error text of a bad scale value (after the loader's prefix naming the layer). */
export function badScaleText(bad: {index: number; value: number}): string {
  return (
    `expected positive finite scale values (Keras writes 127 / max|w|), received ` +
    `${String(bad.value)} at flat index ${bad.index}`
  );
}

/** One int8 weight of a layer: its values, its scale, and the axes its scale reduces. */
export interface Int8Weight {
  /**
   * The int8 values (in [-127, 127]) held as bytes (`ops/int8.ts`: dtype `bool`, two's
   * complement), in the float weight's shape and Keras' layout.
   */
  values: LayerVariable;
  /** The float32 scale (`float ≈ values / scale`), in Keras' stored shape. */
  scale: LayerVariable;
  /** The float weight's axes the scale reduces (Keras' `AbsMaxQuantizer(axis=...)`). */
  axes: number[];
  /**
   * The kept-dims scale in the stored layout (EinsumDense: Keras' `_adjust_scale_for_quant`);
   * absent: a reshape.
   */
  layout?: (scale: tf.Tensor) => tf.Tensor;
}

/** A layer that holds int8 weights when its `quantizationMode` is `'int8'`. */
export interface Int8Layer {
  /** `'int8'` or null (float). */
  quantizationMode: QuantizationMode | null;
  /** Its int8 weights (empty before build or when float). */
  int8Weights(): Int8Weight[];
}

/** Whether `layer` can hold int8 weights. */
export function isInt8Layer(layer: unknown): layer is Int8Layer {
  return (
    layer != null &&
    typeof layer === 'object' &&
    'quantizationMode' in layer &&
    typeof (layer as {int8Weights?: unknown}).int8Weights === 'function'
  );
}

/**
 * Quantizes `float` as Keras does (abs-max over `w.axes`, ops/int8.ts' `absMaxQuantizeValues` on
 * its values read into JavaScript) into `w`'s values (bytes) and scale.
 */
export function quantizeInto(w: Int8Weight, float: tf.Tensor): void {
  if (float.shape.join() !== w.values.shape.join()) {
    throw new Error(
      `quantize: weight '${w.values.originalName}' expected a float weight of shape ` +
        `[${w.values.shape}], received [${float.shape}]`,
    );
  }
  // in JavaScript, a weight at a time: no float temporaries of the weight's size in the backend
  const q = absMaxQuantizeValues(float.dataSync() as Float32Array, float.shape, w.axes);
  tf.tidy(() => {
    const scale = tf.tensor(q.scale, q.scaleShape);
    w.values.write(ownedInt8Tensor(q.values, float.shape));
    w.scale.write(tf.reshape(w.layout?.(scale) ?? scale, w.scale.shape as number[]));
  });
}

/**
 * `float32 ids -> int32` is the caller's; this is the int8 lookup of Keras' `Embedding`:
 * `take(values, ids) / take(scale, ids)[..., None]` (values held as bytes: only the rows at the
 * ids are read as float32).
 */
export function int8Lookup(values: tf.Tensor, scale: tf.Tensor, ids: tf.Tensor): tf.Tensor {
  return tf.tidy(() => {
    const rows = isInt8Tensor(values) ? int8Rows(values, ids) : tf.gather(values, ids); // [..., D]
    const s = tf.expandDims(tf.gather(scale, ids), -1); // [..., 1]
    return tf.div(rows, s);
  });
}

/** A layer with a settable `quantizationMode` (the int8 layers and composite layers). */
interface HasQuantizationMode {
  quantizationMode: QuantizationMode | null;
}

/**
 * The registered class that is the int8 form of the tfjs built-in class `className` (its
 * contract's `quantization.kind` is `replaces`), or null.
 */
export function int8Replacement(className: string):
  | (tf.serialization.SerializableConstructor<tf.serialization.Serializable> & {
      contract: LayerContract;
    })
  | null {
  const map = tf.serialization.SerializationMap.getMap().classNameMap;
  for (const key of Object.keys(map)) {
    const cls = (map[key] as unknown as [{contract?: LayerContract}])[0];
    const q = Object.prototype.hasOwnProperty.call(cls, 'contract')
      ? cls.contract?.quantization
      : undefined;
    if (q?.kind === 'replaces' && q.className === className) {
      return cls as unknown as ReturnType<typeof int8Replacement>;
    }
  }
  return null;
}

/**
 * `layer` in its `mode` form, before it is built: the int8 layers and composite layers get the
 * mode (a composite passes it on to its sublayers), a tfjs built-in with an int8 class (Dense,
 * Embedding) becomes that class with the same name; any other layer is returned as it is.
 */
export function quantizedForm(layer: layers.Layer, mode: QuantizationMode): layers.Layer {
  if ('quantizationMode' in layer) {
    (layer as unknown as HasQuantizationMode).quantizationMode = mode;
    return layer;
  }
  const cls = int8Replacement(layer.getClassName());
  const q = cls?.contract.quantization;
  if (cls == null || q?.kind !== 'replaces') return layer;
  const Ctor = cls as unknown as new (args: tf.serialization.ConfigDict) => layers.Layer;
  return new Ctor(q.fromFloat(layer.getConfig()));
}
