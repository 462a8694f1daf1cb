import * as tf from '@tensorflow/tfjs-core';
import {initializers, layers, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {INT8_DTYPE, int8Projection} from '../../ops/int8';
import {reshapeTo} from '../../ops/reshape';
import {
  Activation,
  ActivationIdentifier,
  getActivation,
  serializeActivation,
} from '../engine/config_objects';
import {checkConstructorArgs} from '../engine/constructor_args';
import {defineContract, LayerContract} from '../engine/contract';
import {alwaysPositionWise} from '../engine/decoding_checks';
import {formatShape, Shape, singleShape} from '../engine/shapes';
import type {Int4Layout} from '../../ops/int4';
import {int4MatMul} from '../../ops/int4_products';
import {
  AddWeight,
  addInt4Params,
  addInt4Values,
  int4BlockSizeOf,
  int4TensorsOf,
  Int4Weight,
  Int8Layer,
  Int8Weight,
  QuantizationMode,
  quantizationModeOf,
} from './quantization';
import {
  addLoraWeights,
  LoraLayer,
  loraMergedFloat,
  LoraOptions,
  loraOutput,
  loraSavedWeights,
  LoraWeights,
  mergeFloatLora,
  removeLoraWeights,
} from './lora';

/** Options of {@link QuantizedDense}. */
export interface QuantizedDenseArgs extends LayerArgs {
  /** Output width. */
  units: number;
  /** Activation after the bias (a tfjs activation name). Default none (linear). */
  activation?: ActivationIdentifier | null;
  /** Whether the layer has a bias. Default true. */
  useBias?: boolean;
  /** `'int8'` (default) or `'int4'` (Keras' `quantize("int4")`, see the class). */
  quantizationMode?: 'int8' | 'int4';
  /**
   * int4 only: input values per group (Keras' `Int4QuantizationConfig.block_size`), or -1 for
   * Keras' per-channel int4. Default 128.
   */
  int4BlockSize?: number;
}

/** tfjs `Dense` config keys kept when `quantize` turns a `Dense` into a `QuantizedDense`. */
const KEPT = ['name', 'trainable', 'units', 'activation', 'useBias', 'batchInputShape', 'dtype'];

/** Keras' int4 Dense kernel `[inputDim, units]`: packed along units, grouped along the input. */
const int4Layout = (inputDim: number, units: number, blockSize: number): Int4Layout => ({
  rows: inputDim,
  cols: units,
  packAxis: 1,
  groupAxis: 0,
  blockSize,
});

/**
 * Keras 3's `Dense` in its int8 form (`model.quantize("int8")`) or its int4 form
 * (`model.quantize("int4")`): what `quantize(model, 'int8' | 'int4')` puts in place of a tfjs
 * `Dense` (which cannot hold either), and what a Keras 3 int8 / int4 `Dense` loads as. Keras sees
 * it as `Dense` with a `QuantizedDTypePolicy` (int8) or an `Int4DTypePolicy`.
 *
 * int4 (`quantizationMode: 'int4'`; Keras 3.15's `_int4_call`, weight-only): `kernel` holds the
 * int4 values two to a byte along the output axis (`[inputDim, ceil(units / 2)]`, the even column
 * in the low nibble), as bytes. Grouped (`int4BlockSize` > 0, Keras' default 128): `kernel_scale`
 * `[groups, units]`, `kernel_zero` int8 `[groups, units]` and `g_idx` `[inputDim]` (the group of
 * each input row), `y = x · ((q - zero) · scale) + bias`, the kernel dequantized a block of rows
 * at a time and multiplied in float32 (ops/int4_products.ts); per channel (`int4BlockSize` -1):
 * `kernel_scale` `[units]`, `y = (x · q) / scale + bias`. The rest of this comment is int8's.
 *
 * `y = activation(int8(x) · kernel / (xScale · kernelScale) + bias)`: each row of the input is
 * quantized at call time (abs-max over the last axis, round half to even, clip ±127), multiplied
 * by the int8 kernel exactly (`ops/int8.ts`), cast to float32 and divided by the product of the
 * two scales, as Keras' `_int8_call` does.
 *
 * Weights, in Keras' order (`kernel`, `bias`, `kernel_scale`):
 * - `kernel` `[inputDim, units]` (Keras' layout): the int8 values in [-127, 127], held as bytes
 *   (tfjs has no int8 dtype: a tensor of tfjs' one-byte dtype `bool`, its bytes the int8 values
 *   in two's complement, one byte per value; `ops/int8.ts`); not trainable. Read its values with
 *   `int8ValuesOf(layer.kernel.read())`.
 * - `bias` `[units]` float32 (when `useBias`).
 * None of them trains: the int8 layers are for inference (Keras trains the bias; this package
 * keeps every weight non-trainable, which also keeps tfjs' weight order Keras' order).
 * - `kernel_scale` `[units]` float32, one per output channel: `float kernel ≈ kernel / kernelScale`
 *   (`layer.kernelScale.read()`); not trainable.
 *
 * LoRA ({@link QuantizedDense.enableLora}, Keras' `enable_lora` on an int8 / int4 Dense): float32
 * `lora_kernel_a` `[inputDim, rank]` and `lora_kernel_b` `[rank, units]`, and
 * `(alpha / rank) · (x A) B` added after the quantized product, before the bias.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {quantize} from 'tfjs-attention';
 *
 * const x = tf.input({shape: [16]});
 * const model = tf.model({inputs: x, outputs: tf.layers.dense({units: 4}).apply(x) as tf.SymbolicTensor});
 * const int8 = quantize(model, 'int8'); // its Dense is now a QuantizedDense
 * const y = int8.predict(tf.ones([2, 16])) as tf.Tensor; // [2, 4]
 * ```
 */
export class QuantizedDense extends layers.Layer implements Int8Layer, LoraLayer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'QuantizedDense';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pathPrefix: 'dense', // Keras' class is Dense
        keys: [
          'units',
          'activation',
          'use_bias',
          'kernel_initializer',
          'bias_initializer',
          'kernel_regularizer',
          'bias_regularizer',
          'activity_regularizer',
          'kernel_constraint',
          'bias_constraint',
          'quantization_config',
          'lora_rank',
          'lora_alpha',
        ],
      },
      keras2: {refused: 'tf-keras 2 has no int8 Dense; export the float model'},
      call: {kind: 'tensor'},
    },
    configKeys: ['units', 'activation', 'useBias', 'quantizationMode', 'int4BlockSize'],
    weights: {
      implied: (c) => ({values: typeof c.units === 'number' ? c.units : 1, option: 'units'}),
    },
    decoding: {
      kind: 'positionWise',
      check: alwaysPositionWise,
    },
    quantization: {
      kind: 'replaces',
      className: 'Dense',
      fromFloat: (config) => {
        const out: tf.serialization.ConfigDict = {};
        for (const k of KEPT) if (config[k] !== undefined) out[k] = config[k];
        return out;
      },
    },
  });

  /** Output width. */
  readonly units: number;
  /** The output activation. */
  readonly activation: Activation;
  /** Whether the layer has a bias. */
  readonly useBias: boolean;
  /** `'int8'` or `'int4'`. */
  quantizationMode: QuantizationMode | null;
  /** int4: input rows per group, or -1 (per channel). */
  int4BlockSize: number;
  /** The int8 kernel `[inputDim, units]` (int8 values held as bytes), at build. */
  kernel: LayerVariable | null = null;
  /** The bias `[units]`, at build when `useBias`. */
  bias: LayerVariable | null = null;
  /** The per-output-channel scale `[units]` (`float ≈ kernel / kernelScale`), at build. */
  kernelScale: LayerVariable | null = null;
  /** int4 grouped: the zero point per group and output `[groups, units]` (int8 bytes). */
  kernelZero: LayerVariable | null = null;
  /** int4 grouped: the group of each input row `[inputDim]`. */
  gIdx: LayerVariable | null = null;
  /** LoRA's weights while enabled ({@link QuantizedDense.enableLora}), else null. */
  lora: LoraWeights | null = null;

  constructor(args: QuantizedDenseArgs) {
    checkConstructorArgs('QuantizedDense', args);
    super(args);
    if (!Number.isInteger(args?.units) || args.units <= 0) {
      throw new Error(
        `QuantizedDense: expected units to be a positive integer, received ${JSON.stringify(args?.units)}`,
      );
    }
    this.units = args.units;
    this.activation = getActivation(args.activation);
    this.useBias = args.useBias ?? true;
    const mode = quantizationModeOf(args.quantizationMode ?? 'int8', 'QuantizedDense');
    this.quantizationMode = mode;
    this.int4BlockSize = int4BlockSizeOf(args.int4BlockSize, 'QuantizedDense');
  }

  /** The int4 kernel's layout, or null when int8 or not built. */
  private int4Layout(): Int4Layout | null {
    if (this.quantizationMode !== 'int4' || this.kernel == null) return null;
    return int4Layout(this.kernel.shape[0] as number, this.units, this.int4BlockSize);
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    const inputDim = shape[shape.length - 1];
    if (typeof inputDim !== 'number') {
      throw new Error(
        `Layer '${this.name}': expected a known last input axis, received ${formatShape(shape)}`,
      );
    }
    const add: AddWeight = this.addWeight.bind(this);
    if (this.quantizationMode === 'int4') {
      // Keras' int4 variables, in its order: kernel, bias, kernel_scale, kernel_zero, g_idx
      const layout = int4Layout(inputDim, this.units, this.int4BlockSize);
      this.kernel = addInt4Values(add, 'kernel', layout);
      this.bias = this.useBias
        ? this.addWeight('bias', [this.units], 'float32', initializers.zeros(), undefined, false)
        : null;
      const p = addInt4Params(add, layout, {
        scale: 'kernel_scale',
        zero: 'kernel_zero',
        gIdx: 'g_idx',
      });
      [this.kernelScale, this.kernelZero, this.gIdx] = [p.scale, p.zero, p.gIdx];
      this.built = true;
      return;
    }
    const zeros = initializers.zeros();
    this.kernel = this.addWeight(
      'kernel',
      [inputDim, this.units],
      INT8_DTYPE,
      zeros,
      undefined,
      false,
    );
    this.bias = this.useBias
      ? this.addWeight('bias', [this.units], 'float32', zeros, undefined, false)
      : null;
    this.kernelScale = this.addWeight(
      'kernel_scale',
      [this.units],
      'float32',
      initializers.ones(),
      undefined,
      false,
    );
    this.built = true;
  }

  /** Its int8 weight: the kernel, scaled per output channel (abs-max over axis 0). */
  int8Weights(): Int8Weight[] {
    if (this.quantizationMode !== 'int8' || this.kernel == null || this.kernelScale == null) {
      return [];
    }
    return [{values: this.kernel, scale: this.kernelScale, axes: [0]}];
  }

  /** Its int4 weight (when int4): the kernel, grouped along the input axis or per channel. */
  int4Weights(): Int4Weight[] {
    const layout = this.int4Layout();
    if (layout == null || this.kernel == null || this.kernelScale == null) return [];
    return [
      {
        packed: this.kernel,
        scale: this.kernelScale,
        zero: this.kernelZero,
        gIdx: this.gIdx,
        layout,
      },
    ];
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    const shape = singleShape(inputShape, this.name);
    return [...shape.slice(0, -1), this.units];
  }

  private where(): string {
    return `QuantizedDense '${this.name}'`;
  }

  /**
   * Keras' `enable_lora(rank, lora_alpha, a_initializer, b_initializer)` on an int8 / int4
   * Dense: adds float32 `lora_kernel_a` `[inputDim, rank]` (heUniform) and `lora_kernel_b`
   * `[rank, units]` (zeros), both trainable; the call then adds `(alpha / rank) · (x A) B` after
   * its quantized product, before the bias and the activation. Refuses a layer not built or
   * already enabled.
   *
   * Args:
   * - `rank`: the rank of A and B (a positive integer).
   * - `options.alpha`: the scale's numerator; default the rank.
   * - `options.aInitializer` / `options.bInitializer`: default `heUniform` / `zeros`.
   */
  enableLora(rank: number, options?: LoraOptions): void {
    const inputDim = this.int4Layout()?.rows ?? (this.kernel?.shape[0] as number | undefined);
    const shape = this.kernel != null && inputDim != null ? [inputDim, this.units] : null;
    this.lora = addLoraWeights(
      this,
      this.addWeight.bind(this),
      this.kernel,
      shape,
      rank,
      options,
      false,
    );
  }

  /** Removes LoRA's weights, leaving the quantized kernel as it was. */
  disableLora(): void {
    if (this.lora == null) return;
    removeLoraWeights(this, this.lora);
    this.lora = null;
  }

  /**
   * Refused (the kernel is quantized): saving the layer merges the update as Keras does
   * ({@link QuantizedDense.mergedWeights}); {@link QuantizedDense.disableLora} removes A and B.
   */
  mergeLora(): void {
    if (this.lora == null) return;
    mergeFloatLora(this, this.lora, this.quantizationMode, this.where());
  }

  /** Refused: the kernel is quantized (see {@link QuantizedDense.mergedWeights}). */
  mergedKernel(): tf.Tensor {
    return loraMergedFloat(this.lora, this.quantizationMode, this.kernel, this.where());
  }

  /**
   * The weights Keras saves in place of this layer's own while LoRA is on
   * (`_get_kernel_with_merged_lora`), as new tensors: the kernel dequantized, the update added
   * and quantized again as Keras quantizes it, with its new scale (int4: and zero points).
   */
  mergedWeights(): Map<LayerVariable, tf.Tensor> {
    return loraSavedWeights(
      this.lora,
      this.quantizationMode,
      this.kernel,
      this.int8Weights()[0],
      this.int4Weights()[0],
      this.where(),
    );
  }

  /** A tensor in, a tensor out; a symbolic tensor in (functional model), a symbolic tensor out. */
  override apply(inputs: tf.Tensor, kwargs?: Kwargs): tf.Tensor;
  override apply(inputs: SymbolicTensor, kwargs?: Kwargs): SymbolicTensor;
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    return super.apply(inputs, kwargs);
  }

  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      if (this.kernel == null || this.kernelScale == null) {
        throw new Error(
          `QuantizedDense '${this.name}' is not built yet: apply it to an input first`,
        );
      }
      const kernel = this.kernel.read() as tf.Tensor2D;
      const rows = reshapeTo(x, [-1, kernel.shape[0]]) as tf.Tensor2D;
      const int4 = this.int4Weights()[0];
      let y: tf.Tensor =
        int4 != null
          ? int4MatMul(rows, int4TensorsOf(int4), int4.layout)
          : int8Projection(rows, kernel, this.kernelScale.read() as tf.Tensor1D);
      // Keras' int8 / int4 call: LoRA's own product after the quantized one, before the bias
      if (this.lora != null)
        y = tf.add(y, loraOutput(tf.matMul(rows, this.lora.a.read()), this.lora));
      if (this.bias != null) y = tf.add(y, this.bias.read());
      y = this.activation.apply(y);
      return reshapeTo(y, [...x.shape.slice(0, -1), this.units]);
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      units: this.units,
      activation: serializeActivation(this.activation),
      useBias: this.useBias,
      ...(this.quantizationMode === 'int4'
        ? {quantizationMode: 'int4', int4BlockSize: this.int4BlockSize}
        : {}),
    };
  }
}
