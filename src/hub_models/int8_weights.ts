/**
 * keras-hub int8 presets (`task.quantize("int8")`, then `save_to_preset`): the layers whose
 * weights are int8 become their int8 form before the weights are bound.
 *
 * keras-hub 0.32 writes the backbone's dtype as a `DTypePolicyMap` (a `QuantizedDTypePolicy` of
 * mode int8 per quantized layer path, e.g. `transformer_layer_0/self_attention/query`) and the
 * int8 layers' weights in Keras' int8 order (`vars/0` the int8 kernel, `vars/1` the bias,
 * `vars/2` the float32 `kernel_scale`; an embedding's `vars/1` its `embeddings_scale`). The
 * weights decide which layers are int8 (as for `.keras` files); the map's entries are only
 * checked to be int8 or float32.
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, LayersModel, LayerVariable} from '@tensorflow/tfjs-layers';

import {
  badScaleText,
  badScaleValue,
  Int8Layer,
  int8Replacement,
  isInt8Layer,
  writeInt4,
} from '../layers/core/quantization';
import {CompositeLayer} from '../layers/engine/composite_layer';
import {Int4Quantized, quantizeInt4} from '../ops/int4';
import {
  absMaxQuantizeValues,
  int8FromWholeNumbers,
  int8ValuesOf,
  isInt8Tensor,
  ownedInt8Tensor,
} from '../ops/int8';
import type {Json, JsonObject} from '../layers/engine/contract';
import {contractOf} from '../layers/engine/contract';
import {isObject} from '../layers/engine/json_object';
import {isHubWeightReader} from './family';
import type {HubWeight, HubWeights, WeightBinding} from './family';

type Config = tf.serialization.ConfigDict;
type Registered = [
  unknown,
  (cls: unknown, config: Config, custom?: Config, fast?: boolean) => unknown,
];

/**
 * The dtypes of a weight that holds int8 values: `int8`, HDF5's int8 datasets as bytes (`bool`,
 * ops/int8.ts), or whole numbers as `int32`.
 */
const INT8_DTYPES = ['int8', 'bool', 'int32'];

/** Whether a weight of the map holds int8 values: a dtype of {@link INT8_DTYPES}, or such a tensor. */
export function isInt8HubWeight(w: HubWeight | undefined): boolean {
  if (w == null) return false;
  return w.dtype != null && INT8_DTYPES.includes(w.dtype);
}

/** A policy map entry's mode: float32, int8, or int4 with its block size. */
type PolicyMode = 'float32' | 'int8' | {int4: number};

function policyMode(policy: Json, cls: string, where: string): PolicyMode {
  if (policy == null) return 'float32';
  if (typeof policy === 'string' && policy === 'float32') return 'float32';
  if (isObject(policy) && isObject(policy.config)) {
    const c = policy.config;
    const fromFloat = c.source_name == null || c.source_name === 'float32';
    if (policy.class_name === 'DTypePolicy' && c.name === 'float32') return 'float32';
    if (policy.class_name === 'QuantizedDTypePolicy' && c.mode === 'int8' && fromFloat) {
      return 'int8';
    }
    const m = typeof c.mode === 'string' ? /^int4\/(-?\d+)$/.exec(c.mode) : null;
    if (policy.class_name === 'Int4DTypePolicy' && m != null && fromFloat) {
      const size = Number(m[1]);
      if (size === -1 || size > 0) return {int4: size};
    }
  }
  throw new Error(
    `${cls}: config dtype ${where} is ${JSON.stringify(policy)}; expected float32, an int8 ` +
      "QuantizedDTypePolicy or an Int4DTypePolicy of mode 'int4/<block size>' (Keras' int8 / " +
      'int4 quantization of a float32 model)',
  );
}

/**
 * A keras-hub config whose `dtype` is keras-hub's `DTypePolicyMap` of a quantized model, with
 * that dtype checked (a float32 default, each entry int8, int4 or float32; anything else is an
 * error naming the layer path and its policy) and replaced by `float32`, and the int4 block size
 * of its int4 entries (one for all: a map mixing int4 block sizes, or int4 with int8, is an error
 * naming both); other configs are returned as they are.
 */
export function withoutPolicyMap(
  cls: string,
  config: JsonObject,
): {config: JsonObject; int4BlockSize: number | null} {
  const dtype = config.dtype;
  if (!isObject(dtype) || dtype.class_name !== 'DTypePolicyMap') {
    return {config, int4BlockSize: null};
  }
  const inner = isObject(dtype.config) ? dtype.config : {};
  policyMode(inner.default_policy ?? null, cls, 'default_policy');
  const map = inner.policy_map;
  if (!isObject(map)) {
    throw new Error(
      `${cls}: expected the DTypePolicyMap's policy_map to be an object, received ${JSON.stringify(map)}`,
    );
  }
  let first: {path: string; mode: PolicyMode} | null = null;
  let int4BlockSize: number | null = null;
  for (const [path, policy] of Object.entries(map)) {
    const mode = policyMode(policy, cls, `of '${path}'`);
    if (mode === 'float32') continue;
    const text = (m: PolicyMode) => (typeof m === 'string' ? m : `int4/${m.int4}`);
    if (first != null && text(first.mode) !== text(mode)) {
      throw new Error(
        `${cls}: the DTypePolicyMap quantizes '${first.path}' as ${text(first.mode)} and ` +
          `'${path}' as ${text(mode)}; expected one quantization for every layer (Keras' ` +
          'quantize() of a whole model)',
      );
    }
    first ??= {path, mode};
    if (typeof mode !== 'string') int4BlockSize = mode.int4;
  }
  return {config: {...config, dtype: 'float32'}, int4BlockSize};
}

function registered(className: string): Registered | undefined {
  const map = tf.serialization.SerializationMap.getMap().classNameMap as unknown as Record<
    string,
    Registered
  >;
  return Object.prototype.hasOwnProperty.call(map, className) ? map[className] : undefined;
}

/** A model layer entry in its int8 form: the int8 class (Dense), or `quantizationMode: 'int8'`. */
function int8Entry(cls: string, entry: Config): Config {
  const className = entry.className as string;
  const config = entry.config as Config;
  const replacement = int8Replacement(className);
  const q = replacement?.contract.quantization;
  if (replacement != null && q?.kind === 'replaces') {
    return {...entry, className: replacement.className, config: q.fromFloat(config)};
  }
  const ctor = registered(className)?.[0] as {prototype?: unknown} | undefined;
  if (
    contractOf(className)?.quantization?.kind === 'own' ||
    ctor?.prototype instanceof CompositeLayer
  ) {
    return {...entry, config: {...config, quantizationMode: 'int8'}};
  }
  throw new Error(
    `${cls}: layer '${String(config.name)}' (${className}) has int8 weights, but the package has ` +
      `no int8 form of ${className}`,
  );
}

/** `[a, b]` as Keras prints shapes. */
const shapeText = (s: readonly (number | null)[]) => `[${s.join(', ')}]`;

/**
 * The model `model` (built float by a family, its weights bound by `bindings`) with every layer
 * that owns an int8 weight of `weights` in its int8 form: a new model (the float one is
 * disposed), its bindings (`derive`d from the int8 model: the int8 layers' weights in Keras' int8
 * order, kernel `vars/0`, bias `vars/1`, scale last), and the weights with the int8 values as
 * float32 values, as the int8 layers hold them. Without int8 weights, the arguments are returned as they are.
 *
 * Checked before anything is written: every int8 layer's int8 weights are int8 in the map and its
 * other weights are not, and each scale's shape is the one its kernel gives (an error names the
 * layer, the paths, the expected and the received shape).
 */
export function int8HubModel(
  cls: string,
  model: LayersModel,
  bindings: readonly WeightBinding[],
  weights: HubWeights,
  derive: (model: LayersModel) => WeightBinding[],
): {model: LayersModel; bindings: WeightBinding[]; weights: HubWeights} {
  if (!(weights instanceof Map)) return {model, bindings: [...bindings], weights};
  const int8Bindings = bindings.filter((b) => isInt8HubWeight(weights.get(b.path)));
  if (int8Bindings.length === 0) return {model, bindings: [...bindings], weights};
  // the top-level layers owning an int8 weight
  const owner = new Map<LayerVariable, layers.Layer>();
  for (const layer of model.layers) for (const w of layer.weights) owner.set(w, layer);
  const names = new Set<string>();
  for (const b of int8Bindings) {
    const layer = owner.get(b.variable);
    if (layer != null) names.add(layer.name);
  }
  const config = model.getConfig() as Config;
  const entries = (config.layers as unknown as Config[]).map((e) =>
    names.has((e.config as Config).name as string) ? int8Entry(cls, e) : e,
  );
  const entry = registered(model.getClassName());
  if (entry == null) throw new Error(`${cls}: the model class is not registered`);
  const out = entry[1](entry[0], {...config, layers: entries} as unknown as Config, {}, true);
  const int8 = out as LayersModel;
  try {
    // the int8 layers' weights in Keras' int8 order (kernel, bias, scale), from their contracts
    const newBindings = derive(int8);
    const pathOf = new Map(newBindings.map((b) => [b.variable, b.path]));
    checkInt8Layers(cls, int8, pathOf, weights);
    model.dispose();
    return {model: int8, bindings: newBindings, weights: asInt8Weights(weights)};
  } catch (e) {
    int8.dispose();
    throw e;
  }
}

/**
 * The weights as the int8 layers of `model` take them, `model` built in its int8 form directly
 * (every layer that takes a quantization mode made int8, build.ts) with `bindings`, when its int8
 * variables are exactly the int8 weights of `weights` (each scale checked as
 * {@link int8HubModel} checks it); null when they differ (a preset quantized in part, or a layer
 * Keras leaves float): the caller builds the float model then.
 */
export function int8HubModelAsBuilt(
  cls: string,
  model: LayersModel,
  bindings: readonly WeightBinding[],
  weights: HubWeights,
): HubWeights | null {
  if (!(weights instanceof Map)) return null;
  for (const b of bindings) {
    const w = weights.get(b.path);
    if (w != null && (b.variable.dtype === 'bool') !== isInt8HubWeight(w)) return null;
  }
  checkInt8Layers(cls, model, new Map(bindings.map((b) => [b.variable, b.path])), weights);
  return asInt8Weights(weights);
}

/**
 * A float preset quantized while it loads (`loadKerasHubPreset(source, {quantize: 'int8'})`):
 * `model` built in its int8 form directly, its bindings, and `weights` (float) become the
 * weights its int8 layers take: each int8 weight's float values, read from their file one weight
 * at a time, quantized as Keras' `quantize("int8")` does (abs-max over the weight's reduced axes,
 * ops/int8.ts) into its bytes and its scale when bound; the scale's path (which a float preset
 * lacks) is written with them. Other weights bind as they are. An int8 weight already in the map
 * is an error: the preset is quantized already.
 */
export function quantizedHubWeights(
  cls: string,
  model: LayersModel,
  bindings: readonly WeightBinding[],
  weights: HubWeights,
): HubWeights {
  const pathOf = new Map(bindings.map((b) => [b.variable, b.path]));
  const out = new Map<string, HubWeight>(weights);
  // one buffer for the float values of every weight read here (the largest's): the float weights
  // are never held at once, whenever the garbage collector runs
  let scratch = new Uint8Array(0);
  const floatValues = (w: HubWeight): ArrayLike<number> => {
    if (isHubWeightReader(w) && w.readInto != null && w.dtype === 'float32') {
      const bytes = w.shape.reduce((p, d) => p * d, 1) * 4;
      if (scratch.length < bytes) scratch = new Uint8Array(bytes);
      w.readInto(scratch);
      return new Float32Array(scratch.buffer, 0, bytes / 4);
    }
    return isHubWeightReader(w) ? w.read() : w instanceof tf.Tensor ? w.dataSync() : w.values;
  };
  const refuseQuantized = (float: HubWeight, path: string) => {
    if (isInt8HubWeight(float)) {
      throw new Error(
        `${cls}: the weight ${path} is int8 already; expected a float32 preset to quantize ` +
          '(a quantized preset loads as it is without the quantize option)',
      );
    }
  };
  for (const layer of quantizedLayers(model)) {
    const int8 = layer.int8Weights();
    const int4 = layer.int4Weights();
    // the variables a float layer has not: the scales (int4: zero points and groups too)
    const extras = new Set<LayerVariable>([
      ...int8.map((w) => w.scale),
      ...int4.flatMap((w) => [w.scale, w.zero, w.gIdx].filter((v) => v != null)),
    ] as LayerVariable[]);
    // the float form numbers the layer's variables without them (an untied
    // ReversibleEmbedding: embeddings vars/0 and reverse_embeddings vars/1, not vars/2)
    const folders = new Map<string, Array<{index: number; variable: LayerVariable}>>();
    for (const variable of layer.weights) {
      const m = /^(.*\/)vars\/(\d+)$/.exec(pathOf.get(variable) ?? '');
      if (m == null) continue;
      const list = folders.get(m[1]) ?? [];
      list.push({index: Number(m[2]), variable});
      folders.set(m[1], list);
    }
    const taken = new Map<LayerVariable, HubWeight | undefined>();
    for (const [folder, list] of folders) {
      list.sort((a, b) => a.index - b.index);
      let k = 0;
      for (const {variable} of list) {
        if (extras.has(variable)) continue;
        const floatPath = `${folder}vars/${k++}`;
        taken.set(variable, weights.get(floatPath));
        out.delete(floatPath);
      }
    }
    // the layer's float weights (a bias) under the quantized form's paths
    for (const [variable, w] of taken) if (w != null) out.set(pathOf.get(variable) as string, w);
    for (const w of int8) {
      const vPath = pathOf.get(w.values);
      const sPath = pathOf.get(w.scale);
      const float = taken.get(w.values);
      if (vPath == null || sPath == null || float == null) continue; // bindWeights names it
      refuseQuantized(float, vPath);
      let made: {values: Int8Array; scale: tf.Tensor} | null = null;
      const quantized = () => {
        if (made != null) return made;
        const values = floatValues(float);
        const q = absMaxQuantizeValues(values, w.values.shape as number[], w.axes);
        const kept = tf.tensor(q.scale, q.scaleShape);
        const scale = tf.tidy(() =>
          tf.reshape(w.layout?.(kept) ?? kept, w.scale.shape as number[]),
        );
        kept.dispose();
        made = {values: q.values, scale};
        return made;
      };
      out.set(vPath, {
        shape: w.values.shape as number[],
        dtype: 'bool',
        read: () => quantized().values,
        write: (variable) => {
          const {values, scale} = quantized();
          tf.tidy(() => {
            variable.write(ownedInt8Tensor(values, variable.shape as number[]));
            w.scale.write(scale);
          });
          scale.dispose();
          made = null;
        },
      });
      // written with the values
      out.set(sPath, {
        shape: w.scale.shape as number[],
        dtype: 'float32',
        read: () => quantized().scale.dataSync() as Float32Array,
        write: () => undefined,
      });
    }
    for (const w of int4) {
      const vPath = pathOf.get(w.packed);
      const float = taken.get(w.packed);
      if (vPath == null || float == null) continue; // bindWeights names it
      refuseQuantized(float, vPath);
      // Keras' quantize("int4") of the float values, in JavaScript (ops/int4.ts), once
      let made: Int4Quantized | null = null;
      const quantized = () => (made ??= quantizeInt4(floatValues(float), w.layout));
      out.set(vPath, {
        shape: w.packed.shape as number[],
        dtype: 'bool',
        read: () => quantized().packed,
        write: () => {
          writeInt4(w, quantized());
          made = null;
        },
      });
      // written with the values (g_idx: Keras' floor(i / blockSize), set at build)
      for (const v of [w.scale, w.zero, w.gIdx]) {
        const p = v == null ? undefined : pathOf.get(v);
        if (v == null || p == null) continue;
        const values = () =>
          v === w.scale
            ? quantized().scale
            : v === w.zero
              ? Float32Array.from(quantized().zero ?? [])
              : (v.read().dataSync() as Float32Array);
        out.set(p, {
          shape: v.shape as number[],
          dtype: v.dtype === 'bool' ? 'bool' : 'float32',
          read: values,
          write: () => undefined,
        });
      }
    }
  }
  return out;
}

/**
 * An int8 weight as the int8 layers hold it, bytes (ops/int8.ts): a reader of an int8 dataset
 * writes its bytes itself; whole numbers (a tensor, values, an int32 dataset) are checked to be in
 * int8's range and written as bytes when bound.
 */
function asInt8(w: HubWeight): HubWeight {
  if (isHubWeightReader(w) && w.dtype === 'bool') return w;
  const values = (): tf.Tensor =>
    w instanceof tf.Tensor
      ? w
      : isHubWeightReader(w)
        ? tf.tensor(w.read(), [...w.shape], 'int32')
        : tf.tensor(Float32Array.from(w.values), [...w.shape]);
  return {
    shape: w.shape,
    dtype: 'bool',
    read: () => {
      let out: Int8Array | null = null;
      tf.tidy(() => {
        out = int8ValuesOf(asBytes(values())).slice();
      });
      return out as unknown as Int8Array;
    },
    write: (variable) =>
      tf.tidy(() => {
        variable.write(asBytes(values()));
      }),
  };
}

const asBytes = (t: tf.Tensor) => (isInt8Tensor(t) ? t : int8FromWholeNumbers(t));

/** `weights` with each int8 weight as the int8 layers hold it ({@link asInt8}). */
function asInt8Weights(weights: HubWeights): Map<string, HubWeight> {
  const out = new Map<string, HubWeight>();
  for (const [path, w] of weights) out.set(path, isInt8HubWeight(w) ? asInt8(w) : w);
  return out;
}

/** Every (nested) int8 or int4 layer of `model` with its quantized weights. */
function quantizedLayers(model: LayersModel): Array<layers.Layer & Int8Layer> {
  const out: Array<layers.Layer & Int8Layer> = [];
  const visit = (l: layers.Layer) => {
    if (isInt8Layer(l) && l.int8Weights().length + l.int4Weights().length > 0) out.push(l);
    if (l instanceof CompositeLayer) l.sublayers.forEach(visit);
  };
  model.layers.forEach(visit);
  return out;
}

/** Every (nested) int8 layer of `model` with its int8 weights. */
function int8Layers(model: LayersModel): Array<layers.Layer & Int8Layer> {
  return quantizedLayers(model).filter((l) => l.int8Weights().length > 0);
}

function checkInt8Layers(
  cls: string,
  model: LayersModel,
  pathOf: ReadonlyMap<LayerVariable, string>,
  weights: HubWeights,
): void {
  const layers8 = int8Layers(model);
  const values = new Set(layers8.flatMap((l) => l.int8Weights().map((w) => w.values)));
  // an int8 weight where the int8 form holds a float one (a bias, a norm): first, by its path
  for (const [variable, path] of pathOf) {
    // (int4 layers hold their packed values and zero points as bytes too)
    if (!values.has(variable) && variable.dtype !== 'bool' && isInt8HubWeight(weights.get(path))) {
      throw new Error(
        `${cls}: weight ${path} expected a float dtype (float32, float16, bfloat16, float64), ` +
          `received int8 (in Keras' int8 form, ${variable.originalName} is float)`,
      );
    }
  }
  for (const layer of layers8) {
    for (const {values: v, scale} of layer.int8Weights()) {
      const vPath = pathOf.get(v);
      const sPath = pathOf.get(scale);
      const kernel = vPath == null ? undefined : weights.get(vPath);
      if (vPath == null || sPath == null || kernel == null) continue; // bindWeights names it
      if (!isInt8HubWeight(kernel)) {
        throw new Error(
          `${cls}: layer '${layer.name}' is int8 (other weights of its block are), so ${vPath} ` +
            `expected int8 values, received ${kernel instanceof tf.Tensor ? kernel.dtype : (kernel.dtype ?? 'float32')}`,
        );
      }
      if (shapeText(kernel.shape) !== shapeText(v.shape)) {
        throw new Error(
          `${cls}: layer '${layer.name}': the int8 weight ${vPath} expected shape ` +
            `${shapeText(v.shape)}, received ${shapeText(kernel.shape)}`,
        );
      }
      const s = weights.get(sPath);
      const got = s == null ? null : s.shape;
      if (got == null) {
        throw new Error(
          `${cls}: layer '${layer.name}': the int8 weight ${vPath} ${shapeText(kernel.shape)} ` +
            `expected its scale at ${sPath} (shape ${shapeText(scale.shape)}), which is missing`,
        );
      }
      if (shapeText(got) !== shapeText(scale.shape)) {
        throw new Error(
          `${cls}: layer '${layer.name}': the scale ${sPath} of the int8 weight ${vPath} ` +
            `${shapeText(kernel.shape)} expected shape ${shapeText(scale.shape)}, received ` +
            `${shapeText(got)}`,
        );
      }
      const sv = s as HubWeight;
      const bad = badScaleValue(
        sv instanceof tf.Tensor ? sv.dataSync() : isHubWeightReader(sv) ? sv.read() : sv.values,
      );
      if (bad != null) {
        throw new Error(
          `${cls}: layer '${layer.name}': the scale ${sPath} of the int8 weight ${vPath} ` +
            `${badScaleText(bad)}`,
        );
      }
    }
  }
}
