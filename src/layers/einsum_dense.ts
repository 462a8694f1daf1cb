import * as tf from '@tensorflow/tfjs-core';
import {layers} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';
import type {LayerVariable} from '@tensorflow/tfjs-layers';

import {einsum} from '../ops/einsum';
import {
  Activation,
  ActivationIdentifier,
  Constraint,
  ConstraintIdentifier,
  getActivation,
  getConstraint,
  getInitializer,
  getRegularizer,
  Initializer,
  InitializerIdentifier,
  Regularizer,
  RegularizerIdentifier,
  serializeActivation,
  serializeObject,
} from './config_objects';
import {analyzeEinsumDense, Dim} from './einsum_dense_shapes';
import {singleShape, Shape} from './shapes';

export interface EinsumDenseArgs extends LayerArgs {
  /** An equation `X,Y->Z` (or with `...`) contracting the input `X` with the kernel `Y`. */
  equation: string;
  /** The output shape without the batch axis; null entries are taken from the input. */
  outputShape: number | Dim[];
  /** Output letters that carry a bias (e.g. `'de'`); none when omitted. */
  biasAxes?: string | null;
  activation?: ActivationIdentifier | null;
  kernelInitializer?: InitializerIdentifier;
  biasInitializer?: InitializerIdentifier;
  kernelRegularizer?: RegularizerIdentifier | null;
  biasRegularizer?: RegularizerIdentifier | null;
  activityRegularizer?: RegularizerIdentifier | null;
  kernelConstraint?: ConstraintIdentifier | null;
  biasConstraint?: ConstraintIdentifier | null;
}

/**
 * A dense layer of any rank, given as an einsum equation (Keras `EinsumDense`):
 * `y = activation(einsum(equation, x, kernel) + bias)`.
 *
 * - Input: the shape named by `X` (batch first), e.g. `[batch, seq, dim]` for `'abc,cde->abde'`.
 * - Output: `[batch, ...outputShape]`.
 * - Weights: `kernel` with the letters of `Y`, `bias` over `biasAxes` (Keras layout).
 *
 * ```js
 * // project [batch, seq, 16] to [batch, seq, 4 heads, 8] as MultiHeadAttention does
 * const proj = new EinsumDense({equation: 'abc,cde->abde', outputShape: [null, 4, 8], biasAxes: 'de'});
 * proj.apply(tf.zeros([2, 5, 16])).shape; // [2, 5, 4, 8]
 * ```
 */
export class EinsumDense extends layers.Layer {
  /** @nocollapse */
  static readonly className = 'EinsumDense';

  readonly equation: string;
  readonly partialOutputShape: Dim[];
  readonly biasAxes: string | null;
  readonly activation: Activation;
  readonly kernelInitializer: Initializer;
  readonly biasInitializer: Initializer;
  readonly kernelRegularizer: Regularizer | null;
  readonly biasRegularizer: Regularizer | null;
  readonly kernelConstraint: Constraint | null;
  readonly biasConstraint: Constraint | null;
  /** The user's outputShape as given (a number stays a number), for the config. */
  private readonly outputShapeArg: number | Dim[];

  kernel: LayerVariable | null = null;
  bias: LayerVariable | null = null;

  constructor(args: EinsumDenseArgs) {
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
    this.kernelInitializer = getInitializer(args.kernelInitializer, 'glorotUniform');
    this.biasInitializer = getInitializer(args.biasInitializer, 'zeros');
    this.kernelRegularizer = getRegularizer(args.kernelRegularizer);
    this.biasRegularizer = getRegularizer(args.biasRegularizer);
    this.kernelConstraint = getConstraint(args.kernelConstraint);
    this.biasConstraint = getConstraint(args.biasConstraint);
    if (args.activityRegularizer != null) {
      throw new Error(
        `EinsumDense: activityRegularizer is not supported (tfjs-layers' Layer.apply refuses ` +
          `activity regularizers); received ${JSON.stringify(args.activityRegularizer)}`,
      );
    }
    this.supportsMasking = false;
  }

  private shapes(inputShape: Shape) {
    return analyzeEinsumDense(this.equation, this.biasAxes, inputShape, this.partialOutputShape);
  }

  override build(inputShape: Shape | Shape[]): void {
    this.buildWeights(singleShape(inputShape, this.name), '');
  }

  /**
   * Builds the weights named `<this.name>/kernel`, for use as a sublayer of a layer whose own
   * build runs inside its name scope: the weights are then `<parent>/<this.name>/kernel`, the
   * Keras layout, without a forward pass.
   */
  buildAsSublayer(inputShape: Shape): void {
    this.buildWeights(inputShape, `${this.name}/`);
    this.built = true;
  }

  private buildWeights(inputShape: Shape, prefix: string): void {
    const {kernelShape, biasShape} = this.shapes(inputShape);
    this.kernel = this.addWeight(
      `${prefix}kernel`,
      kernelShape,
      'float32',
      this.kernelInitializer,
      this.kernelRegularizer ?? undefined,
      true,
      this.kernelConstraint ?? undefined,
    );
    this.bias =
      biasShape == null
        ? null
        : this.addWeight(
            `${prefix}bias`,
            biasShape,
            'float32',
            this.biasInitializer,
            this.biasRegularizer ?? undefined,
            true,
            this.biasConstraint ?? undefined,
          );
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return this.shapes(singleShape(inputShape, this.name)).outputShape;
  }

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      return this.project(x);
    });
  }

  /** The layer's function on a tensor, without the layer bookkeeping of `apply`. */
  project(x: tf.Tensor): tf.Tensor {
    return tf.tidy(() => {
      if (this.kernel == null) {
        throw new Error(`EinsumDense '${this.name}' is not built yet: apply it to an input first`);
      }
      let y = einsum(this.equation, x, this.kernel.read()); // [batch, ...outputShape]
      if (this.bias != null) {
        y = tf.add(y, this.bias.read());
      }
      return this.activation.apply(y);
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {
      outputShape: this.outputShapeArg,
      equation: this.equation,
      activation: serializeActivation(this.activation),
      biasAxes: this.biasAxes,
      kernelInitializer: serializeObject(this.kernelInitializer),
      biasInitializer: serializeObject(this.biasInitializer),
      kernelRegularizer: serializeObject(this.kernelRegularizer),
      biasRegularizer: serializeObject(this.biasRegularizer),
      activityRegularizer: null,
      kernelConstraint: serializeObject(this.kernelConstraint),
      biasConstraint: serializeObject(this.biasConstraint),
    };
    return {...super.getConfig(), ...config};
  }
}
