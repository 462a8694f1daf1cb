/**
 * A layer class's contract: what the rest of the package needs to know about the class, declared
 * on the class itself as `static readonly contract: LayerContract`. The Keras loader
 * (interop/keras.ts), both exporters (interop/keras_export.ts, interop/keras3_export.ts), Keras 3
 * weight paths (interop/keras3_weights.ts), the topology guard (io/topology_guard.ts) and
 * `generate`'s planner (generate/graph_plan.ts) read it through {@link contractOf}, by the class
 * name tfjs serializes; none of them keeps a table of this package's classes.
 *
 * A user's own layer class takes part the same way: declare `static readonly contract` and
 * register the class with `tf.serialization.registerClass`.
 *
 * Contract functions read configs in one spelling, camelCase, as `getConfig()` writes them: the
 * planner hands them a layer's `getConfig()`, and the readers of saved (snake_case) topologies
 * convert each config once with `camelConfig` before calling them.
 *
 * A class states its contract with {@link defineContract}, which fills the parts most classes
 * share; the parts without a default are required, so a class that leaves one out is a compile
 * error (see {@link ContractSpec}, {@link ContractClass}), not a check that is silently skipped.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {camelCase} from './config_objects';

/** A JSON value of a saved topology (what the loader, the exporters and the guard read). */
export type Json = null | boolean | number | string | Json[] | {[key: string]: Json};
/** A JSON object of a saved topology. */
export type JsonObject = {[key: string]: Json};

/** This layer has no counterpart there: the message says why and what to use instead. */
export interface Refused {
  /** Why, phrased to follow "layer 'x' is a <class>, which ...". */
  refused: string;
}

/** A Keras 3 class a layer maps to. */
export interface Keras3Class {
  /** Python package of the class (`keras_hub`, or a user's own), unset for `keras.layers`. */
  pkg?: string;
  /** The module Keras 3 writes, when not `keras.layers` / the package. */
  module?: string;
  /** The `registered_name` Keras 3 writes, when not `<pkg>><class>` (or null for keras.layers). */
  registeredName?: string;
  /** The config keys Keras 3's class takes (snake_case); name, trainable and dtype always. */
  keys: readonly string[];
  /** The weight-path prefix, when not the snake-cased class name (Keras' Python class differs). */
  pathPrefix?: string;
}

/**
 * How Keras calls the layer in a functional graph (its inbound nodes):
 * - `tensor`: on one tensor (or a list of tensors), options by keyword;
 * - `attention`: an attention layer; `byKeyword` (MultiHeadAttention's form): `(query, value,
 *   key=, attention_mask=)`, else Keras' `Attention([query, value, key])`;
 * - `keyword`: tensors by keyword in `roles` (camelCase; the first `positional` may be given
 *   positionally), non-tensor `options` kept in the config under the key given (null: dropped);
 * - `indexing`: Keras 3's `GetItem` operation, its index in the node;
 * - `positions`: a position layer whose constant `start_index` moves into its config.
 */
export type KerasCall = TensorCall | AttentionCall | KeywordCall | IndexingCall | PositionsCall;

/** Called on one tensor (or a list of tensors), options by keyword. */
export interface TensorCall {
  /** The calling form. */
  kind: 'tensor';
  /**
   * Keyword arguments Keras' call needs that tfjs reads from the inputs instead, by the call's
   * input dtypes (ReversibleEmbedding: `reverse=True` for hidden states); unset: none.
   */
  kerasKwargs?: (inputDtypes: readonly string[]) => Readonly<Record<string, boolean>>;
}

/** An attention layer's call. */
export interface AttentionCall {
  /** The calling form. */
  kind: 'attention';
  /** MultiHeadAttention's `(query, value, key=, attention_mask=)`, else `([query, value, key])`. */
  byKeyword: boolean;
}

/** Tensors by keyword (keras-hub's transformer blocks). */
export interface KeywordCall {
  /** The calling form. */
  kind: 'keyword';
  /** The tensor arguments (camelCase) in the call's order. */
  roles: readonly string[];
  /** How many leading roles may be given positionally. */
  positional: number;
  /** Non-tensor call arguments kept in the config under the key given (null: dropped). */
  options: Readonly<Record<string, string | null>>;
}

/** Keras 3's `GetItem` operation: its index in the node. */
export interface IndexingCall {
  /** The calling form. */
  kind: 'indexing';
}

/** A position layer: a constant `start_index` moves into its config. */
export interface PositionsCall {
  /** The calling form. */
  kind: 'positions';
}

/** The layer's Keras names and calling form. */
export interface KerasContract {
  /** What the layer is in Keras 3, or why it has no counterpart. */
  keras3: Keras3Class | Refused;
  /** Whether tf-keras 2 has the class under this name (`{}`), or why it has none. */
  keras2: Record<string, never> | Refused;
  /** How Keras calls it. */
  call: KerasCall;
  /** Config keys Keras writes that the layer's own config has not (accepted, then dropped). */
  kerasOnlyKeys: readonly string[];
  /**
   * Why a saved config (camelCased: `camelConfig`) has no Keras counterpart (e.g. a
   * d2l-only option), or null.
   */
  refuseConfig: ((config: JsonObject) => string | null) | null;
}

/** A projection sublayer and where Keras 3 keeps its weights. */
export interface SublayerFolder {
  /** The sublayer's name here (weights `<layer>/<name>/kernel`, `.../bias`). */
  name: string;
  /** Keras 3's attribute, the folder of its weights (`<keras3>/vars/0` kernel, `vars/1` bias). */
  keras3: string;
}

/** The layer's weights as Keras 3 names them, and what its config implies of their size. */
export interface WeightContract {
  /** Projection sublayers kept as `<folder>/vars/{0,1}`, or null (weights by their own names). */
  sublayers: readonly SublayerFolder[] | null;
  /** Sublayers whose Keras 3 folder is not `_<name>` (keras-hub blocks), by name. */
  keras3Folders: Readonly<Record<string, string>>;
  /**
   * A lower bound of the weight values a saved config (camelCased: `camelConfig`) implies,
   * and the option that
   * sets it: the guard refuses a config implying more than the weights manifest declares.
   */
  implied(config: JsonObject): ImpliedSize;
}

/** What the decoding planner reads of tfjs' graph nodes (`layer.inboundNodes[i]`). */
export interface GraphNode {
  /** The layer called. */
  outboundLayer: GraphLayer;
  /** The call's inputs. */
  inputTensors: SymbolicTensor[];
  /** The call's outputs. */
  outputTensors: SymbolicTensor[];
  /** The call's options. */
  callArgs?: Kwargs;
}

/** What the decoding planner reads of a tfjs layer. */
export interface GraphLayer {
  /** The layer's name. */
  name: string;
  /** Its calls. */
  inboundNodes: GraphNode[];
  /** Its serialized class name. */
  getClassName(): string;
  /** Its config (camelCase). */
  getConfig(): Record<string, unknown>;
  /** Calls it. */
  apply(inputs: unknown, kwargs?: Kwargs): unknown;
}

/** Why a node of the layer cannot run on new positions alone, or null when it can. */
export type NodeCheck = (config: Record<string, unknown>, node: GraphNode) => string | null;

/** A layer that decodes with a key / value cache in eager calls, returning `[output, cache]`. */
export interface CachedDecoding {
  /** How the layer decodes. */
  kind: 'cached';
  /** Why this call of the layer cannot run with a cache, or null when it can. */
  refuse: NodeCheck;
  /** The cache's shape, `[batch, 2, maxLength, heads, headDim]`. */
  cacheShape(
    config: Record<string, unknown>,
    input: Array<number | null>,
    batch: number,
    maxLength: number,
  ): number[];
  /**
   * The call options naming the cache and where this call's positions go in it. `keyMask`
   * (`[batch, t, maxLength]`, 1 = a kept key, 0 = a masked one), where the model's ids feed a
   * mask_zero embedding whose Keras mask reaches a layer that `readsKerasMasks`: the positions of
   * the cache that hold the id 0, as an attention mask the layer must apply to its keys (a step
   * drops the Keras masks of its new positions, which name those positions alone); null otherwise.
   */
  cacheKwargs(cache: unknown, index: number, keyMask: unknown): Kwargs;
  /** Whether the layer reads the Keras masks of its inputs (padding masks from mask_zero). */
  readsKerasMasks: boolean;
  /**
   * Whether the Keras mask of its query masks whole rows of scores, as Keras'
   * MultiHeadAttention does (then a query of the id 0 attends to no key, and Keras averages over
   * every key of the sequence, later ones included, which a cache cannot give); default true.
   * keras-hub's TransformerDecoder masks keys only.
   */
  masksQueries?: boolean;
  /**
   * The role of a second input that is a key padding mask (the model's padding-mask input),
   * which a cached step leaves out; null when the layer takes no such input.
   */
  paddingMaskRole: string | null;
}

/**
 * How the layer takes part in cached decoding (`generate`):
 * - `positionWise`: each position alone (the check says when a call does not);
 * - `positionAware`: each position alone given `startIndex` (position layers);
 * - `cached`: attention over earlier positions through a key / value cache;
 * - `refused`: it cannot (the reason is shown).
 */
export type DecodingContract =
  PositionWiseDecoding | PositionAwareDecoding | CachedDecoding | RefusedDecoding;

/** Each position alone. */
export interface PositionWiseDecoding {
  /** How the layer decodes. */
  kind: 'positionWise';
  /** When a call does not work on each position alone. */
  check: NodeCheck;
  /**
   * Whether a step feeds it rows `[batch * t, features]` rather than `[batch, t, features]` (a
   * layer that copies its weights on 3-D input, as tfjs' `Dense` transposes its kernel).
   */
  flattenRows?: boolean;
}

/** Each position alone given `startIndex` (position layers). */
export interface PositionAwareDecoding {
  /** How the layer decodes. */
  kind: 'positionAware';
  /** When a call does not take its positions along the sequence axis. */
  check: NodeCheck;
}

/** The layer cannot run on new positions alone. */
export interface RefusedDecoding {
  /** How the layer decodes. */
  kind: 'refused';
  /** Why (shown by `cachedDecodingRefusal` and `generate`). */
  reason: string;
}

/** A lower bound of the weight values a config implies, and the option that sets it. */
export interface ImpliedSize {
  /** The number of weight values, at least. */
  values: number;
  /** The option (camelCase config key) it is blamed on; a refusal names its saved spelling. */
  option: string;
}

/**
 * How a layer class takes part in `quantize(model, 'int8')` (Keras 3's int8 scheme):
 * - `own`: it holds its int8 weights itself, given the `quantizationMode: 'int8'` option;
 * - `replaces`: it is the int8 form of a tfjs built-in layer (tfjs' `Dense` cannot hold int8);
 *   `fromFloat` turns that layer's config into this class's config.
 * Composite layers (`CompositeLayer`) pass the mode on to their sublayers without declaring it.
 */
export type QuantizationContract =
  | {kind: 'own'}
  | {
      kind: 'replaces';
      className: string;
      fromFloat(config: tf.serialization.ConfigDict): tf.serialization.ConfigDict;
    };

/** Everything the package knows about a layer class, declared on the class. */
export interface LayerContract {
  /** How it is quantized to int8; absent: it has no weights Keras quantizes. */
  quantization?: QuantizationContract;
  /** Its Keras names and calling form. */
  keras: KerasContract;
  /**
   * The keys its `getConfig()` writes with every option set (camelCase), beyond tfjs' own `name`
   * and `trainable`: the constructor options the class checks (constructor_args.ts), and,
   * snake_cased, what the Keras loader accepts besides the Keras 3 keys and `kerasOnlyKeys`.
   * `__tests__/layer_contract.test.ts` holds each package class's list against a layer with every
   * option set.
   */
  configKeys: readonly string[];
  /** Its weights as Keras 3 names them, and their size a config implies. */
  weights: WeightContract;
  /** How it takes part in cached decoding. */
  decoding: DecodingContract;
  /** Whether a node's output carries a Keras padding mask (a mask_zero embedding). */
  makesKerasMask(config: Record<string, unknown>, node: GraphNode): boolean;
}

/** The Keras part of a contract as {@link defineContract} takes it: the names and call required. */
export interface KerasContractSpec extends Omit<KerasContract, 'kerasOnlyKeys' | 'refuseConfig'> {
  /** Config keys Keras writes that the layer's own config has not; default none. */
  kerasOnlyKeys?: readonly string[];
  /** Why a config has no Keras counterpart; default: every config has one. */
  refuseConfig?: KerasContract['refuseConfig'];
}

/**
 * A contract as a class states it: the parts without a default (Keras names and calling form,
 * config keys, decoding) required, so leaving one out does not compile; the rest default to
 * what most classes have (no Keras-only keys, no refused config, weights by their own names with
 * nothing implied, no Keras mask made).
 */
export interface ContractSpec {
  /** How it is quantized to int8; absent: it has no weights Keras quantizes. */
  quantization?: QuantizationContract;
  /** Its Keras names and calling form. */
  keras: KerasContractSpec;
  /** See {@link LayerContract.configKeys}. */
  configKeys: readonly string[];
  /** Its weights, each part defaulting to `OWN_WEIGHTS`'. */
  weights?: Partial<WeightContract>;
  /** How it takes part in cached decoding. */
  decoding: DecodingContract;
  /** Whether a node's output carries a Keras padding mask; default `NO_KERAS_MASK`. */
  makesKerasMask?: LayerContract['makesKerasMask'];
}

const REQUIRED: ReadonlyArray<[string, (s: ContractSpec) => unknown]> = [
  ['keras', (s) => s.keras],
  ['keras.keras3', (s) => s.keras?.keras3],
  ['keras.keras2', (s) => s.keras?.keras2],
  ['keras.call', (s) => s.keras?.call],
  ['configKeys', (s) => s.configKeys],
  ['decoding', (s) => s.decoding],
];

/**
 * A class's contract from the parts it states, the defaults filled in. Throws (for callers
 * without TypeScript) when a part without a default is missing.
 */
export function defineContract(spec: ContractSpec): LayerContract {
  for (const [part, read] of REQUIRED) {
    if (read(spec) == null) {
      throw new Error(
        `defineContract: the contract has no '${part}', which has no default; expected it set, ` +
          `received the parts ${JSON.stringify(Object.keys(spec ?? {}))}`,
      );
    }
  }
  const w = spec.weights ?? {};
  const contract: LayerContract = {
    keras: {
      ...spec.keras,
      kerasOnlyKeys: spec.keras.kerasOnlyKeys ?? [],
      refuseConfig: spec.keras.refuseConfig ?? null,
    },
    configKeys: spec.configKeys,
    weights: {
      sublayers: w.sublayers ?? OWN_WEIGHTS.sublayers,
      keras3Folders: w.keras3Folders ?? OWN_WEIGHTS.keras3Folders,
      implied: w.implied ?? OWN_WEIGHTS.implied,
    },
    decoding: spec.decoding,
    makesKerasMask: spec.makesKerasMask ?? NO_KERAS_MASK,
  };
  if (spec.quantization != null) contract.quantization = spec.quantization;
  return contract;
}

/** A layer class with its contract: what `register.ts` takes (a class without one fails to compile). */
export interface ContractClass {
  /** The name tfjs serializes the class under. */
  readonly className: string;
  /** What the package knows about the class. */
  readonly contract: LayerContract;
}

const own = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

/**
 * The contract of the layer class tfjs deserializes for `className` (the package's and any
 * user's registered class that declares one), or null. Only a contract the class declares itself
 * counts: a subclass does not silently take its parent's.
 */
export function contractOf(className: string): LayerContract | null {
  const map = tf.serialization.SerializationMap.getMap().classNameMap;
  if (!own(map, className)) return null;
  const cls = (map[className] as unknown as [object])[0];
  if (cls == null || !own(cls, 'contract')) return null;
  const c = (cls as {contract: unknown}).contract as LayerContract;
  return c != null && typeof c === 'object' && 'keras' in c && 'decoding' in c ? c : null;
}

/** The snake_case spelling Keras uses for a camelCase key (Keras' `to_snake_case`). */
export function snakeCase(name: string): string {
  return name
    .replace(/(.)([A-Z][a-z]+)/g, '$1_$2')
    .replace(/([a-z])([A-Z])/g, '$1_$2')
    .toLowerCase();
}

/**
 * A saved (snake_case) config with its keys in camelCase, the one spelling contract functions
 * read; values as saved. Where both spellings of a key are present, the snake_case one (Keras')
 * is read, as it was before the conversion.
 */
export function camelConfig(config: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(config)) {
    const camel = camelCase(key);
    if (key !== camel || !Object.prototype.hasOwnProperty.call(out, camel)) out[camel] = value;
  }
  return out;
}

/** The key of a saved config that `camelConfig` read as `option` (its saved spelling). */
export function savedKey(config: JsonObject, option: string): string {
  const keys = Object.keys(config).filter((k) => camelCase(k) === option);
  return [...keys].reverse().find((k) => k !== option) ?? keys[0] ?? option;
}

/** A number in a (camelCased) config, or 0. */
export const configNumber = (c: JsonObject, k: string): number =>
  typeof c[k] === 'number' ? (c[k] as number) : 0;

/** The option of `keys` with the largest value in `c` (what an implied size is blamed on). */
export const largestOption = (c: JsonObject, keys: readonly string[]): string =>
  keys.reduce((a, k) => (configNumber(c, k) > configNumber(c, a) ? k : a));

/** Implied size: the product of the named options (weights `a x b x ...`). */
export function impliedProduct(...keys: string[]): WeightContract['implied'] {
  return (c) => ({
    values: keys.reduce((p, k) => p * configNumber(c, k), 1),
    option: largestOption(c, keys),
  });
}

/** No weights implied by the config (a layer with no weights, or sizes taken from the inputs). */
export const impliesNothing: WeightContract['implied'] = () => ({values: 0, option: ''});

/** Weights named by their own names, nothing implied: the default weight part. */
export const OWN_WEIGHTS: WeightContract = {
  sublayers: null,
  keras3Folders: {},
  implied: impliesNothing,
};

/** A layer that never carries a Keras mask forward of its own. */
export const NO_KERAS_MASK: LayerContract['makesKerasMask'] = () => false;

/** A mask_zero embedding of ids: its output carries the Keras padding mask. */
export const MASK_ZERO: LayerContract['makesKerasMask'] = (config) => config.maskZero === true;
