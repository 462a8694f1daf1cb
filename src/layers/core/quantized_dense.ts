import * as tf from '@tensorflow/tfjs-core';
import {initializers, layers, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {INT8_DTYPE, int8Dense} from '../../ops/int8';
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
import {Int8Layer, Int8Weight, QuantizationMode} from './quantization';

/** Options of {@link QuantizedDense}. */
export interface QuantizedDenseArgs extends LayerArgs {
  /** Output width. */
  units: number;
  /** Activation after the bias (a tfjs activation name). Default none (linear). */
  activation?: ActivationIdentifier | null;
  /** Whether the layer has a bias. Default true. */
  useBias?: boolean;
}

/** tfjs `Dense` config keys kept when `quantize` turns a `Dense` into a `QuantizedDense`. */
const KEPT = ['name', 'trainable', 'units', 'activation', 'useBias', 'batchInputShape', 'dtype'];

/**
 * Keras 3's `Dense` in its int8 form (`model.quantize("int8")`): what `quantize(model, 'int8')`
 * puts in place of a tfjs `Dense` (which cannot hold int8), and what a Keras 3 int8 `Dense` loads
 * as. Keras sees it as `Dense` with a `QuantizedDTypePolicy`.
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
export class QuantizedDense extends layers.Layer implements Int8Layer {
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
    configKeys: ['units', 'activation', 'useBias'],
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
  /** Always `'int8'`. */
  quantizationMode: QuantizationMode | null = 'int8';
  /** The int8 kernel `[inputDim, units]` (int8 values held as bytes), at build. */
  kernel: LayerVariable | null = null;
  /** The bias `[units]`, at build when `useBias`. */
  bias: LayerVariable | null = null;
  /** The per-output-channel scale `[units]` (`float ≈ kernel / kernelScale`), at build. */
  kernelScale: LayerVariable | null = null;

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
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    const inputDim = shape[shape.length - 1];
    if (typeof inputDim !== 'number') {
      throw new Error(
        `Layer '${this.name}': expected a known last input axis, received ${formatShape(shape)}`,
      );
    }
    this.kernel = this.addWeight(
      'kernel',
      [inputDim, this.units],
      INT8_DTYPE,
      initializers.zeros(),
      undefined,
      false,
    );
    this.bias = this.useBias
      ? this.addWeight('bias', [this.units], 'float32', initializers.zeros(), undefined, false)
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
    if (this.kernel == null || this.kernelScale == null) return [];
    return [{values: this.kernel, scale: this.kernelScale, axes: [0]}];
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    const shape = singleShape(inputShape, this.name);
    return [...shape.slice(0, -1), this.units];
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
      let y: tf.Tensor = int8Dense(rows, kernel, this.kernelScale.read() as tf.Tensor1D);
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
    };
  }
}
