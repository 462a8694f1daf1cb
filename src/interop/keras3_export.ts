/**
 * Saving models built with this package so that Keras 3 loads them: {@link toKeras3Artifacts}
 * turns saved artifacts into a Keras 3 model config (the `config.json` of a `.keras` file, nodes
 * as `{args, kwargs}` with `__keras_tensor__` references) and names each weight by its Keras 3
 * path (`layers/multi_head_attention/query_dense/vars/0`), the inverse of what
 * `loadKerasModel` reads. `scale/keras3_io.py` packs the result into a `.keras` file.
 *
 * Valid lengths (the d2l `validLens` input) become a boolean attention mask input when asked to;
 * what Keras 3 cannot express (DotProductAttention, the d2l AdditiveAttention) is refused with
 * an error naming what to use instead.
 */
import * as tf from '@tensorflow/tfjs-core';
import {LayersModel, models, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {layers as tfLayers} from '@tensorflow/tfjs-layers';

import {CompositeLayer} from '../layers/engine/composite_layer';
import {isInt8Layer, KERAS_INT8_POLICY} from '../layers/core/quantization';

import {camelConfig, contractOf, KerasCall, snakeCase} from '../layers/engine/contract';
import type {Keras3Class} from '../layers/engine/contract';
import {dropTfjsOnlyKeys, keras3Activation} from './keras3_layer_configs';
import {keras3Paths} from './keras3_weights';
import {isObj, Json, Obj} from './keras_json';

/** Options of {@link toKeras3Artifacts}. */
export interface Keras3ExportOptions {
  /**
   * What becomes of a valid-lengths input (`validLens`, shape `[batch]` or `[batch, 1]`) of an
   * attention layer, which Keras 3 has no argument for. `'refuse'` (the default) throws an error
   * naming the alternative; `'mask'` replaces the lengths input `<name>` by a boolean input
   * `<name>_mask` of shape `[batch, queryLength, keyLength]` (true where the key index is below
   * the length), passed to the layer as `attention_mask`. The Keras model then predicts what the
   * package predicts when fed that mask.
   */
  validLens?: 'refuse' | 'mask';
}

function fail(message: string): never {
  throw new Error(`toKeras3Artifacts: ${message}`);
}

/** Config keys every Keras 3 layer takes. */
const COMMON = ['name', 'trainable', 'dtype'];
/** Config keys of this package that Keras 3 has as call arguments instead. */
const CALL_OPTIONS = ['use_causal_mask', 'return_attention_scores'];
/** Config keys of this package that Keras 3 derives from the inputs. */
const DERIVED = ['query_shape', 'value_shape', 'key_shape', 'input_roles'];

/** The Keras 3 class of a layer class with a contract (null: tfjs' own, or a user's without). */
function keras3Class(cls: string): Keras3Class | null {
  const keras3 = contractOf(cls)?.keras.keras3;
  return keras3 != null && 'keys' in keras3 ? keras3 : null;
}

/** How Keras calls a layer class (tfjs' own: on its tensors). */
const kerasCall = (cls: string): KerasCall => contractOf(cls)?.keras.call ?? {kind: 'tensor'};

/** A Keras 3 tensor reference to output `t` of node `n` of layer `l`. */
function tensorRef(model: LayersModel, l: string, n: number, t: number): Obj {
  const layer = model.getLayer(l);
  const out = layer.inboundNodes[n].outputTensors[t] as SymbolicTensor;
  return {
    class_name: '__keras_tensor__',
    config: {shape: out.shape as Json, dtype: out.dtype, keras_history: [l, n, t]},
  };
}

type Entry = [string, number, number, Obj?];

interface Ctx {
  model: LayersModel;
  options: Required<Keras3ExportOptions>;
  /** lengths input name -> [mask input name, batch shape] */
  masks: Map<string, {name: string; shape: number[]}>;
  inputs: Map<string, Obj>;
}

/** Whether Keras 3 (>= 3.10) runs this attention layer on its non-fused path. */
function nonFusedKerasPath(config: Obj, call: KerasCall): boolean {
  return (
    call.kind === 'attention' &&
    call.byKeyword &&
    (Number(config.dropout ?? 0) > 0 || config.return_attention_scores === true)
  );
}

function keras3Config(layer: Obj, callKwargs: Obj): Obj {
  const cls = layer.class_name as string;
  const name = layer.name as string;
  const config = {...(layer.config as Obj)};
  const q = contractOf(cls)?.quantization;
  dropTfjsOnlyKeys(q?.kind === 'replaces' ? q.className : cls, config);
  const spec = keras3Class(cls);
  const call = kerasCall(cls);
  const out: Obj = {};
  for (const [k, v] of Object.entries(config)) {
    if (k === 'quantization_mode' && v === 'int4') {
      throw new Error(
        `toKeras3Artifacts: layer '${name}' (${cls}) is int4; writing int4 layers for Keras is ` +
          'not implemented (Keras 3.15 reads its own int4 files, which this package loads): ' +
          'save the float model and quantize it after loading',
      );
    }
    if (k === 'quantization_mode') {
      // Keras 3 writes an int8 layer's dtype as a QuantizedDTypePolicy; a composite layer keeps
      // its float policy (Keras 3.15 quantizes its sublayers only)
      if (v === 'int8' && !(contractOf(cls)?.quantization == null))
        out.dtype = {...KERAS_INT8_POLICY};
      continue;
    }
    if (CALL_OPTIONS.includes(k)) {
      if (v === true) callKwargs[k] = true;
      continue;
    }
    if (DERIVED.includes(k)) continue;
    // a constant start_index (kept in the config here) is a call argument of Keras' position layers
    if (call.kind === 'positions' && k === 'start_index') {
      if (v != null && v !== 0) callKwargs.start_index = v;
      continue;
    }
    // zero weights for fully masked rows are Keras 3's own on the non-fused path, which
    // MultiHeadAttention and GroupQueryAttention take with dropout or returned scores
    // (loadKerasModel sets the option there); elsewhere Keras gives such rows uniform weights
    if (k === 'zero_fully_masked_rows' && v === true && nonFusedKerasPath(config, call)) continue;
    if (k === 'dtype' && out.dtype != null) continue;
    if (spec == null || COMMON.includes(k) || spec.keys.includes(k)) {
      // an indexing operation's index goes to its node
      if (!(call.kind === 'indexing' && k !== 'name')) out[k] = v;
      continue;
    }
    if (v == null || v === false) continue;
    fail(
      `layer '${name}' (${cls}) has the option '${k}' = ${JSON.stringify(v)}, which Keras 3's ` +
        `${cls} does not take; build the layer without it for a model that Keras 3 must load`,
    );
  }
  if ('activation' in out) out.activation = keras3Activation(out.activation) as Json;
  if (cls === 'InputLayer') {
    out.batch_shape = config.batch_input_shape ?? config.batch_shape ?? null;
    delete out.batch_input_shape;
  }
  if (call.kind === 'keyword') {
    // options the loader keeps in the config go back to the call (false too)
    for (const [kwarg, key] of Object.entries(call.options)) {
      if (key != null && config[key] != null) callKwargs[kwarg] = config[key];
    }
  }
  return out;
}

function rewriteNode(layer: Obj, node: Json, ctx: Ctx): Obj {
  const cls = layer.class_name as string;
  const name = layer.name as string;
  const config = layer.config as Obj;
  const entries = node as Entry[];
  const ref = (e: Entry) => tensorRef(ctx.model, e[0], e[1], e[2]);
  const kwargs: Obj = {};
  for (const e of entries) {
    for (const [k, v] of Object.entries(e[3] ?? {})) {
      if (v != null && v !== false) kwargs[k] = v;
    }
  }
  const call = kerasCall(cls);
  if (call.kind === 'indexing') {
    const index = ((config.index as Json[]) ?? []).map((it) =>
      isObj(it) ? {class_name: '__slice__', config: it} : it,
    );
    return {args: [ref(entries[0]), index], kwargs};
  }
  if (call.kind === 'attention') {
    const roles = (config.input_roles as string[] | null) ?? ['query', 'value', 'key'];
    const named: Record<string, Json> = {};
    entries.forEach((e, i) => {
      const role = snakeCase(roles[i] ?? '');
      if (role === 'valid_lens') {
        named.attention_mask = lengthsMask(layer, entries, roles, e, ctx);
      } else if (['query', 'value', 'key', 'attention_mask'].includes(role)) {
        named[role] = ref(e);
      } else fail(`layer '${name}' (${cls}) takes an input of role '${roles[i]}'`);
    });
    const value = named.value ?? named.query;
    if (call.byKeyword) {
      const kw: Obj = {...kwargs};
      if (named.key) kw.key = named.key;
      if (named.attention_mask) kw.attention_mask = named.attention_mask;
      return {args: [named.query, value], kwargs: kw};
    }
    if (named.attention_mask) {
      fail(
        `layer '${name}' (${cls}) takes an attention mask or valid lengths, which Keras' ${cls} ` +
          'does not; use MultiHeadAttention, whose attention_mask Keras 3 takes',
      );
    }
    const list = [named.query, value, ...(named.key ? [named.key] : [])];
    return {args: [list], kwargs};
  }
  if (call.kind === 'keyword') {
    const own = call.roles.map(snakeCase);
    const roles = ((config.input_roles as string[] | null) ?? own).map(snakeCase);
    const args: Json[] = [];
    entries.forEach((e, i) => {
      const role = roles[i];
      if (i < call.positional && role === own[i]) args.push(ref(e));
      else kwargs[role] = ref(e);
    });
    return {args, kwargs};
  }
  if (call.kind === 'tensor' && call.kerasKwargs != null) {
    const dtypes = entries.map(
      (e) =>
        (ctx.model.getLayer(e[0]).inboundNodes[e[1]].outputTensors[e[2]] as SymbolicTensor).dtype,
    );
    Object.assign(kwargs, call.kerasKwargs(dtypes));
  }
  if (entries.length === 1) return {args: [ref(entries[0])], kwargs};
  return {args: [entries.map(ref)], kwargs};
}

/** The `<lengths>_mask` input that replaces a valid-lengths input of an attention layer. */
function lengthsMask(layer: Obj, entries: Entry[], roles: string[], e: Entry, ctx: Ctx): Obj {
  const name = layer.name as string;
  const lens = e[0];
  if (ctx.options.validLens !== 'mask') {
    fail(
      `layer '${name}' takes valid lengths (input '${lens}'), which Keras 3 has no argument for; ` +
        "pass {validLens: 'mask'} to replace that input by a boolean attention-mask input " +
        `'${lens}_mask' of shape [batch, queryLength, keyLength], or build the model with an ` +
        'attentionMask input',
    );
  }
  const input = ctx.inputs.get(lens);
  const shape = ((input?.config as Obj | undefined)?.batch_input_shape as number[] | null) ?? null;
  if (input == null || shape == null || shape.length > 2 || (shape.length === 2 && shape[1] !== 1))
    fail(
      `layer '${name}' takes valid lengths from '${lens}', which is not a model input of shape ` +
        '[batch] or [batch, 1]; only such lengths become a Keras attention mask',
    );
  const at = (role: string) => entries[roles.findIndex((r) => snakeCase(r) === role)];
  const q = at('query');
  const k = at('key') ?? at('value') ?? q;
  const shapeOf = (x: Entry) =>
    (ctx.model.getLayer(x[0]).inboundNodes[x[1]].outputTensors[x[2]] as SymbolicTensor).shape;
  const maskShape = [null, shapeOf(q)[1], shapeOf(k)[1]] as number[];
  if (maskShape[1] == null || maskShape[2] == null)
    fail(`layer '${name}' has inputs of unknown length; a lengths mask needs fixed lengths`);
  const seen = ctx.masks.get(lens);
  if (seen != null && JSON.stringify(seen.shape) !== JSON.stringify(maskShape))
    fail(
      `the lengths input '${lens}' feeds attention layers of different query / key lengths; ` +
        'one mask input cannot serve them all: give each its own lengths input',
    );
  const maskName = `${lens}_mask`;
  ctx.masks.set(lens, {name: maskName, shape: maskShape});
  return {
    class_name: '__keras_tensor__',
    config: {shape: maskShape, dtype: 'bool', keras_history: [maskName, 0, 0]},
  };
}

/**
 * Returns a copy of saved artifacts (`model.save(tf.io.withSaveHandler(...))`) whose topology is
 * a Keras 3 model config and whose weights are named by their Keras 3 paths. Save it with
 * `fileSystem(dir)` and pack it into a `.keras` file with `scale/keras3_io.py`
 * (`python scale/keras3_io.py dir model.keras`); `keras.saving.load_model` then loads it with
 * `keras_hub` imported. The layers map to `keras.layers` (MultiHeadAttention,
 * GroupQueryAttention, Attention, AdditiveAttention, EinsumDense) and `keras_hub.layers`
 * (TransformerEncoder / Decoder, TokenAndPositionEmbedding, PositionEmbedding,
 * SinePositionEncoding, RotaryEmbedding, ReversibleEmbedding, CachedMultiHeadAttention); GetItem
 * becomes Keras 3's indexing operation. DotProductAttention, the d2l form of AdditiveAttention
 * (`numHiddens`) and valid lengths without `{validLens: 'mask'}` are refused with an error that
 * names the alternative.
 *
 * @example
 * ```js
 * const saved = await new Promise((resolve) =>
 *   model.save(tf.io.withSaveHandler(async (a) => (resolve(a), {modelArtifactsInfo: {}}))),
 * );
 * const keras3 = await toKeras3Artifacts(saved, {validLens: 'mask'});
 * await fileSystem('for-keras3').save(keras3);
 * // then: python scale/keras3_io.py for-keras3 model.keras
 * ```
 */
export async function toKeras3Artifacts(
  artifacts: tf.io.ModelArtifacts,
  options: Keras3ExportOptions = {},
): Promise<tf.io.ModelArtifacts> {
  const opts: Required<Keras3ExportOptions> = {validLens: options.validLens ?? 'refuse'};
  if (!['refuse', 'mask'].includes(opts.validLens))
    fail(`validLens must be 'refuse' or 'mask', not ${JSON.stringify(opts.validLens)}`);
  const raw = artifacts.modelTopology;
  if (raw == null || raw instanceof ArrayBuffer) fail('expected a JSON model topology');
  const topology = JSON.parse(JSON.stringify(raw)) as Obj;
  const modelConfig = ((topology.model_config as Obj | undefined) ?? topology) as Obj;
  if (modelConfig.class_name !== 'Model' && modelConfig.class_name !== 'Functional')
    fail(`expected a functional model (tf.model), not a ${String(modelConfig.class_name)}`);
  const config = modelConfig.config as Obj;
  const layers = (config.layers as Obj[] | undefined) ?? fail('the topology has no layers');
  for (const layer of layers) {
    const cls = layer.class_name as string;
    const keras = contractOf(cls)?.keras;
    if (keras != null && 'refused' in keras.keras3)
      fail(`layer '${layer.name}' is a ${cls}, which ${keras.keras3.refused}`);
    const refusal = keras?.refuseConfig?.(camelConfig(layer.config as Obj));
    if (refusal != null) fail(`layer '${layer.name}' ${refusal}`);
    if (cls === 'Model' || cls === 'Functional' || cls === 'Sequential')
      fail(`layer '${layer.name}' is a nested model; export a flat functional model`);
  }
  const model = await models.modelFromJSON({modelTopology: modelConfig} as never);
  try {
    const ctx: Ctx = {
      model,
      options: opts,
      masks: new Map(),
      inputs: new Map(
        layers.filter((l) => l.class_name === 'InputLayer').map((l) => [l.name as string, l]),
      ),
    };
    const out: Obj[] = [];
    for (const layer of layers) {
      const callKwargs: Obj = {};
      const cls = layer.class_name as string;
      const kerasConfig = keras3Config(layer, callKwargs);
      const nodes = ((layer.inbound_nodes as Json[]) ?? []).map((n) => {
        const node = rewriteNode(layer, n, ctx);
        node.kwargs = {...callKwargs, ...(node.kwargs as Obj)};
        return node as Json;
      });
      const spec = keras3Class(cls);
      const q = contractOf(cls)?.quantization;
      if (q?.kind === 'replaces') kerasConfig.dtype = {...KERAS_INT8_POLICY};
      const policyMap = int8PolicyMap(model.getLayer(layer.name as string));
      if (policyMap != null && kerasConfig.dtype == null) kerasConfig.dtype = policyMap;
      out.push({
        module: spec?.module ?? spec?.pkg ?? 'keras.layers',
        // the int8 form of a Keras class (QuantizedDense) is that class with an int8 policy
        class_name: q?.kind === 'replaces' ? q.className : cls,
        config: kerasConfig,
        registered_name: spec?.registeredName ?? (spec?.pkg != null ? `${spec.pkg}>${cls}` : null),
        name: layer.name,
        inbound_nodes: nodes,
      });
    }
    // lengths inputs that became masks: the mask input replaces the lengths input
    let inputLayers = config.input_layers as Json[];
    for (const [lens, mask] of ctx.masks) {
      const users = layers.filter((l) =>
        ((l.inbound_nodes as Json[]) ?? []).some((n) => (n as Entry[]).some((e) => e[0] === lens)),
      );
      const nonAttention = users.filter((l) => {
        const c = kerasCall(l.class_name as string);
        return !(c.kind === 'attention' && c.byKeyword);
      });
      if (nonAttention.length > 0)
        fail(
          `the lengths input '${lens}' also feeds '${nonAttention[0].name}', which cannot take ` +
            'a mask in its place',
        );
      const i = out.findIndex((l) => l.name === lens);
      out[i] = {
        module: 'keras.layers',
        class_name: 'InputLayer',
        config: {batch_shape: mask.shape, dtype: 'bool', sparse: false, name: mask.name},
        registered_name: null,
        name: mask.name,
        inbound_nodes: [],
      };
      inputLayers = inputLayers.map((e) =>
        Array.isArray(e) && e[0] === lens ? [mask.name, 0, 0] : e,
      );
    }
    const flat = (list: Json[]) => (list.length === 1 ? list[0] : list);
    const keras3: Obj = {
      module: 'keras.src.models.functional',
      class_name: 'Functional',
      config: {
        name: config.name ?? 'functional',
        trainable: true,
        layers: out,
        input_layers: flat(inputLayers),
        output_layers: flat(config.output_layers as Json[]),
      },
      registered_name: 'Functional',
    };
    const paths = new Map<string, string>();
    for (const [p, v] of keras3Paths(model)) paths.set(v.originalName, p);
    checkInt8Specs(artifacts.weightSpecs ?? [], int8ValueNames(model));
    const weightSpecs = (artifacts.weightSpecs ?? []).map((s) => {
      const p = paths.get(s.name) ?? fail(`no layer of the model owns the weight '${s.name}'`);
      return {...s, name: p};
    });
    return {
      ...artifacts,
      modelTopology: keras3 as unknown as tf.io.ModelArtifacts['modelTopology'],
      weightSpecs,
      format: 'keras3-config',
      userDefinedMetadata: {
        ...(artifacts.userDefinedMetadata ?? {}),
        keras3_masks: Object.fromEntries(
          [...ctx.masks].map(([lens, m]) => [lens, {input: m.name, shape: m.shape}]),
        ),
      },
    };
  } finally {
    model.dispose();
  }
}

/** An entry of keras-hub 0.32's int8 `DTypePolicyMap`, as its int8 presets write it. */
const hubInt8Policy = (): Obj => ({
  module: 'keras.dtype_policies',
  class_name: 'QuantizedDTypePolicy',
  config: {mode: 'int8', source_name: null},
  registered_name: null,
});

/**
 * The `dtype` Keras 3 needs on a layer whose sublayers are int8 (a MultiHeadAttention, a
 * keras-hub block): a `DTypePolicyMap` with an int8 `QuantizedDTypePolicy` per int8 sublayer,
 * keyed by its path (`transformer_layer_0/self_attention/query`), as keras-hub 0.32 writes a
 * quantized backbone's. Keras builds sublayers with their parent's policy and looks each up by
 * its path, so these load int8; under a float policy Keras builds them float and cannot load
 * their int8 weights ("expected 2 variables, but received 3"). Null: no int8 sublayer.
 */
function int8PolicyMap(layer: tfLayers.Layer): Obj | null {
  if (!(layer instanceof CompositeLayer)) return null;
  const map: Obj = {};
  const visit = (l: tfLayers.Layer, prefix: string) => {
    const path = `${prefix}/${l.name}`;
    if (l instanceof CompositeLayer) l.sublayers.forEach((sub) => visit(sub, path));
    else if (isInt8Layer(l) && l.quantizationMode === 'int8') map[path] = hubInt8Policy();
  };
  layer.sublayers.forEach((sub) => visit(sub, layer.name));
  if (Object.keys(map).length === 0) return null;
  return {
    module: 'keras.dtype_policies',
    class_name: 'DTypePolicyMap',
    config: {default_policy: null, policy_map: map},
    registered_name: null,
  };
}

/** The names of the weights holding int8 values (as bytes, ops/int8.ts) in `model`'s int8 layers. */
function int8ValueNames(model: LayersModel): Set<string> {
  const out = new Set<string>();
  const visit = (l: tfLayers.Layer) => {
    if (isInt8Layer(l) && l.quantizationMode === 'int8') {
      for (const w of l.int8Weights()) out.add(w.values.originalName);
    }
    if (l instanceof LayersModel) l.layers.forEach(visit);
    if (l instanceof CompositeLayer) l.sublayers.forEach(visit);
  };
  model.layers.forEach(visit);
  return out;
}

/** Each int8 weight is held as bytes (dtype `bool`, ops/int8.ts), as Keras' int8 datasets are. */
function checkInt8Specs(specs: tf.io.WeightsManifestEntry[], int8: Set<string>): void {
  for (const s of specs) {
    if (int8.has(s.name) && (s.dtype !== 'bool' || s.quantization != null)) {
      fail(`the int8 weight '${s.name}' is stored as ${s.dtype}; expected int8 bytes (bool)`);
    }
  }
}
