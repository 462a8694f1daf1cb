/**
 * What keras-hub's `TransformerEncoder` and `TransformerDecoder` share: their options, the
 * feed-forward and layer-norm sublayers, the residual blocks (pre- or post-norm), dropout, and
 * the calling convention for tensor options in functional models (they become inputs whose roles
 * are recorded in the config, because tfjs replays no call options at predict time).
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import '../../ops/activations';
import {addBias} from '../../kernels/bias_add';
import {ownKernels} from '../../kernels/flags';
import {mm} from '../../kernels/matmul';
import {reshapeTo} from '../../ops/reshape';
import {recordingGradients} from '../../ops/gradient_recording';
import {denseRows} from '../core/dense_rows';
import {fusedBiasProduct, layerNormLastAxis} from '../core/fused_ops';
import {CompositeLayer} from '../engine/composite_layer';
import {
  Activation,
  camelCase,
  getActivation,
  Initializer,
  Regularizer,
  serializeObject,
} from '../engine/config_objects';
import {formatShape, isShapeList, Shape} from '../engine/shapes';
import {blockOptions, TransformerBlockArgs} from './transformer_block_args';
import {Dense} from '../core/dense';
import {isLoraLayer} from '../core/lora';

export type {TransformerBlockArgs} from './transformer_block_args';

/** The activations tfjs' fused product applies in its own program. */
const FUSED_ACTIVATIONS: readonly string[] = ['linear', 'relu', 'relu6', 'elu', 'sigmoid'];

/**
 * A Keras mask (`[batch, length]`, true = keep) given by tfjs as a list (one per input) or
 * carried by the tensor. A single mask tensor in `kwargs.mask` is not trusted: tfjs' predict
 * passes the first masked input's mask to every later layer of the model.
 */
export function kerasMaskOf(x: tf.Tensor, given: unknown, index: number): tf.Tensor | null {
  const list = Array.isArray(given) ? (given as Array<tf.Tensor | null | undefined>) : [];
  const m = list[index] ?? x.kerasMask ?? null;
  return m != null && !m.isDisposed ? m : null;
}

/** A dense feed-forward pair and the layer norms, built and called by the blocks. */
export abstract class TransformerBlock extends CompositeLayer {
  /** The `intermediateDim` option. */
  readonly intermediateDim: number;
  /** The `numHeads` option. */
  readonly numHeads: number;
  /** The `dropout` option. */
  readonly dropout: number;
  /** The `activation` option (the feed-forward activation's name). */
  readonly activation: string;
  /** The `layerNormEpsilon` option. */
  readonly layerNormEpsilon: number;
  /** The initializer of every kernel. */
  readonly kernelInitializer: Initializer;
  /** The initializer of every bias. */
  readonly biasInitializer: Initializer;
  /** The regularizer of every kernel (null: none). */
  readonly kernelRegularizer: Regularizer | null;
  /** The regularizer of every bias (null: none). */
  readonly biasRegularizer: Regularizer | null;
  /** The `normalizeFirst` option: pre-norm when true. */
  readonly normalizeFirst: boolean;
  /** The `seed` option (null: unseeded dropout). */
  readonly seed: number | null;
  /** Roles of the inputs recorded at a functional call with mask inputs (kept in the config). */
  inputRoles: string[] | null;
  private dropoutCalls = 0;
  /** How many tensors the last eager call returned (tfjs asks computeMask right after it). */
  protected lastOutputCount = 1;

  protected feedforwardIntermediate: layers.Layer | null = null;
  protected feedforwardOutput: layers.Layer | null = null;
  protected feedforwardNorm: layers.Layer | null = null;

  constructor(args: TransformerBlockArgs, extraKnown: readonly string[] = []) {
    super(args);
    const o = blockOptions(args, this.getClassName(), extraKnown);
    this.intermediateDim = o.intermediateDim;
    this.numHeads = o.numHeads;
    this.dropout = o.dropout;
    this.activation = o.activation;
    this.layerNormEpsilon = o.layerNormEpsilon;
    this.kernelInitializer = o.kernelInitializer;
    this.biasInitializer = o.biasInitializer;
    this.kernelRegularizer = o.kernelRegularizer;
    this.biasRegularizer = o.biasRegularizer;
    this.normalizeFirst = o.normalizeFirst;
    this.seed = o.seed;
    this.inputRoles = o.inputRoles;
    this.supportsMasking = true;
  }

  /** The roles this block's inputs can take, in positional order first. */
  protected abstract readonly roleNames: readonly string[];
  /** How many leading inputs may be given positionally (their roles in `roleNames` order). */
  protected abstract readonly positionalRoles: number;
  /** Tensor call options (camelCase role names) and the other call options accepted. */
  protected abstract readonly tensorOptions: readonly string[];
  protected abstract readonly otherOptions: readonly string[];

  /** Hidden width and head size for an input width, with keras-hub's check. */
  protected headSize(width: number | null): number {
    if (width == null) {
      throw new Error(`Layer '${this.name}' needs a known input width, received null`);
    }
    const head = Math.floor(width / this.numHeads);
    if (head === 0) {
      throw new Error(
        `Layer '${this.name}': the input width ${width} must be >= numHeads (${this.numHeads}), ` +
          'since the head size is width / numHeads',
      );
    }
    return head;
  }

  /**
   * Builds the feed-forward sublayers, after the attention sublayers; the encoder builds its
   * norm before the dense layers, the decoder after (keras-hub's weight order).
   */
  protected buildFeedForward(shape: Shape, normFirst: boolean): void {
    const width = shape[shape.length - 1] as number;
    const dense = (name: string, units: number, activation: string) =>
      new Dense({
        name,
        units,
        activation: activation as 'relu',
        kernelInitializer: this.kernelInitializer,
        biasInitializer: this.biasInitializer,
        kernelRegularizer: this.kernelRegularizer ?? undefined,
        biasRegularizer: this.biasRegularizer ?? undefined,
      });
    const inner = [...shape.slice(0, -1), this.intermediateDim];
    if (normFirst)
      this.feedforwardNorm = this.addSublayer(this.layerNorm('feedforward_layer_norm'), shape);
    this.feedforwardIntermediate = this.addSublayer(
      dense('feedforward_intermediate_dense', this.intermediateDim, this.activation),
      shape,
    );
    this.feedforwardOutput = this.addSublayer(
      dense('feedforward_output_dense', width, 'linear'),
      inner,
    );
    if (!normFirst)
      this.feedforwardNorm = this.addSublayer(this.layerNorm('feedforward_layer_norm'), shape);
  }

  protected layerNorm(name: string): layers.Layer {
    return layers.layerNormalization({name, epsilon: this.layerNormEpsilon});
  }

  /** `x + f(LN(x))` (normalizeFirst) or `LN(x + f(x))`, with dropout after `f`. */
  protected residual(
    x: tf.Tensor,
    norm: layers.Layer,
    f: (y: tf.Tensor) => tf.Tensor,
    training: boolean,
  ): tf.Tensor {
    // tfjs' LayerNormalization in fewer kernels, the same values (fused_ops.ts)
    const ln = (y: tf.Tensor) => layerNormLastAxis(norm, y) ?? (norm.call(y, {}) as tf.Tensor);
    const y = this.drop(f(this.normalizeFirst ? ln(x) : x), training);
    const sum = tf.add(y, x);
    return this.normalizeFirst ? sum : ln(sum);
  }

  /** The feed-forward block with its residual. */
  protected feedForward(x: tf.Tensor, training: boolean): tf.Tensor {
    return this.residual(
      x,
      this.feedforwardNorm as layers.Layer,
      (y) => {
        // the dense layers get 2-D input [B * T, D]: on 3-D input tfjs' Dense transposes (copies)
        // its kernel at every call, and on wasm that copy also loses XNNPACK's packed weights
        const width = y.shape[y.rank - 1] as number;
        const rows = reshapeTo(y, [-1, width]);
        const inner = this.denseRows(this.feedforwardIntermediate, rows, this.activation);
        const out = this.denseRows(this.feedforwardOutput, inner, 'linear');
        return reshapeTo(out, [...y.shape.slice(0, -1), out.shape[1] as number]);
      },
      training,
    );
  }

  /**
   * A feed-forward dense layer on rows `[N, D]`. On cpu (with the package's kernels) the
   * package's SIMD product on the layer's own kernel and bias: tfjs' cpu matMul is a plain
   * JavaScript loop (a GPT decoding step took 21 ms a token with it, 12.6 ms with this); elsewhere
   * the layer itself, whose 2-D product on wasm keeps XNNPACK's packed kernel between calls.
   */
  private denseRows(layer: layers.Layer | null, rows: tf.Tensor, activation: string): tf.Tensor {
    const dense = layer as layers.Layer;
    // an int8 layer (QuantizedDense) computes Keras' int8 product itself, and a layer with
    // LoRA's adapters adds them itself
    const int8 = 'quantizationMode' in dense;
    if (int8 || (isLoraLayer(dense) && dense.lora != null))
      return dense.call(rows, {}) as tf.Tensor;
    // while a gradient is recorded (fine-tuning): no fused product (dense_rows.ts)
    if (recordingGradients()) return denseRows(dense, rows);
    // by name, not by `weights`' order (a frozen kernel moves behind a trainable bias there)
    const own = dense as unknown as {kernel: LayerVariable; bias: LayerVariable | null};
    const kernel = own.kernel.read(); // [D, units]
    const bias = own.bias?.read(); // [units]
    // webgl / webgpu: the bias inside the product's program, and the activation when tfjs' fused
    // product knows it (tfjs' Dense adds the bias in a program of its own before GELU)
    const inProduct = FUSED_ACTIVATIONS.includes(activation);
    const fused = fusedBiasProduct(rows, kernel, bias ?? null, inProduct ? activation : 'linear');
    if (fused != null) return inProduct ? fused : this.activationOf(activation).apply(fused);
    if (!(ownKernels() && tf.getBackend() === 'cpu')) return dense.call(rows, {}) as tf.Tensor;
    const y = mm(rows, kernel);
    return this.activationOf(activation).apply(bias == null ? y : addBias(y, bias));
  }

  private readonly activations = new Map<string, Activation>();

  private activationOf(name: string): Activation {
    let a = this.activations.get(name);
    if (a == null) {
      a = getActivation(name);
      this.activations.set(name, a);
    }
    return a;
  }

  protected drop(x: tf.Tensor, training: boolean): tf.Tensor {
    if (!training || this.dropout === 0) return x;
    const seed = this.seed == null ? undefined : this.seed + 1000003 * ++this.dropoutCalls;
    return tf.dropout(x, this.dropout, undefined, seed);
  }

  /** The dropout seed for the attention sublayers (derived from this block's). */
  protected sublayerSeed(index: number): number | null {
    return this.seed == null ? null : this.seed + 7919 * (index + 1);
  }

  // ---- calling convention -------------------------------------------------------------------------

  /**
   * The roles of `n` inputs: the recorded roles when they match, else the first inputs
   * positionally (`roleNames` order) — more inputs than that need recorded roles.
   */
  protected rolesOf(n: number): string[] {
    if (this.inputRoles != null && this.inputRoles.length === n) return this.inputRoles;
    if (n > this.positionalRoles) {
      throw new Error(
        `Layer '${this.name}' received ${n} inputs; expected at most ${this.positionalRoles} ` +
          `(${this.roleNames.slice(0, this.positionalRoles).join(', ')}); pass masks as the ` +
          `call options ${this.tensorOptions.join(', ')}`,
      );
    }
    return this.roleNames.slice(0, n);
  }

  /** Inputs (or shapes) by role. */
  protected byRole<T>(items: T[]): Map<string, T> {
    const roles = this.rolesOf(items.length);
    return new Map(roles.map((r, i) => [r, items[i]]));
  }

  protected shapesByRole(inputShape: Shape | Shape[]): Map<string, Shape> {
    return this.byRole(isShapeList(inputShape) ? inputShape : [inputShape]);
  }

  /** Checks call options: unknown names are errors listing the accepted ones. */
  protected checkOptions(kwargs: Kwargs): void {
    const accepted = [...this.tensorOptions, ...this.otherOptions, 'training', 'mask'];
    for (const [k, v] of Object.entries(kwargs)) {
      if (v === undefined || accepted.includes(k)) continue;
      const camel = camelCase(k);
      throw new Error(
        `Layer '${this.name}': unknown call option '${k}'` +
          (accepted.includes(camel) ? `; did you mean '${camel}'?` : '') +
          `. Accepted options: ${accepted.join(', ')}`,
      );
    }
  }

  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs: Kwargs = {},
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    this.checkOptions(kwargs);
    const list = Array.isArray(inputs) ? inputs : [inputs];
    if (!(list[0] instanceof SymbolicTensor)) return super.apply(inputs, kwargs) as tf.Tensor;
    // functional model: tensor options become inputs with recorded roles
    const all = [...(list as SymbolicTensor[])];
    const roles = this.rolesOf(all.length).slice();
    const kw: Kwargs = {...kwargs};
    for (const name of this.tensorOptions) {
      const t = kw[name];
      delete kw[name];
      if (t == null) continue;
      if (!(t instanceof SymbolicTensor)) {
        throw new Error(
          `Layer '${this.name}': in a functional model, ${name} must be a symbolic tensor (a model ` +
            `input or a layer output), received a ${t instanceof tf.Tensor ? 'concrete tensor' : typeof t}`,
        );
      }
      all.push(t);
      roles.push(name);
    }
    for (const name of this.otherOptions) {
      if (kw[name] !== undefined) this.recordOption(name, kw[name]);
      delete kw[name];
    }
    if (roles.some((r) => this.tensorOptions.includes(r)) || this.inputRoles != null) {
      this.inputRoles = roles;
    }
    return super.apply(all.length === 1 ? all[0] : all, kw) as SymbolicTensor;
  }

  /** A non-tensor option of a functional call, kept in the config (tfjs replays none). */
  protected recordOption(name: string, value: unknown): void {
    throw new Error(
      `Layer '${this.name}': the call option ${name}=${JSON.stringify(value)} works in eager ` +
        'calls only',
    );
  }

  /** Checks the shapes of the mask inputs of a call against the sequences. */
  protected checkMaskShape(mask: tf.Tensor | null, want: number[], what: string): void {
    if (mask == null) return;
    const ok = mask.rank === want.length && mask.shape.every((d, i) => d === want[i] || d === 1);
    if (!ok) {
      throw new Error(
        `Layer '${this.name}': expected ${what} of shape ${formatShape(want)}, received ` +
          formatShape(mask.shape),
      );
    }
  }

  /**
   * The output masks: the Keras mask of the input in role `role` for the first output, none for
   * the others (scores, caches). tfjs disposes a tensor's mask with it, so the mask is copied.
   */
  protected outputMasks(
    inputs: tf.Tensor | tf.Tensor[],
    mask: tf.Tensor | tf.Tensor[] | undefined,
    role: string,
  ): tf.Tensor | tf.Tensor[] {
    const list = Array.isArray(inputs) ? inputs : [inputs];
    const index = this.rolesOf(list.length).indexOf(role);
    const given = Array.isArray(mask) ? mask[index] : index === 0 ? mask : undefined;
    const own = given ?? list[index]?.kerasMask ?? null;
    const first = (own == null ? null : tf.clone(own)) as tf.Tensor;
    if (this.lastOutputCount === 1) return first;
    return [
      first,
      ...new Array<tf.Tensor>(this.lastOutputCount - 1).fill(null as unknown as tf.Tensor),
    ];
  }

  protected blockConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {
      intermediateDim: this.intermediateDim,
      numHeads: this.numHeads,
      dropout: this.dropout,
      activation: this.activation,
      layerNormEpsilon: this.layerNormEpsilon,
      kernelInitializer: serializeObject(this.kernelInitializer),
      biasInitializer: serializeObject(this.biasInitializer),
      kernelRegularizer: serializeObject(this.kernelRegularizer),
      biasRegularizer: serializeObject(this.biasRegularizer),
      normalizeFirst: this.normalizeFirst,
      seed: this.seed,
    };
    if (this.inputRoles != null) config.inputRoles = [...this.inputRoles];
    return {...super.getConfig(), ...config};
  }
}
