import * as tf from '@tensorflow/tfjs-core';
import {initializers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {AttentionCoreOptions} from '../../ops/attention_core';
import {
  AttentionParts,
  CallSettings,
  CallSpec,
  checkCallShapes,
  resolveCall,
  Role,
} from './call_spec';
import {
  AttendResult,
  AttentionOutput,
  BaseAttentionArgs,
  checkRoles,
  EagerCallArgs,
  SymbolicCallArgs,
} from './base_attention_args';
import {CompositeLayer} from './composite_layer';
import type {Initializer} from './config_objects';
import {isShapeList, Shape} from './shapes';
import {symbolicCall} from './symbolic_call';

export type {
  AttendResult,
  AttentionCallArgs,
  AttentionOutput,
  BaseAttentionArgs,
  CacheCallArgs,
  CachedOutput,
  EagerCallArgs,
  SymbolicCallArgs,
} from './base_attention_args';

export type TensorSpec = CallSpec<tf.Tensor>;
/** A concrete or a symbolic tensor. */
export type AnyTensor = tf.Tensor | SymbolicTensor;
/** Concrete inputs of an eager call. */
export type EagerInputs = tf.Tensor | tf.Tensor[];
/** Symbolic inputs of a call building a functional model. */
export type SymbolicInputs = SymbolicTensor | SymbolicTensor[];
/** The constructor option that fixes, for the type checker, whether calls return scores. */
export interface ScoresOption<S extends boolean> {
  /** Return `[output, scores]` instead of `output`. Kept in the config. Default false. */
  returnAttentionScores?: S;
}

/** An eager call's inputs with the spec resolved by `apply` (tfjs hands this same list to `call`
 * and `computeMask`, so the spec travels with it rather than through layer state). */
type InputsWithSpec = tf.Tensor[] & {callSpec?: TensorSpec};

function toList<T>(x: T | T[]): T[] {
  return Array.isArray(x) ? x : [x];
}

/**
 * The base of MultiHeadAttention, Attention, DotProductAttention and AdditiveAttention: the
 * calling convention (`call_spec.ts`), the tfjs hooks (build, computeOutputShape, call,
 * computeMask) each given the resolved call, dropout seeds and the config. Subclasses say how to
 * build, what shapes come out and how to attend; masks and the attention core are in `ops/`.
 *
 * **Typed `apply`.** A call on concrete tensors returns `tf.Tensor`s, one on symbolic tensors
 * `SymbolicTensor`s; a call with `{returnAttentionScores: true}` returns the pair
 * `[output, scores]`, and a cache call (MultiHeadAttention, GroupQueryAttention) `[output, cache]`.
 * A layer constructed with `returnAttentionScores: true` returns a pair from every call that does
 * not say `returnAttentionScores: false`: its type parameter `S` is then `true` (inferred from the
 * constructor's options; `boolean` when the option is not a literal, and the output type is the
 * union). A functional call with `{returnAttentionScores: true}` records the setting in the layer
 * (tfjs replays no call options at predict time), so that layer's later calls return pairs too,
 * which `S` cannot show: give such a layer `returnAttentionScores: true` in its constructor.
 * Inputs mixing concrete and symbolic tensors, and options the overloads do not describe, get
 * tfjs' untyped `Layer.apply` result.
 *
 * @typeParam S - `true` when the layer was constructed with `returnAttentionScores: true`. The
 *   package's layers default it to `false` (inferred from their constructor's options); a
 *   subclass that does not pass it on gets `boolean`, so its calls without the option are typed
 *   as either a tensor or a pair.
 */
export abstract class BaseAttention<S extends boolean = boolean> extends CompositeLayer {
  /** The `dropout` option: the dropout rate of the attention weights. */
  readonly dropout: number;
  /** Whether calls mask causally (the `useCausalMask` option, or a functional call's). */
  useCausalMask: boolean;
  /** Whether calls return `[output, scores]` (the `returnAttentionScores` option, or a functional call's). */
  returnAttentionScores: boolean;
  /** The `seed` option (null: unseeded). */
  readonly seed: number | null;
  /** Roles of the inputs of a symbolic call with lengths or a mask input (kept in the config). */
  inputRoles: Role[] | null;
  /** The `zeroFullyMaskedRows` option. */
  readonly zeroFullyMaskedRows: boolean;
  private dropoutCalls = 0;
  private builtParts: AttentionParts<Shape> | null = null;
  /**
   * The roles of the inputs handed to tfjs' `Layer.apply`, known from their dtypes, while it runs:
   * the `build` and `computeOutputShape` it calls see shapes only (a key of the wrong length
   * would look like a mask).
   */
  private applyRoles: Role[] | null = null;

  constructor(args: BaseAttentionArgs & ScoresOption<S> = {}) {
    super(args);
    const rate = args.dropout ?? 0;
    if (typeof rate !== 'number' || !(rate >= 0 && rate < 1)) {
      throw new Error(
        `${this.getClassName()}: expected dropout to be a number in [0, 1), received ${JSON.stringify(args.dropout)}`,
      );
    }
    if (args.seed != null && !Number.isInteger(args.seed)) {
      throw new Error(
        `${this.getClassName()}: expected seed to be an integer, received ${JSON.stringify(args.seed)}`,
      );
    }
    this.dropout = rate;
    this.seed = args.seed ?? null;
    this.useCausalMask = Boolean(args.useCausalMask ?? false);
    this.returnAttentionScores = Boolean(args.returnAttentionScores ?? false);
    this.inputRoles =
      args.inputRoles == null ? null : checkRoles(args.inputRoles, this.getClassName());
    this.zeroFullyMaskedRows = Boolean(args.zeroFullyMaskedRows ?? false);
    this.supportsMasking = true;
  }

  // ---- what subclasses provide ------------------------------------------------------------------

  /** Creates the weights for the given query / value / key shapes. */
  protected abstract buildParts(parts: AttentionParts<Shape>): void;
  /** The output shape for the given input shapes. */
  protected abstract outputShapeOf(parts: AttentionParts<Shape>): Shape;
  /** The shape of the returned attention scores. */
  protected abstract scoresShapeOf(parts: AttentionParts<Shape>): Shape;
  /** The attention itself, on concrete tensors (inside a tidy). */
  protected abstract attend(spec: TensorSpec): AttendResult;

  // ---- the call ---------------------------------------------------------------------------------

  /**
   * An eager call on one tensor (not a list) is self-attention; a layer that Keras calls on a
   * list only throws here (tfjs' own calls hand over lists, and a functional model's node keeps
   * its inputs as saved). Default: accepted.
   */
  protected checkSingleTensorCall(_input: tf.Tensor): void {}

  /**
   * Checks of `computeOutputShape` beyond those of build (Keras' `compute_output_shape`, which
   * Keras runs on symbolic calls only). Default: none.
   */
  protected checkOutputShapeInputs(_parts: AttentionParts<Shape>): void {}

  /** The layer's settings that take part in resolving a call. */
  protected callSettings(): CallSettings {
    return {
      caller: `Layer '${this.name}'`,
      inputRoles: this.inputRoles,
      useCausalMask: this.useCausalMask,
      returnAttentionScores: this.returnAttentionScores,
    };
  }

  /**
   * `apply(x)`, `apply([query, value])`, `apply([query, value, key])`, optionally followed by
   * lengths (rank 1 or 2) and a bool / int32 attention mask; see {@link AttentionCallArgs}.
   *
   * On symbolic tensors (functional models), `validLens` / `attentionMask` options become
   * inputs, and `useCausalMask` / `returnAttentionScores` are recorded in the layer's config
   * with the input roles, because tfjs' `predict` and `fit` replay no call options.
   *
   * Concrete tensors in, `tf.Tensor` out; symbolic in, `SymbolicTensor` out;
   * `{returnAttentionScores: true}` gives `[output, scores]` (see the class's notes on typing).
   */
  override apply(
    inputs: EagerInputs,
    kwargs: EagerCallArgs & {returnAttentionScores: true},
  ): [tf.Tensor, tf.Tensor];
  override apply(
    inputs: SymbolicInputs,
    kwargs: SymbolicCallArgs & {returnAttentionScores: true},
  ): [SymbolicTensor, SymbolicTensor];
  override apply(
    inputs: EagerInputs,
    kwargs: EagerCallArgs & {returnAttentionScores: false},
  ): tf.Tensor;
  override apply(
    inputs: SymbolicInputs,
    kwargs: SymbolicCallArgs & {returnAttentionScores: false},
  ): SymbolicTensor;
  override apply(
    inputs: EagerInputs,
    kwargs?: EagerCallArgs & {returnAttentionScores?: undefined},
  ): AttentionOutput<S, tf.Tensor>;
  override apply(
    inputs: SymbolicInputs,
    kwargs?: SymbolicCallArgs & {returnAttentionScores?: undefined},
  ): AttentionOutput<S, SymbolicTensor>;
  override apply(
    inputs: AnyTensor | AnyTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: AnyTensor | AnyTensor[],
    kwargs: Kwargs = {},
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    const list = toList(inputs);
    if (!(list[0] instanceof SymbolicTensor)) {
      const spec = resolveCall(list as tf.Tensor[], kwargs, this.callSettings());
      if (!Array.isArray(inputs)) this.checkSingleTensorCall(list[0] as tf.Tensor);
      // only query / value / key go positionally, so tfjs' build sees unambiguous shapes
      const main: InputsWithSpec = (list as tf.Tensor[]).filter(
        (_, i) => spec.roles[i] === 'query' || spec.roles[i] === 'value' || spec.roles[i] === 'key',
      );
      main.callSpec = spec;
      const roles = spec.roles.filter((r) => r === 'query' || r === 'value' || r === 'key');
      return this.withRoles(roles, () => super.apply(main, kwargs)) as tf.Tensor | tf.Tensor[];
    }
    const call = symbolicCall(this, list as SymbolicTensor[], kwargs, this.callSettings());
    return this.withRoles(call.roles, () => super.apply(call.inputs, call.kwargs)) as
      SymbolicTensor | SymbolicTensor[];
  }

  private withRoles<T>(roles: Role[], run: () => T): T {
    const outer = this.applyRoles;
    this.applyRoles = roles;
    try {
      return run();
    } finally {
      this.applyRoles = outer;
    }
  }

  /**
   * The call resolved from input shapes alone (build, computeOutputShape), with the roles `apply`
   * knew while it runs. Missing trailing shapes (`[query, value, null]`, as Keras'
   * `compute_output_shape(query, value, key=None)`) are left out.
   */
  private shapeSpec(inputShape: Shape | Shape[]): CallSpec<{shape: Shape} | tf.Tensor> {
    const given: Array<Shape | null | undefined> = isShapeList(inputShape)
      ? inputShape
      : [inputShape];
    let n = given.length;
    while (n > 1 && given[n - 1] == null) n--;
    const shapes = given.slice(0, n).map((shape, i) => {
      if (!Array.isArray(shape)) {
        throw new Error(
          `Layer '${this.name}': expected a shape (an array) for input ${i}, received ` +
            `${JSON.stringify(shape)}`,
        );
      }
      return {shape};
    });
    const settings = this.callSettings();
    const roles = this.applyRoles;
    if (roles != null && roles.length === shapes.length) settings.inputRoles = roles;
    return resolveCall(shapes, {}, settings);
  }

  private static shapesOf(
    parts: AttentionParts<{shape: Shape} | tf.Tensor>,
  ): AttentionParts<Shape> {
    const s = (x: {shape: Shape} | tf.Tensor | null) => (x == null ? null : (x.shape as Shape));
    return {
      query: s(parts.query) as Shape,
      value: s(parts.value) as Shape,
      key: s(parts.key) as Shape,
      validLens: s(parts.validLens),
      attentionMask: s(parts.attentionMask),
    };
  }

  override build(inputShape: Shape | Shape[]): void {
    const parts = BaseAttention.shapesOf(this.shapeSpec(inputShape).parts);
    this.buildParts(parts);
    this.builtParts = parts;
    this.built = true;
  }

  /**
   * The inputs whose last dimension is fixed by the weights built for it (checked on every call,
   * so a mismatch is an error naming the layer, not tfjs' reshape error). Default: none.
   */
  protected inputsFixedByWeights(): Array<'query' | 'value' | 'key'> {
    return [];
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape | Shape[] {
    const spec = this.shapeSpec(inputShape);
    const parts = BaseAttention.shapesOf(spec.parts);
    this.checkOutputShapeInputs(parts);
    const out = this.outputShapeOf(parts);
    return spec.returnAttentionScores ? [out, this.scoresShapeOf(parts)] : out;
  }

  private tensorSpec(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): TensorSpec {
    const list = toList(inputs) as InputsWithSpec;
    return list.callSpec ?? (resolveCall(list, kwargs, this.callSettings()) as TensorSpec);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    const spec = this.tensorSpec(inputs, kwargs);
    checkCallShapes(spec, this.builtParts, this.inputsFixedByWeights(), `Layer '${this.name}'`);
    return tf.tidy(() => {
      const r = spec.parts.query.size === 0 ? this.empty(spec) : this.attend(spec);
      const outputs = [r.output];
      if (spec.returnAttentionScores) outputs.push(r.scores as tf.Tensor);
      if (spec.cache != null) outputs.push(r.cache as tf.Tensor);
      return outputs.length === 1 ? outputs[0] : outputs;
    });
  }

  /**
   * The output's Keras mask is the query's, as in Keras. A mask read off the query tensor is
   * copied: tfjs disposes a tensor's `kerasMask` with the tensor, so the output must not share it.
   */
  override computeMask(
    inputs: tf.Tensor | tf.Tensor[],
    mask?: tf.Tensor | tf.Tensor[],
  ): tf.Tensor | tf.Tensor[] {
    const spec = this.tensorSpec(inputs, {});
    const first = toList(inputs)[0];
    const given = Array.isArray(mask) ? mask[0] : mask;
    const own =
      first instanceof tf.Tensor && first.kerasMask != null ? tf.clone(first.kerasMask) : null;
    const queryMask = (given ?? own) as tf.Tensor;
    const count = 1 + Number(spec.returnAttentionScores) + Number(spec.cache != null);
    const none = null as unknown as tf.Tensor; // scores and caches carry no Keras mask
    return count === 1 ? queryMask : [queryMask, ...new Array<tf.Tensor>(count - 1).fill(none)];
  }

  /** An empty batch or query: empty outputs of the right shapes (tfjs' ops reject some). */
  private empty(spec: TensorSpec): AttendResult {
    const parts = BaseAttention.shapesOf(spec.parts);
    return {
      output: tf.zeros(this.outputShapeOf(parts) as number[]),
      scores: spec.returnAttentionScores ? tf.zeros(this.scoresShapeOf(parts) as number[]) : null,
      cache: spec.cache && tf.clone(spec.cache),
    };
  }

  // ---- shared pieces for subclasses ---------------------------------------------------------------

  /**
   * With a `seed`, the glorotUniform initializer of the layer's `index`-th default-initialized
   * weight, seeded `seed + 1 + index` (each weight its own stream); null without a seed.
   */
  protected seededGlorot(index: number): Initializer | null {
    return this.seed == null ? null : initializers.glorotUniform({seed: this.seed + 1 + index});
  }

  /** The dropout part of the attention core's options for this call. */
  protected dropoutOptions(spec: TensorSpec): AttentionCoreOptions {
    return {
      dropout: this.dropout,
      training: spec.training,
      nextSeed: () => (this.seed == null ? undefined : this.seed + this.dropoutCalls++),
      returnAttentionScores: spec.returnAttentionScores,
      zeroFullyMaskedRows: this.zeroFullyMaskedRows,
    };
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {dropout: this.dropout, seed: this.seed};
    // Written only when set, so configs stay loadable by Keras, which has no such keys.
    if (this.useCausalMask) {
      config.useCausalMask = true;
    }
    if (this.returnAttentionScores) {
      config.returnAttentionScores = true;
    }
    if (this.inputRoles != null) {
      config.inputRoles = [...this.inputRoles];
    }
    if (this.zeroFullyMaskedRows) {
      config.zeroFullyMaskedRows = true;
    }
    return {...super.getConfig(), ...config};
  }
}
