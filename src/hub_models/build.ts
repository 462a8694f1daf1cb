/**
 * `buildKerasHubModel`: a keras-hub backbone or task class, built from its config as a functional
 * tfjs model with keras-hub's inputs and outputs, and its weights set from keras-hub's weight
 * paths. The families (one file each) declare what is built; this file adds the tasks' heads.
 */
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import type {LayersModel, SymbolicTensor} from '@tensorflow/tfjs-layers';

import {snakeCase} from '../layers/engine/contract';
import type {Json, JsonObject} from '../layers/engine/contract';
import {isObject} from '../layers/engine/json_object';
import {keras3LayerPaths} from '../layers/engine/keras3_paths';
import {
  bindWeights,
  checkConfig,
  checkWeightTerms,
  configInt,
  configRate,
  HubWeights,
  KerasHubFamily,
  TaskKind,
  WeightBinding,
  WeightTerm,
} from './family';
import {
  int8HubModel,
  int8HubModelAsBuilt,
  isInt8HubWeight,
  quantizedHubWeights,
  withoutPolicyMap,
} from './int8_weights';
import {withQuantizationMode} from '../layers/core/quantization';
import {checkInt4Scales} from '../layers/core/quantize_model';
import {familyOfClass, kerasHubClassNames} from './registry';
import {Dense} from '../layers/core/dense';

/** The config keys of each task kind (besides name, trainable, dtype). */
const TASK_KEYS: Readonly<Record<TaskKind, readonly string[]>> = {
  causalLM: ['backbone', 'preprocessor'],
  textClassifier: ['backbone', 'preprocessor', 'num_classes', 'activation', 'dropout'],
  textEmbedder: ['backbone', 'preprocessor', 'pooling_mode', 'normalize'],
};

/** The classifier activations keras-hub writes that the head implements (tfjs' names). */
const CLASSIFIER_ACTIVATIONS: Readonly<Record<string, string>> = {
  linear: 'linear',
  softmax: 'softmax',
  sigmoid: 'sigmoid',
};

/**
 * The config of class `cls`: the `config` of a serialized object (`{class_name, config}`, as
 * config.json / task.json hold it, whose class must be `cls`), or the config itself.
 */
function innerConfig(cls: string, config: Json | undefined, what: string): JsonObject {
  if (isObject(config) && 'class_name' in config && isObject(config.config)) {
    if (config.class_name !== cls) {
      throw new Error(
        `${what}: expected a ${cls} config, received one of class ${JSON.stringify(config.class_name)}`,
      );
    }
    return config.config;
  }
  if (!isObject(config)) {
    throw new Error(`${what}: expected a ${cls} config object, received ${JSON.stringify(config)}`);
  }
  return config;
}

/** A text classifier's head options. */
interface ClassifierOptions {
  numClasses: number;
  activation: string;
  rate: number;
}

function classifierOptions(className: string, own: JsonObject): ClassifierOptions {
  const numClasses = configInt(own, 'num_classes', className);
  const activationName = own.activation == null ? 'linear' : own.activation;
  const activation =
    typeof activationName === 'string' ? CLASSIFIER_ACTIVATIONS[activationName] : undefined;
  if (activation == null) {
    throw new Error(
      `${className}: config activation=${JSON.stringify(activationName)} is not implemented ` +
        `(expected one of ${Object.keys(CLASSIFIER_ACTIVATIONS).join(', ')}, or null)`,
    );
  }
  const rate = configRate(own, 'dropout', className, 0.1);
  return {numClasses, activation, rate};
}

/**
 * Builds keras-hub's `className` (a backbone, or a task: `GPT2CausalLM`, `BertTextClassifier`,
 * `Llama3CausalLM`) from its keras-hub config, as a functional tfjs model with keras-hub's inputs
 * and outputs, and sets its weights from keras-hub's weight paths.
 *
 * - `config`: the class's `config` as keras-hub writes it (the `config` of config.json for a
 *   backbone, of task.json or a `.keras` file's config.json for a task; the whole serialized
 *   object `{class_name, config}` is accepted too). Options the package does not implement are
 *   refused with an error naming them.
 * - `weights`: every weight by its Keras 3 path inside the class's `model.weights.h5` (a task's
 *   paths start with `layers/<backbone>/`, e.g. `layers/gpt2_backbone/layers/reversible_embedding/vars/0`;
 *   a backbone's with `layers/`), as `{shape, values}`, a tensor, or a `HubWeightReader` (read
 *   from its file as it is bound). The paths the model reads are derived from its layers'
 *   contracts. A path the model needs and the map lacks, a path it does not read, or a shape that
 *   differs is an error naming the path.
 *
 * Inputs and outputs (int32 inputs, in this order):
 * - backbones: their inputs (`token_ids`, `padding_mask`; BERT `token_ids`, `segment_ids`,
 *   `padding_mask`) -> `sequence_output [b, T, hidden]` (BERT also `pooled_output [b, hidden]`);
 * - causal LMs: `[token_ids, padding_mask]` -> logits `[b, T, vocabulary_size]` (`generate` runs
 *   them with a key / value cache);
 * - text classifiers: the backbone's inputs -> logits `[b, num_classes]`.
 *
 * ```ts
 * const model = buildKerasHubModel('GPT2CausalLM', taskJson.config, weightsByPath);
 * const ids = await generate(model, [[5, 3]], {maxLength: 16});
 * ```
 */
export function buildKerasHubModel(
  className: string,
  config: JsonObject,
  weights: HubWeights,
): LayersModel {
  return buildKerasHubParts(className, config, weights).model;
}

/** Options of {@link buildKerasHubParts}. */
export interface BuildKerasHubOptions {
  /**
   * `'int8'` / `'int4'`: a float preset built in its int8 / int4 form, each weight quantized as
   * Keras' `quantize("int8")` / `quantize("int4")` (block 128) does while it is bound (no float
   * copy of a quantized weight in the model).
   */
  quantize?: 'int8' | 'int4';
}

/** A built keras-hub class and the backbone's outputs inside it. */
export interface BuiltKerasHubModel {
  /** The model of the class (the task, or the backbone). */
  model: LayersModel;
  /** The backbone's outputs in the family's `outputs` order (a task's: inside its graph). */
  backboneOutputs: SymbolicTensor[];
}

/** {@link buildKerasHubModel}, with the backbone's outputs of the graph it built. */
export function buildKerasHubParts(
  className: string,
  config: JsonObject,
  weights: HubWeights,
  options: BuildKerasHubOptions = {},
): BuiltKerasHubModel {
  if (
    options.quantize !== undefined &&
    options.quantize !== 'int8' &&
    options.quantize !== 'int4'
  ) {
    throw new Error(
      `buildKerasHubModel: expected quantize 'int8' or 'int4' (or none), received ${JSON.stringify(options.quantize)}`,
    );
  }
  const family = familyOfClass(className);
  if (family == null) {
    throw new Error(
      `buildKerasHubModel: keras-hub class ${JSON.stringify(className)} is not implemented ` +
        `(expected one of ${kerasHubClassNames().join(', ')})`,
    );
  }
  const own = innerConfig(className, config, className);
  const kind = family.backbone === className ? null : family.tasks[className];
  let backboneConfig = own;
  if (kind != null) {
    checkConfig(className, own, TASK_KEYS[kind], ['backbone'], {});
    backboneConfig = innerConfig(family.backbone, own.backbone, `${className} backbone`);
  }
  // a quantized model's backbone dtype: keras-hub's DTypePolicyMap (int8_weights.ts)
  const policies = withoutPolicyMap(family.backbone, backboneConfig);
  backboneConfig = policies.config;
  if (policies.int4BlockSize != null && options.quantize !== undefined) {
    throw new Error(
      `buildKerasHubModel: the preset is int4 already; expected a float32 preset to quantize ` +
        `(received quantize ${JSON.stringify(options.quantize)})`,
    );
  }
  checkConfig(
    family.backbone,
    backboneConfig,
    family.configKeys,
    family.requiredKeys,
    family.refuse,
  );
  // the head's options, and the sizes the config implies against the weights given, are checked
  // before anything holding weights is made
  const head = kind === 'textClassifier' ? classifierOptions(className, own) : null;
  const terms: WeightTerm[] = family.weightTerms(backboneConfig);
  if (head != null) {
    const hidden = configInt(backboneConfig, 'hidden_dim', family.backbone);
    terms.push({
      keys: {num_classes: head.numClasses, hidden_dim: hidden},
      what: "the classifier's kernel",
      values: head.numClasses * hidden,
    });
  }
  checkWeightTerms(className, terms, weights, policies.int4BlockSize != null ? 2 : 1);
  return withoutLeaks(() =>
    buildModel(
      className,
      own,
      family,
      kind,
      head,
      backboneConfig,
      weights,
      options.quantize,
      policies.int4BlockSize,
    ),
  );
}

/**
 * `build()`'s model, or its error with every weight it had made disposed (a refusal leaves no
 * tensor, whatever refuses).
 */
function withoutLeaks(build: () => BuiltKerasHubModel): BuiltKerasHubModel {
  const before = new Set(Object.keys(tf.engine().state.registeredVariables));
  try {
    return build();
  } catch (e) {
    const variables = tf.engine().state.registeredVariables;
    for (const name of Object.keys(variables)) {
      if (!before.has(name)) variables[name].dispose();
    }
    throw e;
  }
}

/** The layers a text classifier's head adds on the backbone, by name (its weights: task.weights.h5). */
export const HEAD_LAYERS: ReadonlySet<string> = new Set(['classifier_dropout', 'logits']);

/**
 * Every weight of a built keras-hub model with its Keras 3 path, derived from its layers'
 * contracts (layers/engine/keras3_paths.ts): the backbone's layers under `prefix` (a task's
 * `layers/<backbone>/`, a backbone's none), numbered in the model's layer order as keras-hub's
 * functional backbone numbers them; a text classifier's head at the task's level (`layers/dense`).
 */
function hubWeightBindings(model: LayersModel, prefix: string): WeightBinding[] {
  const head = model.layers.filter((l) => HEAD_LAYERS.has(l.name));
  const backbone = model.layers.filter((l) => !HEAD_LAYERS.has(l.name));
  const out: WeightBinding[] = [];
  for (const [p, variable] of keras3LayerPaths(backbone)) out.push({path: prefix + p, variable});
  for (const [path, variable] of keras3LayerPaths(head)) out.push({path, variable});
  return out;
}

/** The family's graph of a checked config and the task's head, as a model (weights not bound). */
function graphModel(
  className: string,
  own: JsonObject,
  family: KerasHubFamily,
  kind: TaskKind | null,
  head: ClassifierOptions | null,
  backboneConfig: JsonObject,
): {built: LayersModel; backboneOutputs: SymbolicTensor[]} {
  const graph = family.build(backboneConfig);
  // (an output the graph leaves out is not one of this config's: Gemma 3's pooled_output exists
  // for embedding backbones only)
  const backboneOutputs = family.outputs
    .filter((o) => graph.outputs[o] != null)
    .map((o) => graph.outputs[o]);
  const name = (own.name as string | undefined) ?? snakeCase(className);
  let outputs: SymbolicTensor[];
  if (kind == null) {
    outputs = backboneOutputs;
  } else if (kind === 'causalLM') {
    // the tied (or untied) reverse embedding: a float input means reverse in functional models
    outputs = [graph.tokenEmbedding.apply(graph.outputs.sequence_output) as SymbolicTensor];
  } else if (kind === 'textEmbedder') {
    // keras-hub's TextEmbedder returns an embedding backbone's pooled_output as it is
    if (graph.outputs.pooled_output == null) {
      throw new Error(
        `${className}: a backbone without pooled_output (pooling_mode ` +
          `${JSON.stringify(own.pooling_mode ?? 'last')} over sequence_output) is not ` +
          'implemented (expected an embedding backbone: is_embedding_model true)',
      );
    }
    outputs = [graph.outputs.pooled_output];
  } else {
    const {numClasses, activation, rate} = head as ClassifierOptions;
    const pooled = tfl.layers
      .dropout({name: 'classifier_dropout', rate})
      .apply(graph.outputs.pooled_output) as SymbolicTensor;
    const dense = new Dense({
      name: 'logits',
      units: numClasses,
      activation: activation as 'linear',
      kernelInitializer: 'zeros',
    });
    outputs = [dense.apply(pooled) as SymbolicTensor];
  }
  const built = tfl.model({inputs: graph.inputs, outputs, name});
  return {built, backboneOutputs};
}

/**
 * The model of a checked config: the family's graph, the task's head, the weights bound. Where
 * the weights hold int8 values (keras-hub's quantized presets), the graph is first built in its
 * int8 form directly (every layer that takes a quantization mode made int8: no float weight is
 * allocated), and kept if its int8 weights are exactly the int8 weights of the map; else (a
 * preset quantized in part) the float graph is built and its int8 layers rebuilt from its config
 * (int8_weights.ts).
 */
function buildModel(
  className: string,
  own: JsonObject,
  family: KerasHubFamily,
  kind: TaskKind | null,
  head: ClassifierOptions | null,
  backboneConfig: JsonObject,
  weights: HubWeights,
  quantize?: 'int8' | 'int4',
  int4BlockSize: number | null = null,
): BuiltKerasHubModel {
  const prefix = kind == null ? '' : `layers/${snakeCase(family.backbone)}/`;
  const derive = (m: LayersModel) => hubWeightBindings(m, prefix);
  const graphOf = () => graphModel(className, own, family, kind, head, backboneConfig);
  if (int4BlockSize != null) {
    // an int4 preset (keras-hub's quantize("int4")): its int4 form built directly, the weights
    // bound as they are (packed values and zero points as bytes); a preset quantized in part, or
    // one whose weights are not the int4 form's, is refused by the binding (naming the weight)
    const direct = withQuantizationMode('int4', graphOf, int4BlockSize);
    try {
      const bindings = derive(direct.built);
      const int4 = int8HubModelAsBuilt(className, direct.built, bindings, weights);
      if (int4 == null) {
        throw new Error(
          `${className}: the int4 preset's weights are not those of its int4 form (a layer ` +
            'quantized in part, or an int8 weight where the int4 form holds a float one)',
        );
      }
      bindWeights(className, bindings, direct.built.weights, int4);
      checkInt4Scales(direct.built, className);
      return {model: direct.built, backboneOutputs: direct.backboneOutputs};
    } catch (e) {
      direct.built.dispose();
      throw e;
    }
  }
  const int8Weights = weights instanceof Map && [...weights.values()].some(isInt8HubWeight);
  if (quantize != null || int8Weights) {
    // the int8 form built directly: a float preset quantized while its weights stream in, or an
    // int8 preset whose int8 weights are exactly those of the int8 form
    const direct = withQuantizationMode(quantize ?? 'int8', graphOf);
    try {
      const bindings = derive(direct.built);
      const int8 =
        quantize != null
          ? quantizedHubWeights(className, direct.built, bindings, weights)
          : int8HubModelAsBuilt(className, direct.built, bindings, weights);
      if (int8 != null) {
        bindWeights(className, bindings, direct.built.weights, int8);
        return {model: direct.built, backboneOutputs: direct.backboneOutputs};
      }
    } catch (e) {
      direct.built.dispose();
      throw e;
    }
    direct.built.dispose();
  }
  const {built, backboneOutputs} = graphOf();
  let model = built;
  try {
    // layers whose weights are int8 (keras-hub's quantized presets) in their int8 form, their
    // paths derived again from the int8 layers
    let bindings: WeightBinding[];
    ({model, bindings, weights} = int8HubModel(className, model, derive(model), weights, derive));
    bindWeights(className, bindings, model.weights, weights);
  } catch (e) {
    model.dispose();
    throw e;
  }
  // an int8 model is rebuilt from its config: the same layers by name, called in the same order
  const inModel = (t: SymbolicTensor): SymbolicTensor => {
    if (model === built) return t;
    const out = model.getLayer(t.sourceLayer.name).getOutputAt(t.nodeIndex);
    return Array.isArray(out) ? out[t.tensorIndex] : out;
  };
  return {model, backboneOutputs: backboneOutputs.map(inModel)};
}
