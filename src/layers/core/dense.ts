/**
 * tfjs' `Dense` with Keras 3's LoRA (`enable_lora`), registered under tfjs' name
 * (`layers/register.ts`) so that loaded models (Keras 3 files, keras-hub presets, tfjs models)
 * get it. Without LoRA it is tfjs' class as it is.
 */
import * as tf from '@tensorflow/tfjs-core';
// tfjs-layers registers its Dense on import; this module extends it
import '@tensorflow/tfjs-layers';
import type {layers, LayerVariable} from '@tensorflow/tfjs-layers';
import type {DenseLayerArgs} from '@tensorflow/tfjs-layers/dist/layers/core';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {addBias} from '../../kernels/bias_add';
import {mm} from '../../kernels/matmul';
import {reshapeTo} from '../../ops/reshape';
import {
  addLoraWeights,
  loraDelta,
  LoraLayer,
  loraMergedFloat,
  LoraOptions,
  loraSavedWeights,
  LoraWeights,
  mergeFloatLora,
  removeLoraWeights,
} from './lora';
import {tfjsClass} from './tfjs_classes';

/** What this module reads of tfjs' Dense. */
type DenseLike = layers.Layer & {
  /** Output width. */
  units: number;
  /** The kernel `[inputDim, units]`, at build. */
  kernel: LayerVariable | null;
  /** The bias `[units]`, at build when the layer has one. */
  bias: LayerVariable | null;
  /** The output activation (tfjs'). */
  activation: {
    /** The activation of `x`. */
    apply(x: tf.Tensor): tf.Tensor;
  } | null;
  /** tfjs' `kernelConstraint` (LoRA refuses a constrained kernel, as Keras does). */
  kernelConstraint?: unknown;
};

/** tfjs' class, taking tfjs' arguments. */
const TfjsDense = tfjsClass<DenseLike>('Dense') as new (args: DenseLayerArgs) => DenseLike;

/**
 * tfjs' `Dense` (`y = activation(x · kernel + bias)`, kernel `[inputDim, units]`), with Keras 3's
 * LoRA: {@link Dense.enableLora} adds `lora_kernel_a` `[inputDim, rank]` and `lora_kernel_b`
 * `[rank, units]`, and the layer then runs the kernel `kernel + (alpha / rank) · A @ B`, as Keras'
 * float `Dense` does. Construct it with tfjs' Dense arguments (`new Dense({units: 8})`); a model
 * loaded from a file has it in place of tfjs' Dense. The int8 / int4 forms are
 * {@link QuantizedDense}.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Dense} from 'tfjs-attention';
 *
 * const dense = new Dense({units: 8});
 * dense.apply(tf.zeros([1, 16]));
 * dense.enableLora(4); // dense.trainableWeights: bias, lora_kernel_a [16, 4], lora_kernel_b [4, 8]
 * ```
 */
export class Dense extends TfjsDense implements LoraLayer {
  /**
   * The name of tfjs' class, which this one replaces in deserialization.
   * @nocollapse
   */
  static readonly className = 'Dense';

  /** LoRA's weights while enabled ({@link Dense.enableLora}), else null. */
  lora: LoraWeights | null = null;

  private where(): string {
    return `Dense '${this.name}'`;
  }

  /**
   * Keras' `enable_lora(rank, lora_alpha, a_initializer, b_initializer)`: adds `lora_kernel_a`
   * `[inputDim, rank]` (heUniform) and `lora_kernel_b` `[rank, units]` (zeros), both trainable
   * float32, and freezes the kernel. Refuses a layer not built, one already enabled, and a
   * `kernelConstraint`, as Keras does.
   *
   * Args:
   * - `rank`: the rank of A and B (a positive integer).
   * - `options.alpha`: the scale's numerator, `(alpha / rank) · A @ B`; default the rank.
   * - `options.aInitializer` / `options.bInitializer`: default `heUniform` / `zeros`.
   */
  enableLora(rank: number, options?: LoraOptions): void {
    this.lora = addLoraWeights(
      this,
      this.addWeight.bind(this),
      this.kernel,
      (this.kernel?.shape as number[] | undefined) ?? null,
      rank,
      options,
      this.kernelConstraint != null,
    );
  }

  /** Removes LoRA's weights, leaving the kernel as it was (and training as it did before). */
  disableLora(): void {
    if (this.lora == null) return;
    removeLoraWeights(this, this.lora);
    this.lora = null;
  }

  /** Adds `(alpha / rank) · A @ B` into the kernel, then removes A and B. */
  mergeLora(): void {
    if (this.lora == null) return;
    mergeFloatLora(this, this.lora, null, this.where());
    this.lora = null;
  }

  /** The kernel with LoRA's update merged in (what Keras saves), as a new tensor. */
  mergedKernel(): tf.Tensor {
    return loraMergedFloat(this.lora, null, this.kernel, this.where());
  }

  /** The weights Keras saves in place of this layer's own while LoRA is on: the merged kernel. */
  mergedWeights(): Map<LayerVariable, tf.Tensor> {
    return loraSavedWeights(this.lora, null, this.kernel, undefined, undefined, this.where());
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    const lora = this.lora;
    if (lora == null || this.kernel == null) return super.call(inputs, kwargs);
    return tf.tidy(() => {
      this.invokeCallHook(inputs, kwargs);
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const kernel = tf.add((this.kernel as LayerVariable).read(), loraDelta(lora));
      const rows = reshapeTo(x, [-1, kernel.shape[0]]);
      let y = mm(rows, kernel);
      if (this.bias != null) y = addBias(y, this.bias.read());
      if (this.activation != null) y = this.activation.apply(y);
      return reshapeTo(y, [...x.shape.slice(0, -1), this.units]);
    });
  }
}
