/**
 * Loading Keras models converted by `tensorflowjs_converter` (tf-keras 2 `.h5` and Keras 3
 * `.keras`), which tfjs-layers 4.22 cannot load as they are:
 *
 * - tf-keras 2 passes `value`, `key` and `attention_mask` of attention layers as tensor
 *   references inside call kwargs (`{"value": ["input_2", 0, 0]}`), which tfjs does not resolve;
 *   call options (`use_causal_mask`, `return_attention_scores`) also live in node kwargs, which
 *   tfjs does not replay at predict time.
 * - Keras 3 writes nodes as `{args, kwargs}` with `__keras_tensor__` references, `batch_shape`,
 *   dtype-policy objects, flat `output_layers`, and names weights by their HDF5 path
 *   (`layers/multi_head_attention/query_dense/vars/0`).
 *
 * {@link convertKerasArtifacts} rewrites the topology and the weight names into what
 * tfjs-layers and this package read; {@link loadKerasModel} loads the result.
 */
import * as tf from '@tensorflow/tfjs-core';
import {LayersModel, loadLayersModel} from '@tensorflow/tfjs-layers';

import {checkTopology} from '../io/topology_guard';
import {declaredElements} from '../io/weight_bytes';
import {checkWeightsFit, weightCounts} from '../kernels/backend_capacity';
import {modelFolderOf} from '../io/model_folder';
import {configOrder, hasKeras3Names, renameByModel, renameKeras3Weights} from './keras3_weights';
import {isKerasInt8Spec, rewriteInt8} from './keras_int8';
import {loadInPlace, memoryStream, numberedNames} from './load_in_place';
import {hasNestedFunctional, inlineNestedModels} from './keras_inline';
import {camelConfig, contractOf} from '../layers/engine/contract';
import {Entry, keywordCall} from './keras_keyword_calls';
import {nodeParts, plainDtypes} from './keras_nodes';
import {
  recordStartIndex,
  rewriteActivation,
  rewriteGetItem,
  rewriteSequentialLayers,
} from './keras_layer_configs';
import {kerasConfigKeys} from './keras_options';
import {fail, isObj, Json, Obj} from './keras_json';

/** Refuses config keys a layer with a contract does not implement (unset values pass). */
function checkConfigKeys(layer: Obj): void {
  const cls = layer.class_name as string;
  const config = layer.config as Obj;
  if (Object.prototype.hasOwnProperty.call(config, '__proto__')) {
    fail(
      `layer '${layer.name}' (${cls}) has an option named '__proto__', which no layer takes; ` +
        'expected plain option names',
    );
  }
  const known = kerasConfigKeys(cls);
  if (known == null) return; // tfjs' own classes check their configs themselves
  for (const [k, v] of Object.entries(config)) {
    if (!known.has(k) && v != null && v !== false) {
      fail(
        `layer '${layer.name}' (${cls}) has the option '${k}' = ${JSON.stringify(v)}, which ` +
          'this package does not implement',
      );
    }
  }
}

function rewriteAttentionLayer(layer: Obj, byKeyword: boolean): void {
  const cls = layer.class_name as string;
  const name = layer.name as string;
  const config = layer.config as Obj;
  if (config.causal === true) config.use_causal_mask = true; // Keras <= 2.9
  delete config.causal;
  const nodes = (layer.inbound_nodes as Json[]) ?? [];
  if (nodes.length > 1) {
    fail(
      `layer '${name}' is called ${nodes.length} times; shared attention layers are not supported`,
    );
  }
  layer.inbound_nodes = nodes.map((node) => {
    const {positional, kwargs, tensorKwargs} = nodeParts(node, name);
    for (const k of ['query_mask', 'value_mask', 'key_mask', 'mask']) {
      if (tensorKwargs[k])
        fail(
          `layer '${name}' is called with an explicit '${k}' tensor, which is not supported (masks from Embedding(mask_zero) are)`,
        );
    }
    const inputs: Entry[] = [...positional];
    const roles: string[] = ['query', 'value', 'key'].slice(0, inputs.length);
    if (byKeyword) {
      // Keras 3 keeps `query=` as a keyword when every tensor is passed by keyword
      if (tensorKwargs.query && inputs.length === 0) {
        inputs.push(tensorKwargs.query);
        roles.push('query');
      }
      if (tensorKwargs.value) {
        inputs.push(tensorKwargs.value);
        roles.push('value');
      }
      if (tensorKwargs.key) {
        inputs.push(tensorKwargs.key);
        roles.push('key');
      }
    }
    if (inputs.length < 2) {
      fail(
        `layer '${name}' (${cls}) needs a query and a value, received ${inputs.length} input(s)`,
      );
    }
    if (tensorKwargs.attention_mask) {
      inputs.push(tensorKwargs.attention_mask);
      roles.push('attention_mask');
      config.input_roles = roles;
    }
    for (const opt of ['use_causal_mask', 'return_attention_scores'] as const) {
      if (kwargs[opt] === true) config[opt] = true;
      delete kwargs[opt];
    }
    delete kwargs.training;
    const extra = Object.keys(kwargs);
    if (extra.length > 0)
      fail(`layer '${name}' is called with unsupported arguments: ${extra.join(', ')}`);
    return inputs;
  });
  // Keras >= 3.10 gives fully masked query rows zero weights on its non-fused path, which
  // MultiHeadAttention and GroupQueryAttention take with dropout or returned scores
  const keras3 = nodes.some((n) => isObj(n) && 'args' in n);
  if (
    keras3 &&
    byKeyword &&
    (Number(config.dropout ?? 0) > 0 || config.return_attention_scores === true)
  ) {
    config.zero_fully_masked_rows = true;
  }
}

const MODEL_CLASSES = ['Functional', 'Model', 'Sequential'];

function rewriteLayer(layer: Obj): void {
  const cls = layer.class_name as string;
  if (layer.config == null) layer.config = {};
  const config = layer.config as Obj;
  delete layer.build_config;
  if (cls === 'InputLayer') {
    if (config.batch_shape !== undefined) {
      config.batch_input_shape = config.batch_shape;
      delete config.batch_shape;
    }
    delete config.optional;
    return;
  }
  if (MODEL_CLASSES.includes(cls)) rewriteModel(layer, config);
  rewriteActivation(config, layer.name as string);
  const contract = contractOf(cls);
  const refusal = contract?.keras.refuseConfig?.(camelConfig(config));
  if (refusal != null) fail(`layer '${layer.name}' (${cls}) ${refusal}`);
  const call = contract?.keras.call ?? {kind: 'tensor'};
  if (call.kind === 'attention') {
    checkConfigKeys(layer);
    rewriteAttentionLayer(layer, call.byKeyword);
    return;
  }
  if (call.kind === 'indexing') rewriteGetItem(layer);
  if (call.kind === 'positions') recordStartIndex(layer);
  checkConfigKeys(layer);
  layer.inbound_nodes = ((layer.inbound_nodes as Json[]) ?? []).map((node) => {
    const {positional, kwargs, tensorKwargs} = nodeParts(node, layer.name as string);
    if (call.kind === 'keyword') {
      const called = keywordCall(
        call,
        cls,
        layer.name as string,
        positional,
        tensorKwargs,
        kwargs,
        config,
      );
      if (called.roles.length > 1) config.input_roles = called.roles;
      return called.inputs.map((e) => [e[0], e[1], e[2], {}]) as Json;
    }
    const tk = Object.keys(tensorKwargs);
    if (tk.length > 0)
      fail(
        `layer '${layer.name}' (${cls}) is called with tensor arguments ${tk.join(', ')}, which tfjs-layers does not support`,
      );
    if (kwargs.mask === null) delete kwargs.mask;
    if (call.kind === 'positions') {
      const extra = Object.keys(kwargs).filter((k) => k !== 'training');
      if (extra.length > 0) {
        fail(
          `layer '${layer.name}' (${cls}) is called with ${extra.map((k) => `${k}=${JSON.stringify(kwargs[k])}`).join(', ')}, ` +
            'which this package does not support in a converted model (it takes start_index)',
        );
      }
    }
    return positional.map((e) => [e[0], e[1], e[2], kwargs]) as Json;
  });
}

/**
 * Keras 3 numbers a nested model's calls from 0; tfjs (like tf-keras 2) counts the model's own
 * inputs-to-outputs node first, so its calls are nodes 1, 2, ...
 */
function bumpNested(x: Json, nested: Map<string, number>): void {
  if (Array.isArray(x)) {
    x.forEach((v) => bumpNested(v, nested));
  } else if (isObj(x)) {
    const history = isObj(x.config) ? x.config.keras_history : null;
    if (x.class_name === '__keras_tensor__' && Array.isArray(history)) {
      const calls = nested.get(history[0] as string);
      if (calls != null) history[1] = nestedNode(history[1] as number, calls);
      return;
    }
    Object.values(x).forEach((v) => bumpNested(v, nested));
  }
}

/**
 * tfjs' node of Keras 3's call `index` of a nested model called `calls` times. Keras 3 writes
 * either the call's number or 1 for a model called once (the translation example has both); a
 * single call is that call whatever the index.
 */
function nestedNode(index: number, calls: number): number {
  return (calls <= 1 ? 0 : Math.min(index, calls - 1)) + 1;
}

/** Rewrites a model's layers (recursively for nested models) and its input / output lists. */
function rewriteModel(model: Obj, config: Obj): void {
  delete config.build_config;
  delete config.compile_config;
  if (!Array.isArray(config.layers)) fail(`model '${model.name ?? config.name}' has no layer list`);
  const keras3 = (config.layers as Obj[]).some((l) =>
    ((l.inbound_nodes as Json[]) ?? []).some((n) => isObj(n) && 'args' in n),
  );
  const nested = new Map(
    keras3
      ? (config.layers as Obj[])
          .filter((l) => MODEL_CLASSES.includes(l.class_name as string))
          .map((l) => [l.name as string, ((l.inbound_nodes as Json[]) ?? []).length] as const)
      : [],
  );
  if (model.class_name === 'Sequential') rewriteSequentialLayers(config);
  for (const layer of config.layers as Obj[]) bumpNested(layer.inbound_nodes ?? [], nested);
  for (const layer of config.layers as Obj[]) rewriteLayer(layer);
  if (model.class_name !== 'Sequential') {
    for (const key of ['input_layers', 'output_layers']) {
      const list = nestLayerList(config[key] as Json) as Json[];
      config[key] = list.map((e) =>
        Array.isArray(e) && nested.has(e[0] as string)
          ? [e[0], nestedNode(e[1] as number, nested.get(e[0] as string) as number), e[2]]
          : e,
      );
    }
  }
}

function nestLayerList(x: Json): Json {
  // Keras 3 writes a single output / input as a flat [name, node, index].
  if (Array.isArray(x) && x.length === 3 && typeof x[0] === 'string') return [x];
  return x;
}

/**
 * The topology tfjs-layers builds from a converted model (rewritten), and, for a model with
 * nested functional models (inlined into the first), the nested form that Keras 3's weight
 * paths are named from; null when the names come from the first. Checks the graph and the weight
 * sizes its config implies against what `specs` declare before anything is built.
 */
export function rewriteKerasTopology(artifacts: tf.io.ModelArtifacts): {
  topology: Obj;
  naming: Obj | null;
  /** The artifacts with Keras 3 int8 weights as bytes (keras_int8.ts). */
  artifacts: tf.io.ModelArtifacts;
} {
  const raw = artifacts.modelTopology;
  if (raw == null || raw instanceof ArrayBuffer)
    fail('expected a JSON model topology (a layers model.json)');
  // before anything is built, copied or recursed into: no nesting beyond the limit, no cycle, no
  // dangling node, no config implying weight sizes the manifest does not declare
  const specs = artifacts.weightSpecs;
  const declared = specs == null ? null : declaredElements(specs);
  checkTopology(raw, declared);
  if (specs != null) checkWeightsFit('loadKerasModel', 'the model', weightCounts(specs));
  const topology = plainDtypes(JSON.parse(JSON.stringify(raw)) as Json) as Obj;
  const modelConfig = (isObj(topology.model_config) ? topology.model_config : topology) as Obj;
  const config = modelConfig.config as Obj;
  if (!isObj(config) || !Array.isArray(config.layers)) {
    fail('the topology has no layer list (model_config.config.layers)');
  }
  // Keras 3 int8 layers (QuantizedDTypePolicy) and their int8 weights (as float32 values)
  const int8 = rewriteInt8(modelConfig, artifacts, artifacts.weightSpecs ?? []);
  const converted = {...int8.artifacts, weightSpecs: int8.specs};
  // nested functional models are inlined (see keras_inline.ts); their weights are named from
  // the nested form, where Keras 3's weight paths come from
  const flat = hasNestedFunctional(config) ? (JSON.parse(JSON.stringify(topology)) as Obj) : null;
  rewriteModel(modelConfig, config);
  if (flat == null) return {topology, naming: null, artifacts: converted};
  const flatModel = (isObj(flat.model_config) ? flat.model_config : flat) as Obj;
  inlineNestedModels(flatModel.config as Obj);
  rewriteModel(flatModel, flatModel.config as Obj);
  return {topology: flat, naming: topology, artifacts: converted};
}

/**
 * Rewrites the artifacts of a converted tf-keras 2 or Keras 3 model so tfjs-layers loads them
 * with this package's layers. Pure: works in browsers too.
 */
export async function convertKerasArtifacts(
  artifacts: tf.io.ModelArtifacts,
): Promise<tf.io.ModelArtifacts> {
  const {topology, naming, artifacts: converted} = rewriteKerasTopology(artifacts);
  const weightSpecs = await renameKeras3Weights(naming ?? topology, converted.weightSpecs ?? []);
  return {...converted, modelTopology: topology as object, weightSpecs};
}

/**
 * Loads a model converted from Keras by `tensorflowjs_converter` (tf-keras 2 `--input_format
 * keras`, Keras 3 `--input_format keras_keras`), with MultiHeadAttention, Attention and
 * AdditiveAttention layers.
 *
 * The model is built once with zeros and its weights are written into it as they are read (see
 * load_in_place.ts): a folder read by {@link fileSystem} streams its weights files chunk by
 * chunk, so loading holds no second copy of the weights; another IOHandler's weights buffer is
 * written into the model the same way (the buffer and the model: two copies at the peak).
 *
 * ```js
 * const model = await loadKerasModel(fileSystem('converted/'));    // Node
 * const model = await loadKerasModel('https://example.com/model.json'); // browser or Node
 * ```
 *
 * @param source an IOHandler, or a URL that tfjs's registered handlers (http, indexeddb, ...) load.
 */
export async function loadKerasModel(source: string | tf.io.IOHandler): Promise<LayersModel> {
  try {
    return await loadConverted(source);
  } catch (e) {
    // tfjs' deserializer meets a class nobody registered: a custom Keras layer
    const unknown = e instanceof Error ? /^Unknown layer: ([^\s.]+)/.exec(e.message) : null;
    if (unknown == null) throw e;
    return fail(
      `the model has a layer of class '${unknown[1]}', which neither tfjs nor tfjs-attention ` +
        `provides (a custom layer): write it in JavaScript as a tf.layers.Layer subclass whose ` +
        `static className is '${unknown[1]}', register it with tf.serialization.registerClass, ` +
        'and load the model again',
    );
  }
}

async function loadConverted(source: string | tf.io.IOHandler): Promise<LayersModel> {
  let handler: tf.io.IOHandler;
  if (typeof source === 'string') {
    const handlers = tf.io.getLoadHandlers(source);
    handler = handlers.length > 0 ? handlers[0] : tf.io.http(source);
  } else {
    handler = source;
  }
  if (handler.load == null) fail('the IOHandler cannot load');
  const folder = modelFolderOf(handler);
  const opened = folder == null ? null : await folder.open();
  let artifacts = opened?.artifacts ?? (await handler.load());
  const specs = artifacts.weightSpecs;
  const stream =
    opened?.stream ?? (artifacts.weightData != null ? memoryStream(artifacts.weightData) : null);
  const int8 = specs?.some(isKerasInt8Spec) === true;
  if (specs == null || stream == null || int8 || (!hasKeras3Names(specs) && numberedNames(specs))) {
    // no weights (a topology-only folder), names tfjs matches by position, or Keras 3 int8
    // weights (their int32 values made bytes as a whole, keras_int8.ts): tfjs' own loader
    if (opened?.stream != null) artifacts = await handler.load();
    return loadLayersModel(tf.io.fromMemory(await convertKerasArtifacts(artifacts)));
  }
  const {topology, naming} = rewriteKerasTopology(artifacts);
  // names from the model built for loading, or (nested models) from a throwaway zeros build
  const named = naming == null ? specs : await renameKeras3Weights(naming, specs);
  return loadInPlace(
    {...artifacts, modelTopology: topology as object, weightSpecs: named},
    stream,
    // Keras 3 numbers weight paths in the config's layer order (configOrder)
    naming == null ? (model, named) => renameByModel(model, named, configOrder(topology)) : null,
  );
}
