import * as tf from '@tensorflow/tfjs-core';
import {layers, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs, RegularizerFn} from '@tensorflow/tfjs-layers/dist/types';

import {causalMask, combineMasks, softmaxWithMask, validLensMask} from '../ops/masking';
import {
  assignParts,
  AttentionParts,
  classifyInputs,
  dedupeInputs,
  InputLike,
  Role,
} from './attention_inputs';
import {formatShape, isShapeList, Shape} from './shapes';

/** Options shared by every attention layer. */
export interface BaseAttentionArgs extends LayerArgs {
  /** Dropout rate on the attention weights, applied in training only. Default 0. */
  dropout?: number;
  /**
   * Causal masking: query `i` attends to keys `<= i`. Kept in the config, so models that need it
   * at `predict` / `fit` time (where tfjs replays no call kwargs) keep it after save and load.
   */
  useCausalMask?: boolean;
  /** Return `[output, scores]` instead of `output`. Kept in the config, like `useCausalMask`. */
  returnAttentionScores?: boolean;
  /** Seed of the dropout masks (advanced on every call). */
  seed?: number | null;
  /**
   * The role of each input (`'query'`, `'value'`, `'key'`, `'validLens'`, `'attentionMask'`);
   * recorded automatically when a functional model passes an attention mask, and kept in the
   * config. Rarely given by hand.
   */
  inputRoles?: Role[] | null;
}

const ROLES: Role[] = ['query', 'value', 'key', 'validLens', 'attentionMask'];

function checkRoles(roles: unknown, cls: string): Role[] {
  if (
    !Array.isArray(roles) ||
    roles.length === 0 ||
    roles[0] !== 'query' ||
    !roles.every((r) => ROLES.includes(r))
  ) {
    throw new Error(
      `${cls}: expected inputRoles to start with 'query' and name roles among ${ROLES.join(', ')}, received ${JSON.stringify(roles)}`,
    );
  }
  return roles as Role[];
}

/** Keyword arguments of `apply` / `call` for every attention layer. */
export interface AttentionCallArgs {
  /** int32 lengths, `[batch]` (per sequence) or `[batch, queries]` (per query). */
  validLens?: tf.Tensor | SymbolicTensor | null;
  /** bool or 0/1 mask broadcastable to `[batch, queries, keys]`; true / 1 = attend. */
  attentionMask?: tf.Tensor | SymbolicTensor | null;
  useCausalMask?: boolean;
  returnAttentionScores?: boolean;
  training?: boolean;
  /** Keras-style masks `[queryMask, valueMask, keyMask?]` (`[batch, length]`, true = keep). */
  mask?: Array<tf.Tensor | null> | null;
}

/** Everything `call` has gathered for the subclass' attention computation. */
export interface AttendContext {
  training: boolean;
  useCausalMask: boolean;
  validLens: tf.Tensor | null;
  attentionMask: tf.Tensor | null;
  queryMask: tf.Tensor | null;
  valueMask: tf.Tensor | null;
  keyMask: tf.Tensor | null;
  /** Whether the caller returns the scores (layers may skip materialising them otherwise). */
  wantScores: boolean;
}

export interface AttendResult {
  output: tf.Tensor;
  /** May be null when `ctx.wantScores` is false. */
  scores: tf.Tensor | null;
}

type AnyTensor = tf.Tensor | SymbolicTensor;

interface PendingCall {
  roles: Role[];
  returnScores: boolean;
}

function toList<T>(x: T | T[]): T[] {
  return Array.isArray(x) ? x : [x];
}

function isBroadcastable(from: number[], to: number[]): boolean {
  if (from.length > to.length) {
    return false;
  }
  const offset = to.length - from.length;
  return from.every((d, i) => d === 1 || d === to[offset + i]);
}

/**
 * The machinery shared by MultiHeadAttention, Attention, DotProductAttention and
 * AdditiveAttention: the calling convention (see `attention_inputs.ts`), masks (valid lengths,
 * attention masks, Keras-propagated masks, causal), dropout on the weights, returned scores, and
 * the weights of sublayers (tracked, trained, saved and disposed with this layer).
 */
export abstract class BaseAttention extends layers.Layer {
  readonly dropout: number;
  useCausalMask: boolean;
  returnAttentionScores: boolean;
  readonly seed: number | null;
  /** Roles of the inputs of a symbolic call that has an attention-mask input (kept in the config). */
  inputRoles: Role[] | null;
  /** Sublayers whose weights belong to this layer. */
  protected sublayers: layers.Layer[] = [];
  private pending: PendingCall | null = null;
  private dropoutCalls = 0;

  constructor(args: BaseAttentionArgs = {}) {
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
    this.supportsMasking = true;
  }

  // ---- calling convention ---------------------------------------------------------------------

  /**
   * `apply(x)`, `apply([query, value])`, `apply([query, value, key])`, optionally followed by
   * lengths (rank 1 or 2) and a bool attention mask; see {@link AttentionCallArgs} for kwargs.
   *
   * On symbolic tensors (functional models), `validLens` / `attentionMask` kwargs become inputs
   * and `useCausalMask` / `returnAttentionScores` are folded into the layer's config, because
   * tfjs's `predict` and `fit` replay no call kwargs.
   */
  override apply(
    inputs: AnyTensor | AnyTensor[],
    kwargs: Kwargs = {},
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    let list = dedupeInputs(toList(inputs) as AnyTensor[]);
    const kw: Kwargs = {...kwargs};
    const symbolic = list[0] instanceof SymbolicTensor;
    const extraRoles: Role[] = [];
    if (symbolic) {
      for (const name of ['attentionMask', 'validLens'] as const) {
        const t = kw[name];
        if (t == null) {
          continue;
        }
        if (!(t instanceof SymbolicTensor)) {
          throw new Error(
            `Layer '${this.name}': in a functional model, ${name} must be a symbolic tensor ` +
              `(a model input or a layer output), received a ${t instanceof tf.Tensor ? 'concrete tensor' : typeof t}`,
          );
        }
        list = [...list, t];
        extraRoles.push(name);
        delete kw[name];
      }
      for (const name of ['useCausalMask', 'returnAttentionScores'] as const) {
        if (kw[name] === undefined) {
          continue;
        }
        const value = Boolean(kw[name]);
        if (value !== this[name]) {
          if (this.inboundNodes.length > 0) {
            throw new Error(
              `Layer '${this.name}': ${name}=${value} differs from an earlier call of this layer ` +
                `in the model (${this[name]}); tfjs replays no call kwargs at predict time, so a ` +
                `layer has one setting: use a second layer, or set ${name} in the constructor`,
            );
          }
          this[name] = value;
        }
        delete kw[name];
      }
    }
    let roles: Role[];
    if (this.inputRoles != null && this.inputRoles.length === list.length) {
      roles = this.inputRoles;
    } else {
      const base = list.slice(0, list.length - extraRoles.length) as InputLike[];
      roles = [...classifyInputs(base, this.name), ...extraRoles];
      // An attention-mask input cannot always be told from a key by rank and dtype: remember the
      // roles of inputs beyond query / value / key (they are saved in the config) so predict,
      // fit, loaded models and Keras export know them.
      if (symbolic && roles.some((r) => r === 'attentionMask' || r === 'validLens')) {
        this.inputRoles = roles;
      }
    }
    const returnScores = Boolean(
      symbolic
        ? this.returnAttentionScores
        : (kw.returnAttentionScores ?? this.returnAttentionScores),
    );
    const previous = this.pending;
    this.pending = {roles, returnScores};
    try {
      const arg = list.length === 1 ? list[0] : list;
      return super.apply(arg as tf.Tensor | tf.Tensor[], kw);
    } finally {
      this.pending = previous;
    }
  }

  private rolesOf(inputs: InputLike[]): Role[] {
    return this.pending?.roles ?? classifyInputs(inputs, this.name);
  }

  private shapeParts(inputShape: Shape | Shape[]): AttentionParts<Shape> {
    const shapes = isShapeList(inputShape) ? inputShape : [inputShape];
    const roles = this.rolesOf(shapes.map((shape) => ({shape})));
    return assignParts(shapes, roles);
  }

  private get returnsScoresNow(): boolean {
    return this.pending?.returnScores ?? this.returnAttentionScores;
  }

  // ---- what subclasses provide ------------------------------------------------------------------

  /** Creates the weights for the given query / value / key shapes. */
  protected abstract buildParts(parts: AttentionParts<Shape>): void;
  /** The output shape for the given input shapes. */
  protected abstract outputShapeOf(parts: AttentionParts<Shape>): Shape;
  /** The shape of the returned attention scores. */
  protected abstract scoresShapeOf(parts: AttentionParts<Shape>): Shape;
  /** The attention itself, on concrete tensors, with the masks gathered by `call`. */
  protected abstract attend(parts: AttentionParts<tf.Tensor>, ctx: AttendContext): AttendResult;

  override build(inputShape: Shape | Shape[]): void {
    this.buildParts(this.shapeParts(inputShape));
    this.built = true;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape | Shape[] {
    const parts = this.shapeParts(inputShape);
    const out = this.outputShapeOf(parts);
    return this.returnsScoresNow ? [out, this.scoresShapeOf(parts)] : out;
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    const list = toList(inputs);
    const parts = assignParts(list, this.rolesOf(list));
    const returnScores =
      this.pending?.returnScores ??
      Boolean(kwargs.returnAttentionScores ?? this.returnAttentionScores);
    const kerasMasks = Array.isArray(kwargs.mask) ? (kwargs.mask as Array<tf.Tensor | null>) : [];
    const pick = (i: number, t: tf.Tensor) => kerasMasks[i] ?? t.kerasMask ?? null;
    const ctx: AttendContext = {
      training: kwargs.training === true,
      useCausalMask: Boolean(kwargs.useCausalMask ?? this.useCausalMask),
      validLens: this.checkedTensor(kwargs.validLens ?? parts.validLens, 'validLens'),
      attentionMask: this.checkedTensor(
        kwargs.attentionMask ?? parts.attentionMask,
        'attentionMask',
      ),
      queryMask: pick(0, parts.query),
      // With self-attention the value and key are the query: their Keras mask is the query's.
      valueMask: pick(1, parts.value),
      keyMask: kerasMasks[2] ?? (parts.key !== parts.value ? (parts.key.kerasMask ?? null) : null),
      wantScores: returnScores,
    };
    return tf.tidy(() => {
      const {output, scores} = this.attend(parts, ctx);
      return returnScores ? [output, scores as tf.Tensor] : output;
    });
  }

  private checkedTensor(x: unknown, name: string): tf.Tensor | null {
    if (x == null) {
      return null;
    }
    if (!(x instanceof tf.Tensor)) {
      throw new Error(
        `Layer '${this.name}': expected ${name} to be a tf.Tensor, received ${typeof x}`,
      );
    }
    return x;
  }

  /**
   * The output's Keras mask is the query's, as in Keras. A mask read off the query tensor is
   * copied: tfjs disposes a tensor's `kerasMask` with the tensor, so the output must not share it.
   */
  override computeMask(
    inputs: tf.Tensor | tf.Tensor[],
    mask?: tf.Tensor | tf.Tensor[],
  ): tf.Tensor | tf.Tensor[] {
    const first = toList(inputs)[0];
    const given = Array.isArray(mask) ? mask[0] : mask;
    const own =
      first instanceof tf.Tensor && first.kerasMask != null ? tf.clone(first.kerasMask) : null;
    const queryMask = (given ?? own) as tf.Tensor;
    return this.returnsScoresNow ? [queryMask, null as unknown as tf.Tensor] : queryMask;
  }

  // ---- shared pieces for subclasses ---------------------------------------------------------------

  /**
   * ANDs every applicable mask, each expanded to the rank of the scores.
   *
   * @param scoresShape the logits' shape; the last axis holds the keys, the one before the queries.
   * @param opts.numAxes attention axes (key axes at the end of the scores); causal masks and valid
   *   lengths need exactly one.
   * @param opts.headsAxis Keras' expansion for MultiHeadAttention: masks of lower rank get a new
   *   axis at `-2 * numAxes - 1` (the heads) until the rank matches; otherwise leading axes.
   * @param opts.queryMaskInScores whether the query's Keras mask masks score rows (MHA) rather
   *   than zeroing output rows (Attention).
   */
  protected combinedMask(
    scoresShape: number[],
    ctx: AttendContext,
    opts: {numAxes: number; headsAxis: boolean; queryMaskInScores: boolean},
  ): tf.Tensor | null {
    const rank = scoresShape.length;
    const expand = (m: tf.Tensor): tf.Tensor => {
      let x = m;
      while (x.rank < rank) {
        const headsAt = -2 * opts.numAxes - 1; // Keras: the heads axis, counted from the end
        x = tf.expandDims(x, opts.headsAxis && x.rank + 1 + headsAt >= 0 ? headsAt : 0);
      }
      return x;
    };
    const check = (m: tf.Tensor, what: string) => {
      if (!isBroadcastable(m.shape, scoresShape)) {
        throw new Error(
          `Layer '${this.name}': ${what} of shape ${formatShape(m.shape)} does not broadcast to the ` +
            `attention scores ${formatShape(scoresShape)}`,
        );
      }
      return m;
    };
    const needOneAxis = (what: string) => {
      if (opts.numAxes !== 1) {
        throw new Error(
          `Layer '${this.name}': ${what} needs a single attention axis, this layer attends over ${opts.numAxes}`,
        );
      }
    };
    const masks: tf.Tensor[] = [];
    if (ctx.validLens != null) {
      needOneAxis('validLens');
      masks.push(validLensMask(ctx.validLens, scoresShape, `Layer '${this.name}'`));
    }
    if (ctx.useCausalMask) {
      needOneAxis('useCausalMask');
      const [t, s] = scoresShape.slice(rank - 2);
      masks.push(tf.reshape(causalMask(t, s), [...new Array(rank - 2).fill(1), t, s]));
    }
    if (ctx.attentionMask != null) {
      masks.push(check(expand(ctx.attentionMask), 'attentionMask'));
    }
    const kerasKeyMask = (m: tf.Tensor | null, what: string) => {
      if (m != null) {
        needOneAxis(`a Keras ${what} mask`);
        masks.push(check(expand(tf.expandDims(m, -2)), `the ${what}'s Keras mask`));
      }
    };
    kerasKeyMask(ctx.valueMask, 'value');
    kerasKeyMask(ctx.keyMask, 'key');
    if (opts.queryMaskInScores && ctx.queryMask != null) {
      needOneAxis('a Keras query mask');
      masks.push(check(expand(tf.expandDims(ctx.queryMask, -1)), "the query's Keras mask"));
    }
    return combineMasks(...masks);
  }

  /** Masked softmax over the key axes, then dropout when training. */
  protected attentionWeights(
    logits: tf.Tensor,
    mask: tf.Tensor | null,
    numAxes: number,
    training: boolean,
  ): {weights: tf.Tensor; dropped: tf.Tensor} {
    return this.dropWeights(softmaxWithMask(logits, mask, numAxes), training);
  }

  /** Dropout on attention weights when training (and the rate is not 0). */
  protected dropWeights(
    weights: tf.Tensor,
    training: boolean,
  ): {weights: tf.Tensor; dropped: tf.Tensor} {
    if (!training || this.dropout === 0) {
      return {weights, dropped: weights};
    }
    const seed = this.seed == null ? undefined : this.seed + this.dropoutCalls++;
    return {weights, dropped: tf.dropout(weights, this.dropout, undefined, seed)};
  }

  // ---- sublayer weights ---------------------------------------------------------------------------

  override get trainable(): boolean {
    return super.trainable;
  }

  override set trainable(value: boolean) {
    super.trainable = value;
    for (const s of this.sublayers ?? []) {
      s.trainable = value;
    }
  }

  override get trainableWeights(): LayerVariable[] {
    if (!this.trainable) {
      return [];
    }
    return super.trainableWeights.concat(...this.sublayers.map((s) => s.trainableWeights));
  }

  override set trainableWeights(weights: LayerVariable[]) {
    super.trainableWeights = weights;
  }

  override get nonTrainableWeights(): LayerVariable[] {
    return super.nonTrainableWeights.concat(...this.sublayers.map((s) => s.nonTrainableWeights));
  }

  override set nonTrainableWeights(weights: LayerVariable[]) {
    super.nonTrainableWeights = weights;
  }

  override get losses(): RegularizerFn[] {
    return super.losses.concat(...this.sublayers.map((s) => s.losses));
  }

  override setFastWeightInitDuringBuild(value: boolean): void {
    super.setFastWeightInitDuringBuild(value);
    for (const s of this.sublayers) {
      s.setFastWeightInitDuringBuild(value);
    }
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
    return {...super.getConfig(), ...config};
  }
}
