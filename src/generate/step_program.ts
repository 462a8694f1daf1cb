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

import type {Int4Weight} from '../layers/core/quantization';

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
 * An int8 weight of Keras 3's int8 layers: its values (int8 held as bytes, ops/int8.ts) read as
 * they are held (in place on tfjs-wasm's heap), or packed transposed once (a head-major kernel),
 * and its float32 scale.
 */
export interface StepInt8Weight {
  /** Its number of values. */
  readonly size: number;
  /** Its scale's number of values (one per output channel, or one per table row). */
  readonly scaleSize: number;
}

/**
 * An int4 weight of Keras 3.15's int4 layers (ops/int4.ts' layouts) as the step reads it: its
 * packed bytes and int8 zero points as they are held, its float32 scale.
 */
export interface StepInt4Weight {
  /** The float weight's first axis (a kernel's inputs, a table's rows). */
  readonly rows: number;
  /** Its second axis (a kernel's outputs, a table's width). */
  readonly cols: number;
  /** Values per group along the grouped axis; -1: per channel. */
  readonly blockSize: number;
  /** Packed along the second axis and grouped along the first (a kernel) or the second (a table). */
  readonly groupAxis: 0 | 1;
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
  /**
   * A sliding window (null or absent: none): the query at position p attends to the keys at
   * positions `p - window + 1 .. p` only, `window` keys with its own. keras-hub's Mistral
   * (`MistralTransformerDecoder`: `i < j + sliding_window` with the causal mask) and Gemma 3
   * (`Gemma3Attention._mask_sliding_window`: `|i - j| <= sliding_window_size - 1` with the causal
   * mask) compute this same mask during `generate`.
   */
  window?: number | null;
  /**
   * Gemma's logit soft cap (null or absent: none): each scaled score s becomes
   * `softCap * tanh(s / softCap)`, before the mask and the softmax.
   */
  softCap?: number | null;
}

/** Options of {@link StepEmitter.rmsNorm}. */
export interface StepRmsNormOptions {
  /**
   * Normalised over each of `groups` equal parts of the width (per-head query / key norms:
   * groups = heads, the scale then has width / groups values). Default 1.
   */
  groups?: number;
  /** The rows are multiplied by `offset + scale` (Gemma's norms: 1). Default 0. */
  offset?: number;
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
   * An int8 weight: `values` (int8 held as bytes, dtype `bool`; any other dtype is declined) and
   * its float32 `scale` (`float weight ≈ values / scale`, Keras' `kernel_scale` /
   * `embeddings_scale`).
   */
  int8Weight(values: StepWeightSource, scale: StepWeightSource): StepInt8Weight | StepDecline;
  /**
   * An int4 weight (a layer's `int4Weights()` entry): packed along its second axis, its zero
   * points int8 and its groups Keras' `floor(i / blockSize)`; another layout (an untied reverse
   * table, packed along its first axis with float32 zero points) is declined.
   */
  int4Weight(weight: Int4Weight): StepInt4Weight | StepDecline;
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
  /**
   * A head-major product (Gemma's query / key / value `btd,ndh->btnh`): kernel `[heads, x.width,
   * headDim]`, bias `[heads, headDim]` or null; returns `[rows, heads * headDim]`.
   */
  denseHeads(
    x: StepValue,
    kernel: StepWeight,
    bias: StepWeight | null,
    heads: number,
    headDim: number,
  ): StepValue;
  /** `x · tableᵀ` with table `[rows, x.width]`: the tied logits. */
  denseT(x: StepValue, table: StepWeight, rows: number): StepValue;
  /**
   * Keras 3.15's int4 Dense / EinsumDense (weight-only): `act(x · W + bias)`, W the int4 kernel
   * `[x.width, units]` (grouped: `(q - zero) · scale` per group of input rows; per channel the
   * product with q divided by the scale).
   */
  denseInt4(
    x: StepValue,
    kernel: StepInt4Weight,
    bias: StepWeight | null,
    units: number,
    act: StepActivation,
  ): StepValue;
  /**
   * Keras 3.15's int4 tied logits as a reloaded keras-hub ReversibleEmbedding computes them: each
   * row of `x` quantized to int8 (abs-max per row), times the int4 table `[rows, x.width]`
   * transposed, divided by the row's scale.
   */
  denseTInt4(x: StepValue, table: StepInt4Weight, rows: number): StepValue;
  /** Keras 3.15's int4 Embedding lookup: the table's rows at the ids, dequantized. */
  gatherInt4(ids: StepValue, table: StepInt4Weight, dim: number): StepValue;
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
  /**
   * Keras 3's int8 head-major product (Gemma's `btd,ndh->btnh` quantized): `x` quantized per row
   * as in `denseInt8`, the int8 kernel `[heads, x.width, headDim]`, its scale `[heads * headDim]`
   * (one per output channel, in the output's order), bias `[heads, headDim]` or null; returns
   * `act([rows, heads * headDim])`.
   */
  denseHeadsInt8(
    x: StepValue,
    kernel: StepInt8Weight,
    bias: StepWeight | null,
    heads: number,
    headDim: number,
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
   * `x / sqrt(mean(x^2) + epsilon) * (offset + scale)`, scale `[x.width / groups]`; with
   * `groups`, over each of `groups` equal parts of the width (per-head query / key norms); with
   * `offset` (Gemma: 1), times `offset + scale`. Defaults: groups 1, offset 0.
   */
  rmsNorm(
    x: StepValue,
    scale: StepWeight,
    epsilon: number,
    options?: StepRmsNormOptions,
  ): StepValue;
  /**
   * keras-hub's RotaryEmbedding on each of `heads` heads of x `[rows, heads * headDim]` at each
   * row's position in the sequence: `angle_i = position * inverseFrequencies[i]` (i < headDim / 2,
   * in float32); each head's halves rotated: `out[:h] = x1 cos - x2 sin`, `out[h:] = x2 cos + x1
   * sin` (h = headDim / 2). The rule computes the frequencies (wavelength, position scaling
   * factor, Llama 3.1's smoothing).
   */
  rope(x: StepValue, heads: number, headDim: number, inverseFrequencies: Float32Array): StepValue;
  /** `x * factor`. */
  scale(x: StepValue, factor: number): StepValue;
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
