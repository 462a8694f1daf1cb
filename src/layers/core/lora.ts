/**
 * LoRA as Keras 3 defines it (`layer.enable_lora(rank, lora_alpha, a_initializer,
 * b_initializer)` on Dense, EinsumDense and Embedding): two float32 weights `lora_kernel_a`
 * (the kernel's shape with its last axis replaced by `rank`) and `lora_kernel_b` (`[rank, last]`),
 * the only ones that train; the effective kernel is `kernel + (alpha / rank) · A @ B`. What the
 * layers share: the options checked, the two weights made, their product, their removal.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {layers, LayerVariable} from '@tensorflow/tfjs-layers';

import {getInitializer, type InitializerIdentifier} from '../engine/config_objects';
import type {AddWeight} from './quantization';

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
}

/** A layer LoRA can be enabled on (EinsumDense, ReversibleEmbedding, QuantizedDense, ...). */
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
 * Adds A and B to a built layer for a kernel of `kernelShape` (Keras' `enable_lora`): refuses a
 * layer not built, one already enabled, and a kernel with a constraint, as Keras does.
 */
export function addLoraWeights(
  layer: layers.Layer & {readonly lora: LoraWeights | null},
  add: AddWeight,
  kernel: LayerVariable | null,
  kernelShape: number[] | null,
  rank: unknown,
  options: LoraOptions | undefined,
  constrained: boolean,
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
    throw new Error(
      `${where}: LoRA cannot take a kernel with a constraint (Keras refuses it too); ` +
        'build the layer without kernelConstraint',
    );
  }
  const last = kernelShape[kernelShape.length - 1];
  // beside the kernel (`.../query/kernel` -> `.../query/lora_kernel_a`), as Keras names them
  const folder = kernel.originalName.slice(0, kernel.originalName.lastIndexOf('/') + 1);
  const a = add(
    `${folder}lora_kernel_a`,
    [...kernelShape.slice(0, -1), scale.rank],
    'float32',
    getInitializer(options?.aInitializer, 'heUniform'),
    undefined,
    true,
  );
  const b = add(
    `${folder}lora_kernel_b`,
    [scale.rank, last],
    'float32',
    getInitializer(options?.bInitializer, 'zeros'),
    undefined,
    true,
  );
  return {...scale, a, b};
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
}

/** Whether `v` is one of the LoRA weights of `layer`. */
export function isLoraWeight(layer: layers.Layer, v: LayerVariable): boolean {
  const w = isLoraLayer(layer) ? layer.lora : null;
  return w != null && (v === w.a || v === w.b);
}
