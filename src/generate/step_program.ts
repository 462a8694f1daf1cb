/**
 * The types of a compiled decoding step (`generate`): what a layer class's compile rule receives
 * and emits. Rules are found by class name (step_rules.ts: the package's built-in rules, and those
 * a model family or a user registers with `registerStepRule`). A rule is given the layer, the
 * step values of its inputs and an emitter; it emits kernel ops (the kernels of
 * kernels/step_kernels_api.ts) and returns the values of its outputs, or declines with the reason
 * (an option it does not compile), and the model then decodes with the eager stepper. Types only:
 * the compiler and its runtime are step_compile.ts and compiled_step.ts.
 */
import type * as tf from '@tensorflow/tfjs-core';

import type {StepActivation} from '../kernels/step_kernels_api';
import type {GraphLayer, GraphNode} from '../layers/engine/contract';

/**
 * A value of the step: rows `[batch * t, width]` (float32, or int32 ids of width 1), one row per
 * new position of each batch row. Opaque: only the emitter reads or makes one.
 */
export interface StepValue {
  /** The features of each row. */
  readonly width: number;
  /** float32 activations, or the int32 token ids. */
  readonly dtype: 'float32' | 'int32';
}

/** A weight the step reads (in place on tfjs' wasm backend, copied once per run elsewhere). */
export interface StepWeight {
  /** Its number of values. */
  readonly size: number;
}

/**
 * An int8 weight of Keras 3's int8 layers: its values (whole numbers in [-127, 127], held in a
 * float32 tensor by tfjs) packed as int8 in the step's memory once per run, and its float32 scale.
 */
export interface StepInt8Weight {
  /** Its number of values. */
  readonly size: number;
  /** Its scale's number of values (one per output channel, or one per table row). */
  readonly scaleSize: number;
}

/** What a weight is read from: a tensor, or a tfjs-layers variable (`LayerVariable`). */
export type StepWeightSource =
  | tf.Tensor
  | {
      /** The variable's current value. */
      read(): tf.Tensor;
    };

/** The heads of a causal self-attention over the step's key / value cache. */
export interface StepAttention {
  /** Query heads. */
  heads: number;
  /** Key / value heads (a divisor of `heads`; query head h reads kv head floor(h / (heads / kvHeads))). */
  kvHeads: number;
  /** The size of each head (of queries, keys and values alike). */
  headDim: number;
  /** The scores' scale (`1 / sqrt(headDim)` for Keras' layers). */
  scale: number;
}

/** A rule declines to compile a call: the reason (shown in reports; the eager stepper then runs). */
export interface StepDecline {
  /** Why, phrased to follow "layer 'x' (Class): ". */
  declined: string;
}

/** Emits the ops of one layer call into the step's program; each op returns its output value. */
export interface StepEmitter {
  /** A float32 weight (any other dtype is declined). */
  weight(source: StepWeightSource): StepWeight | StepDecline;
  /**
   * An int8 weight: `values` (whole numbers in [-127, 127] in a float32 tensor) and its float32
   * `scale` (`float weight ≈ values / scale`, Keras' `kernel_scale` / `embeddings_scale`).
   */
  int8Weight(values: StepWeightSource, scale: StepWeightSource): StepInt8Weight | StepDecline;
  /** The kernel code of a tfjs / Keras activation name (`linear` and null: None), or null if unknown. */
  activation(name: unknown): StepActivation | null;
  /** `act(x · kernel + bias)`: kernel `[x.width, units]` (Keras layout), bias `[units]` or null. */
  dense(
    x: StepValue,
    kernel: StepWeight,
    bias: StepWeight | null,
    units: number,
    act: StepActivation,
  ): StepValue;
  /** `x · tableᵀ` with table `[rows, x.width]`: the tied logits. */
  denseT(x: StepValue, table: StepWeight, rows: number): StepValue;
  /**
   * Keras 3's int8 Dense: each row of `x` quantized (abs-max per row, round half to even, clip
   * ±127), multiplied by the int8 kernel `[x.width, units]` exactly, divided by (row scale ·
   * kernel scale `[units]`), then `act(· + bias)`.
   */
  denseInt8(
    x: StepValue,
    kernel: StepInt8Weight,
    bias: StepWeight | null,
    units: number,
    act: StepActivation,
  ): StepValue;
  /** The int8 tied logits: `x` quantized per row against the int8 table `[rows, x.width]` (scale `[rows]`). */
  denseTInt8(x: StepValue, table: StepInt8Weight, rows: number): StepValue;
  /** Layer normalization over the width (gamma / beta null: absent). */
  layerNorm(
    x: StepValue,
    gamma: StepWeight | null,
    beta: StepWeight | null,
    epsilon: number,
  ): StepValue;
  /**
   * RMS normalization over the width, as keras-hub's LlamaLayerNorm (in float32):
   * `x / sqrt(mean(x^2) + epsilon) * scale`, scale `[x.width]`.
   */
  rmsNorm(x: StepValue, scale: StepWeight, epsilon: number): StepValue;
  /** `a + b`. */
  add(a: StepValue, b: StepValue): StepValue;
  /** `a * b`. */
  mul(a: StepValue, b: StepValue): StepValue;
  /** `act(x)`. */
  activate(x: StepValue, act: StepActivation): StepValue;
  /** Rows of `table [vocab, dim]` at the ids. */
  gather(ids: StepValue, table: StepWeight, dim: number): StepValue;
  /** Keras 3's int8 Embedding: rows of the int8 `table [vocab, dim]` at the ids, each / its scale `[vocab]`. */
  gatherInt8(ids: StepValue, table: StepInt8Weight, dim: number): StepValue;
  /**
   * Rows `offset + position` of `table [length, dim]` for each row of `like` (its position in the
   * sequence), plus `like` when `add` (a token embedding), else alone (keras-hub's
   * PositionEmbedding, broadcast over the batch).
   */
  positions(
    like: StepValue,
    table: StepWeight,
    dim: number,
    offset: number,
    add: boolean,
  ): StepValue;
  /**
   * Causal self-attention over this layer's key / value cache: the step's keys and values `k`,
   * `v` (`[rows, kvHeads * headDim]`) are written into it at their positions, then the queries
   * `q` (`[rows, heads * headDim]`) attend to every position up to their own (the keys of the
   * id 0 masked where the model masks it). Returns `[rows, heads * headDim]`.
   */
  attention(q: StepValue, k: StepValue, v: StepValue, heads: StepAttention): StepValue;
  /**
   * Compiles a sublayer (a tfjs built-in layer or one of the package's) through its own rule,
   * as part of this call (a block's norms, dense layers and attention).
   */
  layer(layer: GraphLayer, inputs: StepValue[]): StepValue[] | StepDecline;
}

/**
 * A layer class's compile rule: the ops of one call of `layer` on `inputs` (`node`: its graph
 * node, null for a sublayer compiled through {@link StepEmitter.layer}), and its outputs' values.
 */
export type StepCompile = (
  layer: GraphLayer,
  inputs: StepValue[],
  emit: StepEmitter,
  node: GraphNode | null,
) => StepValue[] | StepDecline;
