/**
 * What a keras-hub model family declares (one object per family file, as a layer class declares
 * its contract): its keras-hub class names, the config keys it reads and the options it refuses,
 * its inputs and outputs, and how it builds a functional tfjs model whose weights are bound to
 * keras-hub's weight paths (the paths Keras 3 writes inside `model.weights.h5`).
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';

import type {ContractClass, Json, JsonObject} from '../layers/engine/contract';
import {isObject} from '../layers/engine/json_object';
import type {ReversibleEmbedding} from '../layers/hub/reversible_embedding';
import type {StepCompile} from '../generate/step_program';
import type {PresetTokenizerClass} from '../tokenizers/preset_tokenizer';

/** One weight as a Keras file holds it: its shape, dtype (float32 when unset) and values. */
export interface HubWeightValue {
  /** The weight's shape. */
  shape: readonly number[];
  /** `float32` (the default), `float16`, `bfloat16` or `float64`: values are taken as float32. */
  dtype?: string;
  /** The values, row-major. */
  values: ArrayLike<number>;
}

/**
 * One weight of a weights file, read when it is bound (a keras-hub preset's weights): its
 * declared shape and dtype, its values only on request. The preset loader streams each weight
 * from its file straight into its variable this way, holding no second copy of the weights.
 */
export interface HubWeightReader {
  /** The weight's shape, as the file declares it. */
  readonly shape: readonly number[];
  /** `float32`, `int32` for integer datasets, `bool` for int8 ones (bytes, ops/int8.ts). */
  readonly dtype: 'float32' | 'int32' | 'bool';
  /** Its values, read from the file now (the int8 scales' checks). */
  read(): Float32Array | Int32Array | Int8Array;
  /**
   * Its values as `read` gives them, into `out` (at least its bytes; one buffer reused from weight
   * to weight, where the loader quantizes while loading), when the reader can.
   */
  readInto?(out: Uint8Array): void;
  /**
   * Writes its values into `variable` (of its shape: checked before): as float32, or as bytes into
   * an int8 layer's variable.
   */
  write(variable: LayerVariable): void;
}

/**
 * keras-hub's weights by Keras 3 path (`layers/gpt2_backbone/layers/...`): values, tensors, or
 * readers of a weights file's datasets.
 */
export type HubWeights = ReadonlyMap<string, HubWeightValue | tf.Tensor | HubWeightReader>;

/** One weight of {@link HubWeights}. */
export type HubWeight = HubWeightValue | tf.Tensor | HubWeightReader;

/** Whether a weight is read from its file when bound (a {@link HubWeightReader}). */
export function isHubWeightReader(w: HubWeight | undefined): w is HubWeightReader {
  return (
    w != null && !(w instanceof tf.Tensor) && typeof (w as HubWeightReader).write === 'function'
  );
}

/** A tfjs weight and the Keras 3 path it is read from. */
export interface WeightBinding {
  /** Keras 3 path, relative to the model being built (the backbone's, or the task's). */
  path: string;
  /** The tfjs weight it sets. */
  variable: LayerVariable;
}

/**
 * The functional graph of a backbone: inputs, named outputs and the token embedding. Its weights'
 * Keras 3 paths are derived from its layers (`hubWeightBindings`, build.ts), never declared.
 */
export interface BackboneGraph {
  /** Symbolic inputs in the order of the family's `inputs`. */
  inputs: SymbolicTensor[];
  /** Symbolic outputs by keras-hub's names (`sequence_output`, `pooled_output`). */
  outputs: Record<string, SymbolicTensor>;
  /** The token embedding (a causal LM's logits are its reverse call). */
  tokenEmbedding: ReversibleEmbedding;
}

/**
 * A part of the weights a config sizes (a lower bound of what the family's model holds): the
 * config options it is computed from, what it is, and how many values it has.
 */
export interface WeightTerm {
  /** The config options and their values (`{max_sequence_length: 1024, hidden_dim: 768}`). */
  keys: Readonly<Record<string, number>>;
  /** What the values are (`the position embedding`). */
  what: string;
  /** How many values (float64 arithmetic: a huge config stays a huge number). */
  values: number;
}

/**
 * The options of keras-hub's learned-position transformer backbones (GPT-2, BERT), checked:
 * keras-hub's dropout default 0.1, and `maxLengthDefault` for an absent `max_sequence_length`.
 */
export function positionalTransformerOptions(
  config: JsonObject,
  cls: string,
  maxLengthDefault: number,
) {
  return {
    vocab: configInt(config, 'vocabulary_size', cls),
    numLayers: configInt(config, 'num_layers', cls),
    numHeads: configInt(config, 'num_heads', cls),
    hidden: configInt(config, 'hidden_dim', cls),
    intermediate: configInt(config, 'intermediate_dim', cls),
    dropout: configRate(config, 'dropout', cls, 0.1),
    maxLength:
      config.max_sequence_length == null
        ? maxLengthDefault
        : configInt(config, 'max_sequence_length', cls),
  };
}

/**
 * The weights of keras-hub's learned-position transformer backbones (GPT-2, BERT): a token and a
 * position embedding, and per block four `hidden x hidden` attention kernels and two
 * `hidden x intermediate` feed-forward kernels.
 */
export function positionalTransformerTerms(o: {
  vocab: number;
  maxLength: number;
  numLayers: number;
  hidden: number;
  intermediate: number;
}): WeightTerm[] {
  return [
    {
      keys: {vocabulary_size: o.vocab, hidden_dim: o.hidden},
      what: 'a token embedding',
      values: o.vocab * o.hidden,
    },
    {
      keys: {max_sequence_length: o.maxLength, hidden_dim: o.hidden},
      what: 'a position embedding',
      values: o.maxLength * o.hidden,
    },
    {
      keys: {num_layers: o.numLayers, hidden_dim: o.hidden, intermediate_dim: o.intermediate},
      what: "the blocks' attention and feed-forward kernels",
      values: o.numLayers * (4 * o.hidden * o.hidden + 2 * o.hidden * o.intermediate),
    },
  ];
}

/** What a task adds on a backbone. */
export type TaskKind = 'causalLM' | 'textClassifier' | 'textEmbedder';

/** A layer class of a family's own (registered with tfjs' serialization with the family). */
export type KerasHubLayerClass = ContractClass &
  tf.serialization.SerializableConstructor<tf.serialization.Serializable>;

/**
 * keras-hub's preprocessor settings of a family where its preprocessor.json leaves them unset
 * (keras-hub's packer arguments: `add_start_token`, `add_end_token`).
 */
export interface KerasHubPreprocessorDefaults {
  /** Whether the start token is put first. */
  readonly addStartToken: boolean;
  /** Whether the end token is put last. */
  readonly addEndToken: boolean;
}

/**
 * A keras-hub family, registered by `registerKerasHubFamily`: its classes, config, inputs and
 * outputs, its graph, its own layer classes, its tokenizer and its preprocessor's settings.
 */
export interface KerasHubFamily {
  /** The family's name in messages (`GPT-2`). */
  readonly name: string;
  /** keras-hub's backbone class (`GPT2Backbone`). */
  readonly backbone: string;
  /** keras-hub's task classes this package builds, and what each adds. */
  readonly tasks: Readonly<Record<string, TaskKind>>;
  /** The backbone's inputs, keras-hub's names, in the tfjs model's input order. */
  readonly inputs: readonly string[];
  /** The backbone's outputs, keras-hub's names, in the tfjs model's output order (those a config's graph has). */
  readonly outputs: readonly string[];
  /** The backbone config keys read (besides `name`, `trainable`, `dtype`). */
  readonly configKeys: readonly string[];
  /** Backbone config keys that must be given (no keras-hub default). */
  readonly requiredKeys: readonly string[];
  /**
   * Why an option's value is not implemented (then building is refused), or null; by key. Keys
   * absent here are implemented for every value keras-hub accepts.
   */
  readonly refuse: Readonly<Record<string, (value: Json, config: JsonObject) => string | null>>;
  /**
   * The weights the (checked) config sizes, a lower bound of the model's: read and checked with
   * `configInt` / `configRate` as `build` reads them, so that a config that does not fit its
   * weights is refused before anything is allocated.
   */
  weightTerms(config: JsonObject): WeightTerm[];
  /** Builds the backbone's functional graph from its (checked) config. */
  build(config: JsonObject): BackboneGraph;
  /**
   * The family's own layer classes (none when it builds on the package's generic layers): they
   * are registered with tfjs' serialization when the family is registered.
   */
  readonly layers: readonly KerasHubLayerClass[];
  /**
   * keras-hub's tokenizer class of the family (its preset's tokenizer.json names it), with its
   * assets (`fileAssets`): the ids it starts, ends, pads and stops at, and those stripped from
   * generated text, are the tokenizer's.
   */
  readonly tokenizer: PresetTokenizerClass;
  /** The preprocessor's settings where preprocessor.json leaves them unset. */
  readonly preprocessor: KerasHubPreprocessorDefaults;
  /**
   * The compile rules of the family's own layer classes, by class name (registered with
   * `registerStepRule` when the family is): their calls then run in `generate`'s compiled step;
   * a class without one decodes with the eager stepper. Unset: none.
   */
  readonly stepRules?: Readonly<Record<string, StepCompile>>;
  /**
   * A backbone config completed from its weights, where keras-hub writes a config that omits an
   * option its weights decide (keras-hub 0.32's Llama drops `tie_word_embeddings`): the config to
   * build and a note saying what was read from the weights, or null to build `config` as it is.
   * Throws when no reading of the config fits the weights. `shapes`: each weight's shape by its
   * Keras 3 path inside the backbone (`layers/reversible_embedding/vars/0`). Unset: none.
   */
  readonly configFromWeights?: (
    config: JsonObject,
    shapes: ReadonlyMap<string, readonly number[]>,
  ) => ConfigReadFromWeights | null;
}

/** A backbone config a family completed from its weights (`configFromWeights`). */
export interface ConfigReadFromWeights {
  /** The config to build. */
  config: JsonObject;
  /** What was read from the weights, said once as the preset loads. */
  note: string;
}

/**
 * The values a config's weights hold at least (the sum of the family's `weightTerms`), or null
 * when the config is one the family's check refuses (then building says why).
 */
export function impliedValues(family: KerasHubFamily, config: JsonObject): number | null {
  let terms: WeightTerm[];
  try {
    terms = family.weightTerms(config);
  } catch {
    return null;
  }
  return terms.reduce((n, t) => n + t.values, 0);
}

/** The config keys every keras-hub class writes besides its own. */
export const COMMON_KEYS = ['name', 'trainable', 'dtype'] as const;

/** The largest integer option a config may hold (an int32: sizes, counts, lengths). */
const INT32_MAX = 2 ** 31 - 1;

/** An integer from a config, checked to lie in [min, 2**31 - 1] (errors name the class and key). */
export function configInt(config: JsonObject, key: string, cls: string, min = 1): number {
  const v = config[key];
  if (!(typeof v === 'number' && Number.isInteger(v) && v >= min && v <= INT32_MAX)) {
    throw new Error(
      `${cls}: expected config ${key} to be an integer in [${min}, ${INT32_MAX}], received ` +
        `${JSON.stringify(v)}`,
    );
  }
  return v;
}

/** A dropout rate from a config: a number in [0, 1] (Keras' Dropout), or its default when absent / null. */
export function configRate(config: JsonObject, key: string, cls: string, fallback: number): number {
  const v = config[key];
  if (v == null) return fallback;
  if (!(typeof v === 'number' && v >= 0 && v <= 1)) {
    throw new Error(
      `${cls}: expected config ${key} to be a rate, a number in [0, 1] (as Keras' Dropout ` +
        `takes it), received ${JSON.stringify(v)}`,
    );
  }
  return v;
}

/** A non-negative number from a config, or its default when absent / null. */
export function configFloat(
  config: JsonObject,
  key: string,
  cls: string,
  fallback: number,
): number {
  const v = config[key];
  if (v == null) return fallback;
  if (!(typeof v === 'number' && Number.isFinite(v) && v >= 0)) {
    throw new Error(
      `${cls}: expected config ${key} to be a number >= 0, received ${JSON.stringify(v)}`,
    );
  }
  return v;
}

/**
 * Checks a keras-hub config: every key known, the required ones present, a float32 dtype, and
 * no refused option (errors name the class, the key, what was expected and what was received).
 */
export function checkConfig(
  cls: string,
  config: JsonObject,
  known: readonly string[],
  required: readonly string[],
  refuse: KerasHubFamily['refuse'],
): void {
  if (!isObject(config)) {
    throw new Error(`${cls}: expected a config object, received ${JSON.stringify(config)}`);
  }
  const all = [...COMMON_KEYS, ...known];
  const unknown = Object.keys(config).filter((k) => !all.includes(k));
  if (unknown.length > 0) {
    throw new Error(
      `${cls}: config option${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} ` +
        `${unknown.length > 1 ? 'are' : 'is'} not implemented (expected only ${all.join(', ')})`,
    );
  }
  if (config.name != null && typeof config.name !== 'string') {
    throw new Error(
      `${cls}: expected config name to be a string, received ${JSON.stringify(config.name)}`,
    );
  }
  const missing = required.filter((k) => config[k] == null);
  if (missing.length > 0) {
    throw new Error(`${cls}: config is missing ${missing.join(', ')}`);
  }
  const dtype = dtypeName(config.dtype);
  if (dtype != null && dtype !== 'float32') {
    throw new Error(
      `${cls}: config dtype ${JSON.stringify(dtype)} is not implemented (expected float32)`,
    );
  }
  for (const [key, check] of Object.entries(refuse)) {
    if (!(key in config)) continue;
    const why = check(config[key], config);
    if (why != null) {
      throw new Error(
        `${cls}: config ${key}=${JSON.stringify(config[key])} is not implemented: ${why}`,
      );
    }
  }
}

/** The name of a config's dtype (a string or Keras' serialized DTypePolicy), null when unset. */
function dtypeName(dtype: Json | undefined): string | null {
  if (dtype == null) return null;
  if (typeof dtype === 'string') return dtype;
  if (isObject(dtype)) {
    const inner = dtype.config;
    if (isObject(inner)) {
      const name = inner.name;
      if (dtype.class_name === 'DTypePolicy' && typeof name === 'string') return name;
    }
    return JSON.stringify(dtype);
  }
  return JSON.stringify(dtype);
}

/** How many values `weights` holds in all. */
function heldValues(weights: HubWeights, perByte: number): number {
  let n = 0;
  for (const w of weights.values()) {
    const size = w.shape.reduce((a: number, d) => a * d, 1);
    const bytes =
      w instanceof tf.Tensor ? w.dtype === 'bool' : w.dtype === 'bool' || w.dtype === 'int8';
    n += bytes ? size * perByte : size;
  }
  return n;
}

/**
 * Refuses, before anything is built, a config whose weights (by `terms`, a lower bound) hold
 * more values than `weights` does: a config that does not fit its weights, whose model could not
 * be allocated (a `max_sequence_length` of 1e9) or built (a `num_layers` of 1e9). The error names
 * the largest term's options. `perByte`: the values a weight of bytes holds per byte (2: int4
 * values packed two to a byte).
 */
export function checkWeightTerms(
  cls: string,
  terms: readonly WeightTerm[],
  weights: HubWeights,
  perByte = 1,
): void {
  if (!(weights instanceof Map)) return; // bindWeights says what it expected
  const implied = terms.reduce((n, t) => n + t.values, 0);
  const held = heldValues(weights, perByte);
  if (implied <= held) return;
  const largest = terms.reduce((a, t) => (t.values > a.values ? t : a));
  const keys = Object.entries(largest.keys).map(([k, v]) => `${k}=${v}`);
  throw new Error(
    `${cls}: config ${keys.join(' and ')} ${keys.length > 1 ? 'imply' : 'implies'} ` +
      `${largest.what} of ${largest.values} values; expected a config that fits its weights, ` +
      `which hold ${held} values in all (received a config implying at least ${implied})`,
  );
}

/** The dtypes whose values are taken as float32 weights. */
const FLOAT_DTYPES = ['float32', 'float16', 'bfloat16', 'float64'];

const sameShape = (a: readonly number[], b: readonly number[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/**
 * Sets every binding's weight from `weights`, after checking them all: a path the model needs
 * and `weights` lacks, a path of `weights` no weight of the model reads, a shape that differs,
 * and a weight of the model no path sets are errors naming the path. Nothing is written unless
 * every check passes. A weight read from its file ({@link HubWeightReader}) is written straight
 * into its variable, one weight at a time.
 */
export function bindWeights(
  cls: string,
  bindings: readonly WeightBinding[],
  modelWeights: readonly LayerVariable[],
  weights: HubWeights,
): void {
  if (!(weights instanceof Map)) {
    throw new Error(
      `${cls}: expected the weights as a Map from Keras path to {shape, values} or a tensor, ` +
        `received ${weights === null ? 'null' : typeof weights}`,
    );
  }
  const bound = new Set(bindings.map((b) => b.variable));
  const unbound = modelWeights.filter((w) => !bound.has(w));
  if (unbound.length > 0) {
    throw new Error(
      `${cls}: the model's weight${unbound.length > 1 ? 's' : ''} ` +
        `${unbound.map((w) => w.originalName).join(', ')} ha${unbound.length > 1 ? 've' : 's'} no ` +
        'keras-hub path',
    );
  }
  const missing = bindings.filter((b) => !weights.has(b.path));
  if (missing.length > 0) {
    throw new Error(
      `${cls}: ${missing.length} weight${missing.length > 1 ? 's' : ''} missing: ` +
        missing
          .slice(0, 5)
          .map((b) => `${b.path} (shape [${b.variable.shape.join(', ')}])`)
          .join(', ') +
        (missing.length > 5 ? `, and ${missing.length - 5} more` : ''),
    );
  }
  const paths = new Set(bindings.map((b) => b.path));
  const extra = [...weights.keys()].filter((p) => !paths.has(p));
  if (extra.length > 0) {
    throw new Error(
      `${cls}: ${extra.length} weight path${extra.length > 1 ? 's' : ''} not read by the model: ` +
        extra.slice(0, 5).join(', ') +
        (extra.length > 5 ? `, and ${extra.length - 5} more` : ''),
    );
  }
  for (const b of bindings) {
    const w = weights.get(b.path) as HubWeight;
    const shape = w.shape;
    if (!sameShape(shape, b.variable.shape as number[])) {
      throw new Error(
        `${cls}: weight ${b.path} expected shape [${b.variable.shape.join(', ')}], received ` +
          `[${shape.join(', ')}]`,
      );
    }
    if (!(w instanceof tf.Tensor)) {
      // an int8 layer's weight takes int8 bytes (int8_weights.ts made them so); others a float
      const int8 = b.variable.dtype === 'bool' && w.dtype === 'bool';
      if (!int8 && w.dtype != null && !FLOAT_DTYPES.includes(w.dtype)) {
        throw new Error(
          `${cls}: weight ${b.path} expected a float dtype (${FLOAT_DTYPES.join(', ')}), ` +
            `received ${w.dtype}`,
        );
      }
      const size = shape.reduce((p, d) => p * d, 1);
      if (isHubWeightReader(w)) continue; // its file declares as many values as its shape
      if (w.values == null || w.values.length !== size) {
        throw new Error(
          `${cls}: weight ${b.path} of shape [${shape.join(', ')}] expected ${size} values, ` +
            `received ${w.values == null ? 'none' : w.values.length}`,
        );
      }
    }
  }
  for (const b of bindings) {
    const w = weights.get(b.path) as HubWeight;
    if (isHubWeightReader(w)) {
      w.write(b.variable);
      continue;
    }
    tf.tidy(() => {
      const t =
        w instanceof tf.Tensor
          ? tf.cast(w, 'float32')
          : tf.tensor(Float32Array.from(w.values), [...w.shape], 'float32');
      b.variable.write(t);
    });
  }
}
