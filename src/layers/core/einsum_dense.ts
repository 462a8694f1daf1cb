import * as tf from '@tensorflow/tfjs-core';
import {initializers, layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {einsum} from '../../ops/einsum';
import {addBias} from '../../kernels/bias_add';
import {reshapeTo} from '../../ops/reshape';
import {mm} from '../../kernels/matmul';
import {fusedBiasProduct} from './fused_ops';
import {
  Activation,
  ActivationIdentifier,
  getActivation,
  serializeActivation,
} from '../engine/config_objects';
import {analyzeEinsumDense, denseBoundAxes, Dim} from './einsum_dense_shapes';
import {
  projectionConfig,
  ProjectionArgs,
  projectionOptions,
  ProjectionOptions,
} from './projection_options';
import {singleShape, Shape} from '../engine/shapes';
import {defineContract, LayerContract} from '../engine/contract';
import {einsumKeepsSequence} from '../engine/decoding_checks';
import {PROJECTION_CONFIG_KEYS, PROJECTION_KERAS3_KEYS} from './projection_options';
import {checkConstructorArgs} from '../engine/constructor_args';
import {INT8_DTYPE, int8Projection} from '../../ops/int8';
import type {Int4Layout} from '../../ops/int4';
import {einsumInt4Product, Int4KernelView, int4KernelView} from './einsum_int4';
import {einsumLoraTerm} from './einsum_lora';
import {
  AddWeight,
  addInt4Params,
  addInt4Values,
  int4BlockSizeOf,
  Int4Weight,
  Int8Layer,
  Int8Weight,
  QuantizationMode,
  quantizationModeOf,
} from './quantization';
import {
  EinsumInt8Plan,
  einsumInt8Plan,
  int8Einsum,
  kernelScaleShape,
  layoutScale,
} from './einsum_int8';
import {
  addLoraWeights,
  loraDelta,
  LoraLayer,
  LoraOptions,
  LoraWeights,
  mergedFloatKernel,
  mergedInt8Weights,
  mergeFloatLora,
  removeLoraWeights,
} from './lora';

/** Options of {@link EinsumDense}. */
export interface EinsumDenseArgs extends LayerArgs, ProjectionArgs {
  /** An equation `X,Y->Z` (or with `...`) contracting the input `X` with the kernel `Y`. */
  equation: string;
  /** The output shape without the batch axis; null entries are taken from the input. */
  outputShape: number | Dim[];
  /** Output letters that carry a bias (e.g. `'de'`); none when omitted. */
  biasAxes?: string | null;
  /** Activation applied to the output (a tfjs activation name). Default none (linear). */
  activation?: ActivationIdentifier | null;
  /**
   * `'int8'`: Keras 3's int8 form (`model.quantize("int8")`), weights `kernel` (int8 values),
   * `bias`, `kernel_scale` (its axes derived from the equation as Keras does); any equation Keras
   * 3.15 quantizes (letters only, no ellipsis). `'int4'`: Keras 3.15's int4 form (see the
   * class). Default null (float).
   */
  quantizationMode?: QuantizationMode | null;
  /** int4 only: kernel rows per group (Keras' `block_size`, default 128), or -1 (per channel). */
  int4BlockSize?: number;
}

/**
 * A dense layer of any rank, given as an einsum equation (Keras `EinsumDense`):
 * `y = activation(einsum(equation, x, kernel) + bias)`.
 *
 * - Input: the shape named by `X` (batch first), e.g. `[batch, seq, dim]` for `'abc,cde->abde'`.
 * - Output: `[batch, ...outputShape]`.
 * - Weights: `kernel` with the letters of `Y`, `bias` over `biasAxes` (Keras layout).
 * - int8 (`quantizationMode: 'int8'`, what `quantize(model, 'int8')` gives; Keras 3's
 *   `_int8_call`): `kernel` holds the int8 values (in [-127, 127]) as bytes (dtype `bool`, one
 *   byte per value, `ops/int8.ts`), not trainable; `kernelScale` (weight `kernel_scale`, float32, Keras' stored shape:
 *   the output's rank with the kernel's output axes `O` at the end and 1 elsewhere, e.g.
 *   `[1, 1, heads, headDim]`) holds one scale per output channel, `float ≈ kernel / scale`. Each
 *   input row is quantized at call time (abs-max over the contracted axes), multiplied by the
 *   kernel exactly, cast to float32 and divided by (input scale · kernel scale); then the bias
 *   and the activation. Read them with `layer.kernel.read()` and `layer.kernelScale.read()`.
 * - int4 (`quantizationMode: 'int4'`; Keras 3.15's `_int4_call`, weight-only): the kernel is
 *   viewed as Keras views it, `[rows, cols]` (rows: the product of the contracted kernel axes,
 *   cols: of the others; a reshape of the kernel, not a transpose, as Keras does it), its int4
 *   values held two to a byte along cols (`kernel` `[rows, ceil(cols / 2)]`). Grouped
 *   (`int4BlockSize` > 0): `kernel_scale` and int8 `kernel_zero` `[groups, cols]`, `g_idx`
 *   `[rows]`, the kernel `(q - zero) · scale`; per channel (-1): `kernel_scale` `[cols]`, the
 *   kernel `q / scale`; then the float einsum, the bias and the activation (ops/int4_products.ts;
 *   the dense equations a block of kernel rows at a time).
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {EinsumDense} from 'tfjs-attention';
 *
 * // project [batch, seq, 16] to [batch, seq, 4 heads, 8] as MultiHeadAttention does
 * const proj = new EinsumDense({equation: 'abc,cde->abde', outputShape: [null, 4, 8], biasAxes: 'de'});
 * const y = proj.apply(tf.zeros([2, 5, 16])); // [2, 5, 4, 8]
 * ```
 */
export class EinsumDense extends layers.Layer implements Int8Layer, LoraLayer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'EinsumDense';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        keys: ['equation', 'output_shape', 'activation', 'bias_axes'].concat(
          PROJECTION_KERAS3_KEYS,
        ),
      },
      keras2: {},
      call: {kind: 'tensor'},
    },
    configKeys: [
      'outputShape',
      'equation',
      'activation',
      'biasAxes',
      ...PROJECTION_CONFIG_KEYS,
      'quantizationMode',
      'int4BlockSize',
    ],
    weights: {
      implied: (c) => {
        const shape = Array.isArray(c.outputShape) ? c.outputShape : [c.outputShape];
        const values = shape.reduce<number>(
          (p, d) => p * (typeof d === 'number' && d > 0 ? d : 1),
          1,
        );
        return {values, option: 'outputShape'};
      },
    },
    decoding: {kind: 'positionWise', check: einsumKeepsSequence},
    quantization: {kind: 'own'},
  });

  /** The `equation` option. */
  readonly equation: string;
  /** The output shape without the batch axis (null entries taken from the input). */
  readonly partialOutputShape: Dim[];
  /** The `biasAxes` option (null: no bias). */
  readonly biasAxes: string | null;
  /** The output activation. */
  readonly activation: Activation;
  /** Initializers, regularizers and constraints of the kernel and bias. */
  readonly projection: ProjectionOptions;
  /** The user's outputShape as given (a number stays a number), for the config. */
  private readonly outputShapeArg: number | Dim[];

  /** The kernel, created at build. */
  kernel: LayerVariable | null = null;
  /** The bias, created at build when `biasAxes` is given. */
  bias: LayerVariable | null = null;
  /** `'int8'` (Keras' int8 form) or null (float); set before build. */
  quantizationMode: QuantizationMode | null;
  /** int4: kernel rows per group, or -1 (per channel). */
  int4BlockSize: number;
  /** The int8 kernel's scale per output channel (Keras' `kernel_scale`), at build when int8. */
  kernelScale: LayerVariable | null = null;
  /** int4 grouped: the zero point per group and column (int8 bytes), at build. */
  kernelZero: LayerVariable | null = null;
  /** int4 grouped: the group of each kernel row, at build. */
  gIdx: LayerVariable | null = null;
  /** LoRA's weights while enabled ({@link EinsumDense.enableLora}), else null. */
  lora: LoraWeights | null = null;
  /** Whether the kernel trained before LoRA froze it. */
  /** int4: the kernel's `[rows, cols]` view, at build. */
  private int4View: Int4KernelView | null = null;

  constructor(args: EinsumDenseArgs) {
    checkConstructorArgs('EinsumDense', args);
    super(args);
    if (args == null || typeof args.equation !== 'string') {
      throw new Error(
        `EinsumDense: expected an 'equation' string, received ${JSON.stringify(args?.equation)}`,
      );
    }
    const os = args.outputShape;
    const valid =
      (typeof os === 'number' && Number.isInteger(os) && os > 0) ||
      (Array.isArray(os) &&
        os.every((d) => d === null || (Number.isInteger(d) && (d as number) > 0)));
    if (!valid) {
      throw new Error(
        `EinsumDense: expected outputShape to be a positive integer or an array of positive ` +
          `integers / nulls, received ${JSON.stringify(os)}`,
      );
    }
    this.equation = args.equation;
    this.outputShapeArg = os;
    this.partialOutputShape = typeof os === 'number' ? [os] : [...os];
    this.biasAxes = args.biasAxes ?? null;
    this.activation = getActivation(args.activation);
    this.projection = projectionOptions(args, 'EinsumDense');
    this.quantizationMode = quantizationModeOf(args.quantizationMode, 'EinsumDense');
    this.int4BlockSize = int4BlockSizeOf(args.int4BlockSize, 'EinsumDense');
    this.supportsMasking = false;
  }

  private shapes(inputShape: Shape) {
    return analyzeEinsumDense(this.equation, this.biasAxes, inputShape, this.partialOutputShape);
  }

  override build(inputShape: Shape | Shape[]): void {
    const shape = singleShape(inputShape, this.name);
    if (this.quantizationMode === 'int8') {
      this.buildInt8(shape);
      return;
    }
    if (this.quantizationMode === 'int4') {
      this.buildInt4(shape);
      return;
    }
    const {kernelShape, biasShape} = this.shapes(shape);
    this.kernel = this.addWeight(
      'kernel',
      kernelShape,
      'float32',
      this.projection.kernelInitializer,
      this.projection.kernelRegularizer ?? undefined,
      true,
      this.projection.kernelConstraint ?? undefined,
    );
    this.bias =
      biasShape == null
        ? null
        : this.addWeight(
            'bias',
            biasShape,
            'float32',
            this.projection.biasInitializer,
            this.projection.biasRegularizer ?? undefined,
            true,
            this.projection.biasConstraint ?? undefined,
          );
    this.built = true;
  }

  /** Keras' int8 weights, in its order: kernel (int8 values), bias, kernel_scale. */
  private buildInt8(shape: Shape): void {
    const plan = this.int8Plan();
    const {kernelShape, biasShape} = this.shapes(shape);
    const scaleShape = kernelScaleShape(plan, kernelShape);
    const zeros = initializers.zeros();
    this.kernel = this.addWeight('kernel', kernelShape, INT8_DTYPE, zeros, undefined, false);
    this.bias =
      biasShape == null
        ? null
        : this.addWeight(
            'bias',
            biasShape,
            'float32',
            this.projection.biasInitializer,
            undefined,
            false, // int8 layers are for inference; their weights keep Keras' order this way
          );
    this.kernelScale = this.addWeight(
      'kernel_scale',
      scaleShape,
      'float32',
      initializers.ones(),
      undefined,
      false,
    );
    this.built = true;
  }

  /**
   * Keras' int4 weights, in its order: kernel (int4 values, two to a byte), bias, kernel_scale,
   * kernel_zero and g_idx (grouped).
   */
  private buildInt4(shape: Shape): void {
    const plan = this.int8Plan(); // Keras' _set_quantization_info, as for int8
    const {kernelShape, biasShape} = this.shapes(shape);
    this.int4View = int4KernelView(plan, kernelShape);
    const add: AddWeight = this.addWeight.bind(this);
    const layout = this.int4Layout() as Int4Layout;
    this.kernel = addInt4Values(add, 'kernel', layout);
    this.bias =
      biasShape == null
        ? null
        : this.addWeight(
            'bias',
            biasShape,
            'float32',
            this.projection.biasInitializer,
            undefined,
            false,
          );
    const p = addInt4Params(add, layout, {
      scale: 'kernel_scale',
      zero: 'kernel_zero',
      gIdx: 'g_idx',
    });
    [this.kernelScale, this.kernelZero, this.gIdx] = [p.scale, p.zero, p.gIdx];
    this.built = true;
  }

  /**
   * The kernel's shape as the equation takes it (built: an int4 kernel's variable holds its
   * packed bytes, not that shape), or null before build.
   */
  kernelShape(): number[] | null {
    if (this.int4View != null) return [...this.int4View.kernelShape];
    return this.kernel == null ? null : (this.kernel.shape as number[]);
  }

  /** The int4 kernel's layout (`[rows, cols]`, packed along cols, grouped along rows), or null. */
  private int4Layout(): Int4Layout | null {
    if (this.quantizationMode !== 'int4' || this.int4View == null) return null;
    const {rows, cols} = this.int4View;
    return {rows, cols, packAxis: 1, groupAxis: 0, blockSize: this.int4BlockSize};
  }

  /** Its int4 weight (when int4): the kernel's `[rows, cols]` view. */
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

  /**
   * Keras' int8 plan of the equation (`_analyze_quantization_info`: the axes quantized together,
   * the scale's layout); an equation Keras cannot quantize is an error naming the layer.
   */
  private int8Plan(): EinsumInt8Plan {
    const plan = einsumInt8Plan(this.equation);
    if (typeof plan === 'string') {
      throw new Error(
        `EinsumDense '${this.name}': int8 cannot take the equation '${this.equation}': ${plan}`,
      );
    }
    return plan;
  }

  /**
   * Its int8 weight (when int8): the kernel, scaled over the kernel axes the equation contracts
   * (Keras' `kernel_reduced_axes`), the scale stored in Keras' layout.
   */
  int8Weights(): Int8Weight[] {
    if (this.quantizationMode !== 'int8' || this.kernel == null || this.kernelScale == null) {
      return [];
    }
    const plan = this.int8Plan();
    return [
      {
        values: this.kernel,
        scale: this.kernelScale,
        axes: plan.kernelLayout.reduced,
        layout: (scale) => layoutScale(scale, plan.kernelLayout),
      },
    ];
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return this.shapes(singleShape(inputShape, this.name)).outputShape;
  }

  /**
   * Keras' `enable_lora(rank, lora_alpha, a_initializer, b_initializer)`: adds `lora_kernel_a`
   * (the kernel's shape with its last axis `rank`, heUniform) and `lora_kernel_b`
   * (`[rank, last]`, zeros), both trainable, and freezes the kernel. A float layer then runs the
   * kernel `kernel + (alpha / rank) · A @ B`; an int8 / int4 layer adds `(alpha / rank) ·
   * einsum(x, A) @ B` to its quantized product, before the bias (as Keras does both).
   *
   * @example
   * ```ts
   * const proj = new EinsumDense({equation: 'abc,cd->abd', outputShape: [null, 8]});
   * proj.apply(tf.zeros([1, 2, 16]));
   * proj.enableLora(4); // proj.trainableWeights: lora_kernel_a [16, 4], lora_kernel_b [4, 8]
   * ```
   */
  enableLora(rank: number, options?: LoraOptions): void {
    this.lora = addLoraWeights(
      this,
      this.addWeight.bind(this),
      this.kernel,
      this.kernelShape(),
      rank,
      options,
      this.projection.kernelConstraint != null,
    );
  }

  /** Removes LoRA's weights, leaving the kernel as it was (and training as it did before). */
  disableLora(): void {
    if (this.lora == null) return;
    removeLoraWeights(this, this.lora);
    this.lora = null;
  }

  /**
   * Adds `(alpha / rank) · A @ B` into the kernel, then removes A and B. Float layers only: an
   * int8 kernel is merged when saved ({@link EinsumDense.mergedWeights}).
   */
  mergeLora(): void {
    if (this.lora == null) return;
    mergeFloatLora(this, this.lora, this.quantizationMode, `EinsumDense '${this.name}'`);
    this.lora = null;
  }

  /** The kernel with LoRA's update merged in, float32 (what Keras saves), as a new tensor. */
  mergedKernel(): tf.Tensor {
    if (this.kernel == null) {
      throw new Error(`EinsumDense '${this.name}' is not built yet: apply it to an input first`);
    }
    if (this.quantizationMode != null) {
      throw new Error(
        `EinsumDense '${this.name}': merging LoRA into an ${this.quantizationMode} kernel is ` +
          'not implemented',
      );
    }
    return mergedFloatKernel(this.kernel.read(), this.lora);
  }

  /**
   * The weights Keras saves in place of this layer's own while LoRA is on
   * (`_get_kernel_with_merged_lora`), as new tensors: float, the kernel with the update merged in;
   * int8, the kernel dequantized (`q / scale`), the update added, and quantized again as Keras
   * quantizes (abs-max over the contracted axes), with its new scale. int4 is not implemented.
   */
  mergedWeights(): Map<LayerVariable, tf.Tensor> {
    if (this.quantizationMode !== 'int8' || this.lora == null) {
      return new Map([[this.kernel as LayerVariable, this.mergedKernel()]]);
    }
    return mergedInt8Weights(this.int8Weights()[0], this.lora, `EinsumDense '${this.name}'`);
  }

  /** LoRA's term of a quantized product: `(alpha / rank) · einsum(x, A) @ B`, or null. */
  private loraTerm(x: tf.Tensor): tf.Tensor | null {
    return this.lora == null ? null : einsumLoraTerm(this.equation, x, this.lora);
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

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      return this.project(x);
    });
  }

  /**
   * The layer's function on a tensor, without the layer bookkeeping of `apply`; `scale`
   * multiplies the result before the activation (`activation(scale · (x W + b))`, applied to
   * the product, not folded into the kernel: a scaled kernel would be a copy of the weight at
   * every call, e.g. at every decoding step).
   *
   * Equations of the dense form `FB,BO->FO` (the trailing input axes B contracted with the
   * kernel's leading axes, as all of MultiHeadAttention's projections are) run as one 2-D
   * product `[prod F, prod B] x [prod B, prod O]`; others through einsum.
   */
  project(x: tf.Tensor, scale = 1): tf.Tensor {
    return tf.tidy(() => {
      if (this.kernel == null) {
        throw new Error(`EinsumDense '${this.name}' is not built yet: apply it to an input first`);
      }
      const scaled = (y: tf.Tensor) => (scale !== 1 ? tf.mul(y, scale) : y);
      const bound = denseBoundAxes(this.equation);
      const int4 = this.int4Weights()[0];
      if (int4 != null) return this.activation.apply(scaled(this.int4Project(x, int4, bound)));
      const lora = this.lora;
      const int8 = this.kernelScale != null;
      // float: the kernel with LoRA's update; int8: the update's own product after it (Keras)
      const kernel =
        lora != null && !int8 ? tf.add(this.kernel.read(), loraDelta(lora)) : this.kernel.read();
      const loraTerm = int8 ? this.loraTerm(x) : null;
      if (bound == null) {
        let y = int8
          ? int8Einsum(this.int8Plan(), x, kernel, (this.kernelScale as LayerVariable).read())
          : einsum(this.equation, x, kernel); // [batch, ...outputShape]
        if (loraTerm != null) y = tf.add(y, loraTerm);
        if (this.bias != null) y = tf.add(y, this.bias.read());
        return this.activation.apply(scaled(y));
      }
      const free = x.shape.slice(0, x.rank - bound); // F
      const inner = x.shape.slice(x.rank - bound).reduce((p, d) => p * d, 1); // prod B
      const outDims = kernel.shape.slice(bound); // O
      const outSize = outDims.reduce((p, d) => p * d, 1);
      const w = reshapeTo(kernel, [inner, outSize]); // [prod B, prod O], a view of the kernel
      const rows = reshapeTo(x, [-1, inner]);
      const bias = this.bias?.read() ?? null;
      // a bias over every output axis: on webgl / webgpu inside the product's program
      const whole = bias != null && bias.size === outSize ? reshapeTo(bias, [outSize]) : null;
      const fused = !int8 ? fusedBiasProduct(rows, w, whole) : null;
      let y =
        fused ??
        (int8
          ? int8Projection(
              rows as tf.Tensor2D,
              w as tf.Tensor2D,
              reshapeTo((this.kernelScale as LayerVariable).read(), [outSize]) as tf.Tensor1D,
            )
          : mm(rows, w)); // [prod F, prod O]
      if (loraTerm != null) y = tf.add(y, reshapeTo(loraTerm, y.shape));
      if (fused == null && whole != null) y = addBias(y, whole);
      let out = reshapeTo(y, [...free, ...outDims]); // [...F, ...O]
      if (bias != null && bias.size !== outSize) out = tf.add(out, bias);
      return this.activation.apply(scaled(out));
    });
  }

  /**
   * The int4 product (einsum_int4.ts), LoRA's term and the bias (Keras' `_int4_call`).
   */
  private int4Project(x: tf.Tensor, w: Int4Weight, bound: number | null): tf.Tensor {
    const view = this.int4View as Int4KernelView;
    const bias = this.bias?.read() ?? null;
    let y = einsumInt4Product(this.equation, x, w, view, bound);
    const loraTerm = this.loraTerm(x);
    if (loraTerm != null) y = tf.add(y, loraTerm);
    return bias != null ? tf.add(y, bias) : y;
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {
      outputShape: this.outputShapeArg,
      equation: this.equation,
      activation: serializeActivation(this.activation),
      biasAxes: this.biasAxes,
      ...projectionConfig(this.projection),
    };
    if (this.quantizationMode != null) config.quantizationMode = this.quantizationMode;
    if (this.quantizationMode === 'int4') config.int4BlockSize = this.int4BlockSize;
    return {...super.getConfig(), ...config};
  }
}
