/**
 * LoRA as Keras 3 defines it (`layer.enable_lora(rank, lora_alpha, a_initializer, b_initializer)`
 * on Dense, EinsumDense, Embedding and keras-hub's ReversibleEmbedding): two float32 weights A
 * (the kernel's shape with its last axis replaced by `rank`) and B (`[rank, last]`), the only ones
 * that train; the effective kernel is `kernel + (alpha / rank) · A @ B`. Dense and EinsumDense
 * name them `lora_kernel_a` / `lora_kernel_b`, Embedding (and ReversibleEmbedding)
 * `lora_embeddings_a` / `lora_embeddings_b`. What the layers share: the options checked, the two
 * weights made, their product, the update's term after a quantized product or lookup, the weights
 * Keras saves with the update merged in, their removal.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {layers, LayerVariable} from '@tensorflow/tfjs-layers';

import {getInitializer, type InitializerIdentifier} from '../engine/config_objects';
import {gatherRows} from '../../ops/gather_rows';
import {int4Shapes, quantizeInt4} from '../../ops/int4';
import {int4ToFloat} from '../../ops/int4_products';
import {absMaxQuantizeValues, int8ToFloat, ownedInt8Tensor} from '../../ops/int8';
import {AddWeight, int4TensorsOf, Int4Weight, Int8Weight} from './quantization';

/** Options of a layer's `enableLora` (Keras' `enable_lora` arguments). */
export interface LoraOptions {
  /** The scale's numerator: the update is `(alpha / rank) · A @ B`. Default: the rank. */
  alpha?: number;
  /** Initializer of A (Keras' `a_initializer`). Default `heUniform`. */
  aInitializer?: InitializerIdentifier;
  /** Initializer of B (Keras' `b_initializer`). Default `zeros` (the update starts at zero). */
  bInitializer?: InitializerIdentifier;
}

/** A layer's LoRA weights and scale, once enabled. */
export interface LoraWeights {
  /** The rank of A and B. */
  rank: number;
  /** The scale's numerator: the update is `(alpha / rank) · A @ B`. */
  alpha: number;
  /** `lora_kernel_a`: `[...kernel.shape[:-1], rank]`. */
  a: LayerVariable;
  /** `lora_kernel_b`: `[rank, kernel.shape[-1]]`. */
  b: LayerVariable;
  /** The weight LoRA adapts (the kernel, or an embedding table), frozen while LoRA is on. */
  base: LayerVariable;
  /** Whether {@link LoraWeights.base} trained before: given back when LoRA is removed. */
  baseTrainable: boolean;
  /** What A and B are named after: `'kernel'` (`lora_kernel_a`) or `'embeddings'`. */
  kind: LoraWeightKind;
}

/**
 * What a layer's A and B are named after: `'kernel'` (Dense, EinsumDense: `lora_kernel_a`,
 * refused with a `kernelConstraint`) or `'embeddings'` (Embedding, ReversibleEmbedding:
 * `lora_embeddings_a`, refused with an `embeddingsConstraint`).
 */
export type LoraWeightKind = 'kernel' | 'embeddings';

/**
 * A layer LoRA can be enabled on: EinsumDense, the package's Dense and Embedding (tfjs' classes,
 * extended), QuantizedDense, QuantizedEmbedding, ReversibleEmbedding.
 */
export interface LoraLayer extends layers.Layer {
  /** The LoRA weights, or null while LoRA is off. */
  readonly lora: LoraWeights | null;
  /** Keras' `enable_lora`: adds A and B (trainable) and freezes the kernel. */
  enableLora(rank: number, options?: LoraOptions): void;
  /** Adds `(alpha / rank) · A @ B` into the kernel (float layers), then removes A and B. */
  mergeLora(): void;
  /** Removes A and B without changing the kernel (the kernel trains again). */
  disableLora(): void;
  /** The kernel as Keras saves it: with the update merged in (float32, the kernel's shape). */
  mergedKernel(): tf.Tensor;
  /**
   * The weights Keras saves in place of the layer's own (the merged kernel; for int8 also its
   * new scale), each a new tensor.
   */
  mergedWeights(): Map<LayerVariable, tf.Tensor>;
}

/** Whether `layer` takes LoRA (has `enableLora`). */
export function isLoraLayer(layer: unknown): layer is LoraLayer {
  return (
    layer != null &&
    typeof (layer as LoraLayer).enableLora === 'function' &&
    typeof (layer as LoraLayer).disableLora === 'function'
  );
}

/** The rank and alpha checked (`where` names the layer in errors). */
export function loraScale(
  rank: unknown,
  options: LoraOptions | undefined,
  where: string,
): {rank: number; alpha: number} {
  if (typeof rank !== 'number' || !Number.isInteger(rank) || rank < 1) {
    throw new Error(`${where}: expected the LoRA rank to be a positive integer, received ${rank}`);
  }
  if (options != null && (typeof options !== 'object' || Array.isArray(options))) {
    throw new Error(`${where}: expected LoRA options as an object, received ${String(options)}`);
  }
  const known = ['alpha', 'aInitializer', 'bInitializer'];
  const unknown = Object.keys(options ?? {}).filter((k) => !known.includes(k));
  if (unknown.length > 0) {
    throw new Error(
      `${where}: unknown LoRA option(s) ${unknown.join(', ')}; expected ${known.join(', ')}`,
    );
  }
  const alpha = options?.alpha ?? rank;
  if (typeof alpha !== 'number' || !Number.isFinite(alpha) || alpha <= 0) {
    throw new Error(`${where}: expected LoRA alpha to be a positive number, received ${alpha}`);
  }
  return {rank, alpha};
}

/**
 * Adds A and B to a built layer for a kernel of `kernelShape` (Keras' `enable_lora`) and freezes
 * the kernel: refuses a layer not built, one already enabled, and a kernel with a constraint, as
 * Keras does. `kind` names A and B (`lora_kernel_*` or `lora_embeddings_*`).
 */
export function addLoraWeights(
  layer: layers.Layer & {readonly lora: LoraWeights | null},
  add: AddWeight,
  kernel: LayerVariable | null,
  kernelShape: number[] | null,
  rank: unknown,
  options: LoraOptions | undefined,
  constrained: boolean,
  kind: LoraWeightKind = 'kernel',
): LoraWeights {
  const where = `${layer.getClassName()} '${layer.name}'`;
  const scale = loraScale(rank, options, where);
  if (kernel == null || kernelShape == null || !layer.built) {
    throw new Error(`${where}: cannot enable LoRA on a layer that is not built yet`);
  }
  if (layer.lora != null) {
    throw new Error(`${where}: LoRA is already enabled (rank ${layer.lora.rank}); only once`);
  }
  if (constrained) {
    const what = kind === 'kernel' ? 'a kernel' : 'an embedding table';
    throw new Error(
      `${where}: LoRA cannot take ${what} with a constraint (Keras refuses it too); ` +
        `build the layer without ${kind}Constraint`,
    );
  }
  const last = kernelShape[kernelShape.length - 1];
  // beside the kernel (`.../query/kernel` -> `.../query/lora_kernel_a`), as Keras names them
  const folder = kernel.originalName.slice(0, kernel.originalName.lastIndexOf('/') + 1);
  const a = add(
    `${folder}lora_${kind}_a`,
    [...kernelShape.slice(0, -1), scale.rank],
    'float32',
    getInitializer(options?.aInitializer, 'heUniform'),
    undefined,
    true,
  );
  const b = add(
    `${folder}lora_${kind}_b`,
    [scale.rank, last],
    'float32',
    getInitializer(options?.bInitializer, 'zeros'),
    undefined,
    true,
  );
  const baseTrainable = kernel.trainable;
  kernel.trainable = false;
  return {...scale, a, b, base: kernel, baseTrainable, kind};
}

/**
 * `(alpha / rank) · A @ B` in the kernel's shape (Keras' `ops.matmul` of an N-D A with B:
 * A's leading axes kept).
 */
export function loraDelta(w: LoraWeights): tf.Tensor {
  return tf.tidy(() => {
    const a = w.a.read();
    const b = w.b.read();
    const lead = a.shape.slice(0, -1);
    const ab = tf.matMul(tf.reshape(a, [-1, w.rank]), b); // [prod lead, last]
    return tf.mul(tf.reshape(ab, [...lead, b.shape[1] as number]), w.alpha / w.rank);
  });
}

/**
 * `(alpha / rank) · (x A) B` for an input already contracted with A (`xa`: `[..., rank]`), as
 * Keras adds it after an int8 / int4 product.
 */
export function loraOutput(xa: tf.Tensor, w: LoraWeights): tf.Tensor {
  return tf.tidy(() => {
    const lead = xa.shape.slice(0, -1);
    const b = w.b.read();
    const y = tf.matMul(tf.reshape(xa, [-1, w.rank]), b);
    return tf.mul(tf.reshape(y, [...lead, b.shape[1] as number]), w.alpha / w.rank);
  });
}

/**
 * `(alpha / rank) · A[ids] @ B` (`[...ids.shape, last]`): what Keras adds to the rows an int8 /
 * int4 Embedding looks up (`ops.take(lora_embeddings_a, ids) @ lora_embeddings_b`), and what a
 * float one's rows of `embeddings + (alpha / rank) · A @ B` differ by, without the whole update.
 */
export function loraRows(ids: tf.Tensor, w: LoraWeights): tf.Tensor {
  return tf.tidy(() => {
    // A's rows, with A's gradient on every backend (tfjs' gather gradient has no wasm kernel)
    const rows = gatherRows(w.a.read(), ids.dtype === 'int32' ? ids : tf.cast(ids, 'int32'));
    return tf.reshape(loraOutput(rows, w), [...ids.shape, w.b.shape[1] as number]);
  });
}

/**
 * `x · (table + (alpha / rank) · A @ B)ᵀ - x · tableᵀ` = `(alpha / rank) · (x Bᵀ) Aᵀ` for `x`
 * `[N, last]` and A `[V, rank]`: the update's share of a tied embedding's logits, without the
 * `[V, last]` update.
 */
export function loraTransposedOutput(x: tf.Tensor2D, w: LoraWeights): tf.Tensor2D {
  return tf.tidy(() => {
    const xb = tf.matMul(x, w.b.read() as tf.Tensor2D, false, true); // [N, rank]
    return tf.mul(tf.matMul(xb, w.a.read() as tf.Tensor2D, false, true), w.alpha / w.rank);
  });
}

/** A float kernel with LoRA's update merged in, as a new tensor (a clone without LoRA). */
export function mergedFloatKernel(kernel: tf.Tensor, lora: LoraWeights | null): tf.Tensor {
  return lora == null ? tf.clone(kernel) : tf.tidy(() => tf.add(kernel, loraDelta(lora)));
}

/**
 * Merges `(alpha / rank) · A @ B` into a float layer's kernel (`lora.base`), then takes A and B
 * off the layer (Keras saves this kernel; `where` names the layer in the refusal of a quantized
 * one, whose merge happens when it is saved).
 */
export function mergeFloatLora(
  layer: layers.Layer,
  lora: LoraWeights,
  quantizationMode: string | null | undefined,
  where: string,
): void {
  if (quantizationMode != null) {
    throw new Error(
      `${where}: mergeLora takes a float kernel; this one is ${quantizationMode} ` +
        '(saving it merges the update as Keras does)',
    );
  }
  const merged = mergedFloatKernel(lora.base.read(), lora);
  lora.base.write(merged);
  merged.dispose();
  removeLoraWeights(layer, lora);
}

/**
 * An int8 kernel with LoRA's update merged in, as Keras saves it: new int8 values (bytes) and
 * their scale in the stored layout. `where` names the layer in the refusal of a scale stored
 * transposed (no keras-hub projection has one).
 */
export function mergedInt8Weights(
  w: Int8Weight,
  lora: LoraWeights,
  where: string,
): Map<LayerVariable, tf.Tensor> {
  const shape = w.values.shape as number[];
  const kept = shape.map((d, i) => (w.axes.includes(i) ? 1 : d));
  const stored = w.scale.read();
  const scale = tf.tidy(() => {
    // the kept-dims scale whose stored layout is the layer's: a reshape where the layout keeps
    // the values' order
    const candidate = tf.reshape(stored, kept);
    const back = tf.reshape(w.layout?.(candidate) ?? candidate, stored.shape);
    if (tf.all(tf.equal(back, stored)).dataSync()[0] !== 1) {
      throw new Error(
        `${where}: merging LoRA into this int8 kernel is not implemented (its scale is stored ` +
          'transposed)',
      );
    }
    return candidate;
  });
  try {
    const merged = tf.tidy(() =>
      tf.add(tf.div(int8ToFloat(w.values.read()), scale), loraDelta(lora)),
    );
    const q = absMaxQuantizeValues(merged.dataSync() as Float32Array, shape, w.axes);
    merged.dispose();
    const newScale = tf.tidy(() => {
      const s = tf.tensor(q.scale, q.scaleShape);
      return tf.reshape(w.layout?.(s) ?? s, stored.shape as number[]);
    });
    return new Map([
      [w.values, ownedInt8Tensor(q.values, shape)],
      [w.scale, newScale],
    ]);
  } finally {
    scale.dispose();
  }
}

/**
 * An int4 weight `[rows, cols]` with LoRA's update merged in, as Keras saves it (Dense's and
 * Embedding's `_get_*_with_merged_lora`): dequantized, the update added, quantized again as
 * Keras' `quantize("int4")` quantizes that layout (grouped with zero points, or per channel) and
 * packed: new packed values, scale and (grouped) zero points; the groups (`g_idx`) stay.
 */
export function mergedInt4Weights(w: Int4Weight, lora: LoraWeights): Map<LayerVariable, tf.Tensor> {
  const merged = tf.tidy(() => {
    const float = int4ToFloat(int4TensorsOf(w), w.layout);
    return tf.add(float, tf.reshape(loraDelta(lora), float.shape));
  });
  const q = quantizeInt4(merged.dataSync() as Float32Array, w.layout);
  merged.dispose();
  const shapes = int4Shapes(w.layout);
  const out = new Map<LayerVariable, tf.Tensor>([
    [w.packed, ownedInt8Tensor(q.packed, shapes.packed)],
    [w.scale, tf.tensor(q.scale, w.scale.shape as number[])],
  ]);
  if (w.zero != null && q.zero != null) {
    const shape = w.zero.shape as number[];
    // Keras makes an untied reverse table's zero point float32, the others int8
    const zero =
      w.zero.dtype === 'float32'
        ? tf.tensor(Float32Array.from(q.zero), shape)
        : ownedInt8Tensor(q.zero, shape);
    out.set(w.zero, zero);
  }
  return out;
}

/** Takes A and B off `layer` (its weight lists) and disposes them. */
export function removeLoraWeights(layer: layers.Layer, w: LoraWeights): void {
  const held = layer as unknown as {
    _trainableWeights: LayerVariable[];
    _nonTrainableWeights: LayerVariable[];
    _addedWeightNames: string[];
  };
  const gone = (v: LayerVariable) => v !== w.a && v !== w.b;
  held._trainableWeights = held._trainableWeights.filter(gone);
  held._nonTrainableWeights = held._nonTrainableWeights.filter(gone);
  // tfjs' addWeight refuses a name it added before: free A's and B's for a later enableLora
  const names = [w.a.originalName, w.b.originalName];
  held._addedWeightNames = held._addedWeightNames.filter((n) => !names.includes(n));
  w.a.dispose();
  w.b.dispose();
  w.base.trainable = w.baseTrainable;
}

/** Whether `v` is one of the LoRA weights of `layer`. */
export function isLoraWeight(layer: layers.Layer, v: LayerVariable): boolean {
  const w = isLoraLayer(layer) ? layer.lora : null;
  return w != null && (v === w.a || v === w.b);
}

/**
 * The weights Keras saves in place of a layer's own while LoRA is on (`save_own_variables`), as
 * new tensors: float (`quantizationMode` null), `float` with the update merged in; int8, the
 * int8 weight requantized with its new scale; int4, the int4 weight requantized (new packed
 * values, scale and zero points). Without LoRA, `float`'s value (a copy) or nothing.
 */
export function loraSavedWeights(
  lora: LoraWeights | null,
  quantizationMode: string | null | undefined,
  float: LayerVariable | null,
  int8: Int8Weight | undefined,
  int4: Int4Weight | undefined,
  where: string,
): Map<LayerVariable, tf.Tensor> {
  if (float == null) throw new Error(`${where} is not built yet: apply it to an input first`);
  if (quantizationMode == null) return new Map([[float, mergedFloatKernel(float.read(), lora)]]);
  if (lora == null) return new Map();
  if (quantizationMode === 'int8' && int8 != null) return mergedInt8Weights(int8, lora, where);
  if (quantizationMode === 'int4' && int4 != null) return mergedInt4Weights(int4, lora);
  throw new Error(`${where}: merging LoRA into a ${quantizationMode} weight is not implemented`);
}

/** The float kernel (or table) with LoRA's update merged in; refused for a quantized one. */
export function loraMergedFloat(
  lora: LoraWeights | null,
  quantizationMode: string | null | undefined,
  float: LayerVariable | null,
  where: string,
): tf.Tensor {
  if (float == null) throw new Error(`${where} is not built yet: apply it to an input first`);
  if (quantizationMode != null) {
    throw new Error(
      `${where}: its weight is ${quantizationMode}; mergedWeights() gives what Keras saves ` +
        '(requantized with the update)',
    );
  }
  return mergedFloatKernel(float.read(), lora);
}
