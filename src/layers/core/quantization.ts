/**
 * What the int8 layers share: the `quantizationMode` option, Keras 3's `QuantizedDTypePolicy`
 * config, and the int8 weights a layer holds (values and scale, and how `quantize` fills them from
 * the float weight they replace).
 */
import * as tf from '@tensorflow/tfjs-core';
import {initializers, type layers, type LayerVariable} from '@tensorflow/tfjs-layers';
import type {Initializer} from '@tensorflow/tfjs-layers/dist/initializers';

import {Int4Layout, Int4Quantized, int4Shapes, quantizeInt4} from '../../ops/int4';
import type {Int4Tensors} from '../../ops/int4_products';
import {
  absMaxQuantizeValues,
  INT8_DTYPE,
  int8Rows,
  isInt8Tensor,
  ownedInt8Tensor,
} from '../../ops/int8';
import type {LayerContract} from '../engine/contract';

/** The quantization modes the package implements (Keras 3's `int8` and `int4`). */
export type QuantizationMode = 'int8' | 'int4';

/** Keras 3.15's default int4 group size (`Int4QuantizationConfig(block_size=128)`). */
export const DEFAULT_INT4_BLOCK_SIZE = 128;

/** Keras 3.15's dtype policy of an int8 layer, as its config writes it. */
export const KERAS_INT8_POLICY = {
  module: 'keras.dtype_policies',
  class_name: 'QuantizedDTypePolicy',
  config: {mode: 'int8', source_name: 'float32'},
  registered_name: null,
} as const;

/** The mode {@link withQuantizationMode} gives layers made without one, or null. */
let scopedMode: QuantizationMode | null = null;
/** The int4 block size {@link withQuantizationMode} gives layers made without one. */
let scopedBlockSize = DEFAULT_INT4_BLOCK_SIZE;

/**
 * Runs `build` with `mode` as the quantization mode of every layer made in it that takes one and
 * is not given one (EinsumDense, ReversibleEmbedding, the composite layers, which pass it on to
 * their sublayers): a model built in its int8 form directly, no float weight allocated (a
 * keras-hub int8 preset, hub_models/build.ts).
 */
export function withQuantizationMode<T>(
  mode: QuantizationMode,
  build: () => T,
  int4BlockSize = DEFAULT_INT4_BLOCK_SIZE,
): T {
  const saved = [scopedMode, scopedBlockSize] as const;
  scopedMode = mode;
  scopedBlockSize = int4BlockSizeOf(int4BlockSize, 'withQuantizationMode');
  try {
    return build();
  } finally {
    [scopedMode, scopedBlockSize] = saved;
  }
}

/**
 * The `quantizationMode` option checked: `'int8'`, or null for a float layer (absent: the mode
 * of {@link withQuantizationMode} around it, else null).
 */
export function quantizationModeOf(value: unknown, where: string): QuantizationMode | null {
  if (value === undefined) return scopedMode;
  if (value == null) return null;
  if (value === 'int8' || value === 'int4') return value;
  throw new Error(
    `${where}: expected quantizationMode 'int8', 'int4' or null, received ${JSON.stringify(value)}`,
  );
}

/**
 * The `int4BlockSize` option checked: Keras' `Int4QuantizationConfig.block_size`, a positive
 * integer (grouped: that many input values per group, asymmetric) or -1 (per channel,
 * symmetric); absent: the block size of {@link withQuantizationMode} around it (default 128).
 */
export function int4BlockSizeOf(value: unknown, where: string): number {
  if (value === undefined) return scopedBlockSize;
  if (value === null) return -1; // Keras' block_size=None: per channel
  if (value === -1 || (Number.isInteger(value) && (value as number) > 0)) return value as number;
  throw new Error(
    `${where}: expected int4BlockSize to be a positive integer or -1 (per channel), received ` +
      `${JSON.stringify(value)}`,
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

/**
 * One int4 weight of a layer (Keras' `quantize("int4")`): a float weight `[rows, cols]` (its
 * values row-major: a Dense kernel, an EinsumDense kernel reshaped as Keras does, a table) held
 * as Keras' variables, laid out as `layout` says (ops/int4.ts).
 */
export interface Int4Weight {
  /** The int4 values two to a byte (dtype `bool`), Keras' `kernel` / `embeddings`. */
  packed: LayerVariable;
  /** float32 scale. */
  scale: LayerVariable;
  /** The zero point per group (grouped only): int8 bytes, or float32 where Keras made it so. */
  zero: LayerVariable | null;
  /** The group of each index along the grouped axis (grouped only), float32. */
  gIdx: LayerVariable | null;
  /** Where the weight is packed and grouped. */
  layout: Int4Layout;
}

/** A layer that holds int8 or int4 weights when its `quantizationMode` says so. */
export interface Int8Layer {
  /** `'int8'`, `'int4'` or null (float). */
  quantizationMode: QuantizationMode | null;
  /** Its int8 weights (empty before build, when float or int4). */
  int8Weights(): Int8Weight[];
  /** Its int4 weights (empty before build, when float or int8). */
  int4Weights(): Int4Weight[];
}

/**
 * A layer's `addWeight` (protected in tfjs: the layer passes `this.addWeight.bind(this)`), with
 * which the int4 helpers below add its non-trainable variables.
 */
export type AddWeight = (
  name: string,
  shape: number[],
  dtype: 'float32' | 'bool',
  initializer: Initializer,
  regularizer: undefined,
  trainable: boolean,
) => LayerVariable;

/** A non-trainable variable of an int4 layer, zeros or ones. */
function frozen(
  add: AddWeight,
  name: string,
  shape: number[],
  dtype: 'float32' | 'bool',
  init: 'zeros' | 'ones' = 'zeros',
): LayerVariable {
  const initializer = init === 'ones' ? initializers.ones() : initializers.zeros();
  return add(name, shape, dtype, initializer, undefined, false);
}

/** An int4 weight's packed values (`kernel`, `embeddings`), bytes in Keras' packed shape. */
export function addInt4Values(add: AddWeight, name: string, layout: Int4Layout): LayerVariable {
  return frozen(add, name, int4Shapes(layout).packed, INT8_DTYPE);
}

/**
 * An int4 embedding table's variables in Keras' order (`embeddings`, `embeddings_scale`,
 * `embeddings_zero`, `g_idx`): Keras' Embedding and the table of its ReversibleEmbedding.
 */
export function addInt4Table(
  add: AddWeight,
  layout: Int4Layout,
): {
  embeddings: LayerVariable;
  scale: LayerVariable;
  zero: LayerVariable | null;
  gIdx: LayerVariable | null;
} {
  const embeddings = addInt4Values(add, 'embeddings', layout);
  const p = addInt4Params(add, layout, {
    scale: 'embeddings_scale',
    zero: 'embeddings_zero',
    gIdx: 'g_idx',
  });
  return {embeddings, ...p};
}

/**
 * Adds an int4 weight's scale, zero point and group index (grouped) after its packed values, in
 * Keras' order and shapes: `names` their Keras names; `zeroDtype` the zero point's (Keras' int8,
 * held as bytes; float32 for a reverse embedding); `gIdx` a group index the layer already has
 * (a reverse embedding shares its table's). The group index is Keras' `floor(i / blockSize)`.
 */
export function addInt4Params(
  add: AddWeight,
  layout: Int4Layout,
  names: {scale: string; zero: string; gIdx: string},
  options: {zeroDtype?: 'bool' | 'float32'; gIdx?: LayerVariable | null} = {},
): {scale: LayerVariable; zero: LayerVariable | null; gIdx: LayerVariable | null} {
  const shapes = int4Shapes(layout);
  const scale = frozen(add, names.scale, shapes.scale, 'float32', 'ones');
  if (shapes.zero == null || shapes.gIdx == null) return {scale, zero: null, gIdx: null};
  const zero = frozen(add, names.zero, shapes.zero, options.zeroDtype ?? INT8_DTYPE);
  let gIdx = options.gIdx ?? null;
  if (gIdx == null) {
    const n = shapes.gIdx[0];
    gIdx = frozen(add, names.gIdx, [n], 'float32');
    const groups = new Float32Array(n);
    for (let i = 0; i < n; i++) groups[i] = Math.floor(i / layout.blockSize);
    const made = tf.tensor1d(groups);
    gIdx.write(made);
    made.dispose();
  }
  return {scale, zero, gIdx};
}

/** An int4 weight's variables read as tensors (ops/int4_products.ts' inputs). */
export function int4TensorsOf(w: Int4Weight): Int4Tensors {
  return {
    packed: w.packed.read(),
    scale: w.scale.read(),
    zero: w.zero?.read() ?? null,
    gIdx: w.gIdx?.read() ?? null,
  };
}

/**
 * Quantizes `float` (the weight's float values, `[rows, cols]` row-major in any shape) as Keras'
 * `quantize("int4")` does (ops/int4.ts' `quantizeInt4`, in JavaScript) into `w`'s variables.
 */
export function quantizeInt4Into(w: Int4Weight, float: tf.Tensor): void {
  const {rows, cols} = w.layout;
  if (float.size !== rows * cols) {
    throw new Error(
      `quantize: weight '${w.packed.originalName}' expected a float weight of ${rows} x ${cols} ` +
        `values, received [${float.shape}]`,
    );
  }
  writeInt4(w, quantizeInt4(float.dataSync() as Float32Array, w.layout));
}

/**
 * Writes a quantized int4 weight (ops/int4.ts' `quantizeInt4`) into `w`'s variables: its packed
 * values, scale and (grouped) zero points and groups.
 */
export function writeInt4(w: Int4Weight, q: Int4Quantized): void {
  tf.tidy(() => {
    w.packed.write(ownedInt8Tensor(q.packed, w.packed.shape as number[]));
    w.scale.write(tf.tensor(q.scale, w.scale.shape as number[]));
    if (w.zero != null && q.zero != null) {
      w.zero.write(
        w.zero.dtype === INT8_DTYPE
          ? ownedInt8Tensor(q.zero, w.zero.shape as number[])
          : tf.tensor(Float32Array.from(q.zero), w.zero.shape as number[]),
      );
    }
    if (w.gIdx != null && q.gIdx != null) w.gIdx.write(tf.tensor(q.gIdx, w.gIdx.shape as number[]));
  });
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
  int4BlockSize: number;
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
export function quantizedForm(
  layer: layers.Layer,
  mode: QuantizationMode,
  int4BlockSize = DEFAULT_INT4_BLOCK_SIZE,
): layers.Layer {
  if ('quantizationMode' in layer) {
    const l = layer as unknown as HasQuantizationMode;
    l.quantizationMode = mode;
    if (mode === 'int4') l.int4BlockSize = int4BlockSize;
    return layer;
  }
  const cls = int8Replacement(layer.getClassName());
  const q = cls?.contract.quantization;
  if (cls == null || q?.kind !== 'replaces') return layer;
  const Ctor = cls as unknown as new (args: tf.serialization.ConfigDict) => layers.Layer;
  return new Ctor(quantizedConfig(q.fromFloat(layer.getConfig()), mode, int4BlockSize));
}

/** A layer config with its quantization options: the mode, and int4's block size. */
export function quantizedConfig(
  config: tf.serialization.ConfigDict,
  mode: QuantizationMode,
  int4BlockSize: number,
): tf.serialization.ConfigDict {
  return mode === 'int4'
    ? {...config, quantizationMode: mode, int4BlockSize}
    : {...config, quantizationMode: mode};
}
