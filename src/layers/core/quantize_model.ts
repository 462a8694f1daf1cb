/**
 * `quantize(model, 'int8' | 'int4')`: Keras 3's `model.quantize("int8" | "int4")` for a tfjs
 * model.
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, LayersModel, LayerVariable} from '@tensorflow/tfjs-layers';

import {CompositeLayer} from '../engine/composite_layer';
import {contractOf} from '../engine/contract';
import {
  badScaleValue,
  DEFAULT_INT4_BLOCK_SIZE,
  int4BlockSizeOf,
  Int8Layer,
  int8Replacement,
  isInt8Layer,
  QuantizationMode,
  quantizedConfig,
  quantizeInt4Into,
  quantizeInto,
} from './quantization';

/** Options of {@link quantize}. */
export interface QuantizeOptions {
  /**
   * int4 only (Keras' `Int4QuantizationConfig(block_size=...)`): input values per group,
   * grouped and asymmetric with a zero point (default 128), or -1: per channel, symmetric.
   */
  blockSize?: number;
}

type Config = tf.serialization.ConfigDict;
type Registered = [
  unknown,
  (cls: unknown, config: Config, custom?: Config, fast?: boolean) => unknown,
];

const MODEL_CLASSES = new Set(['Functional', 'Model', 'Sequential']);

function registered(className: string): Registered | undefined {
  const map = tf.serialization.SerializationMap.getMap().classNameMap as unknown as Record<
    string,
    Registered
  >;
  return Object.prototype.hasOwnProperty.call(map, className) ? map[className] : undefined;
}

/** A layer entry `{className, config, ...}` of a model config, rewritten to its `mode` form. */
function quantizeEntry(entry: Config, mode: QuantizationMode, blockSize: number): Config {
  const className = entry.className as string;
  const config = entry.config as Config;
  if (MODEL_CLASSES.has(className)) {
    return {...entry, config: quantizeModelConfig(config, mode, blockSize)};
  }
  const replacement = int8Replacement(className);
  const q = replacement?.contract.quantization;
  if (replacement != null && q?.kind === 'replaces') {
    const made = quantizedConfig(q.fromFloat(config), mode, blockSize);
    return {...entry, className: replacement.className, config: made};
  }
  const cls = registered(className)?.[0] as {prototype?: unknown} | undefined;
  const composite = cls?.prototype instanceof CompositeLayer;
  if (contractOf(className)?.quantization?.kind === 'own' || composite) {
    return {...entry, config: quantizedConfig(config, mode, blockSize)};
  }
  return entry;
}

function quantizeModelConfig(config: Config, mode: QuantizationMode, blockSize: number): Config {
  const entries = config.layers as unknown as Config[];
  return {
    ...config,
    layers: entries.map((e) => quantizeEntry(e, mode, blockSize)) as unknown as Config[],
  };
}

/** Every layer of `model`, nested models and composite layers' sublayers included. */
function allLayers(model: {layers: layers.Layer[]}): layers.Layer[] {
  const out: layers.Layer[] = [];
  const visit = (l: layers.Layer) => {
    out.push(l);
    if (l instanceof LayersModel) l.layers.forEach(visit);
    if (l instanceof CompositeLayer) l.sublayers.forEach(visit);
  };
  model.layers.forEach(visit);
  return out;
}

/**
 * Keras 3.15 refuses to quantize a layer twice (`Layer._check_quantize_args`: "Layer 'x' is
 * already quantized with dtype_policy='int8_from_float32'"), and so `model.quantize` of a model
 * with any int8 layer; so does this, naming the first such layer (sublayers included).
 */
function refuseQuantized(model: LayersModel, mode: QuantizationMode): void {
  const quantized = allLayers(model).find((l) => isInt8Layer(l) && l.quantizationMode != null);
  if (quantized == null) return;
  const policy = `${(quantized as unknown as Int8Layer).quantizationMode}_from_float32`;
  throw new Error(
    `quantize: layer '${quantized.name}' (${quantized.getClassName()}) is already quantized ` +
      `with dtype_policy='${policy}'; received mode='${mode}'. Keras refuses to quantize a ` +
      `quantized layer again: quantize the float model instead`,
  );
}

/**
 * Keras 3's `model.quantize("int8")` for a tfjs model: a new model, the same graph, in which
 * every `Dense` (tfjs') becomes a {@link QuantizedDense}, every `Embedding` a
 * {@link QuantizedEmbedding}, and every `EinsumDense` and `ReversibleEmbedding` (also inside
 * MultiHeadAttention, GroupQueryAttention, TransformerEncoder / TransformerDecoder; not inside
 * TokenAndPositionEmbedding, which stays float) holds int8 weights: each float kernel quantized
 * as Keras does (abs-max per output channel, Embedding per row, round half to even, clip ±127, a
 * float32 scale), and at call time each token's input quantized the same way and multiplied int8 by int8
 * (`ops/int8.ts`). Every other weight is copied.
 *
 * `'int4'` (Keras 3.15's `quantize("int4")`, weight-only): the same layers hold int4 weights,
 * two to a byte, quantized as Keras does (ops/int4.ts): grouped along the input axis in groups of
 * `options.blockSize` (default 128; an embedding along its rows), asymmetric with an int8 zero
 * point and a float32 scale per group and output, or per channel (`blockSize: -1`, symmetric);
 * at call time the weight is dequantized a block at a time and multiplied in float32.
 *
 * Keras changes the model in place; a tfjs model cannot change a layer's class in place, so this
 * returns a new model and leaves `model` as it was (dispose it when it is no longer needed).
 * A model that already holds an int8 layer is refused, as Keras refuses it.
 * keras-hub 0.32's backbones use Keras' own `keras.layers.ReversibleEmbedding`, which Keras 3.15
 * quantizes, as this does. Divergences: keras-hub's exported subclass
 * `keras_hub.layers.ReversibleEmbedding` (no keras-hub model uses it) is skipped by Keras'
 * `model.quantize` (its `quantize` checks the exact class) and quantized here; a
 * TokenAndPositionEmbedding's token embedding is quantized by Keras and kept float here.
 */
export function quantize(
  model: LayersModel,
  mode: 'int8' | 'int4',
  options: QuantizeOptions = {},
): LayersModel {
  if (mode !== 'int8' && mode !== 'int4') {
    throw new Error(`quantize: expected mode 'int8' or 'int4', received ${JSON.stringify(mode)}`);
  }
  if (!(model instanceof LayersModel)) {
    throw new Error('quantize: expected a tf.LayersModel (functional or sequential)');
  }
  const blockSize = int4BlockSizeOf(options?.blockSize ?? DEFAULT_INT4_BLOCK_SIZE, 'quantize');
  if (mode === 'int8' && options?.blockSize !== undefined) {
    throw new Error(
      `quantize: blockSize is an int4 option (Keras' Int4QuantizationConfig); received ` +
        `blockSize ${JSON.stringify(options.blockSize)} with mode 'int8'`,
    );
  }
  refuseQuantized(model, mode);
  const className = model.getClassName();
  const entry = registered(className);
  if (entry == null) throw new Error(`quantize: the model class '${className}' is not registered`);
  const config = quantizeModelConfig(model.getConfig() as Config, mode, blockSize);
  const out = entry[1](entry[0], config, {}, true) as LayersModel;
  try {
    const floats = new Map<string, LayerVariable>();
    for (const w of model.weights) floats.set(w.originalName, w);
    const done = new Set<LayerVariable>();
    for (const layer of allLayers(out)) {
      if (!isInt8Layer(layer) || layer.quantizationMode !== mode) continue;
      for (const w of layer.int4Weights()) {
        const float = floats.get(w.packed.originalName);
        if (float == null) {
          throw new Error(`quantize: no float weight '${w.packed.originalName}' in the model`);
        }
        quantizeInt4Into(w, float.read());
        for (const v of [w.packed, w.scale, w.zero, w.gIdx]) if (v != null) done.add(v);
      }
      for (const w of layer.int8Weights()) {
        const float = floats.get(w.values.originalName);
        if (float == null) {
          throw new Error(`quantize: no float weight '${w.values.originalName}' in the model`);
        }
        quantizeInto(w, float.read());
        done.add(w.values).add(w.scale);
      }
    }
    for (const w of out.weights) {
      if (done.has(w)) continue;
      const float = floats.get(w.originalName);
      if (float == null) {
        throw new Error(`quantize: no weight '${w.originalName}' in the float model to copy`);
      }
      w.write(float.read());
    }
  } catch (e) {
    out.dispose();
    throw e;
  }
  return out;
}

/**
 * Refuses an int4 model whose scales Keras could not have written: Keras' int4 scales are
 * `(max - min + 1e-7) / 15` (grouped) or `7 / (max|w| + 1e-7)` (per channel), positive and finite
 * by construction; a zero, negative, NaN or infinite one would make the layer's outputs NaN or
 * wrong without a word. The loaders call it on a model they loaded (`where`: their name); the
 * error names the layer, the weight, the value and its flat index.
 */
export function checkInt4Scales(model: LayersModel, where: string): void {
  for (const layer of allLayers(model)) {
    if (!isInt8Layer(layer) || layer.quantizationMode !== 'int4') continue;
    for (const w of layer.int4Weights()) {
      const bad = badScaleValue(w.scale.read().dataSync());
      if (bad == null) continue;
      throw new Error(
        `${where}: layer '${layer.name}': the int4 scale ${w.scale.originalName} expected ` +
          'positive finite values (Keras writes (max - min + 1e-7) / 15, or 7 / max|w| per ' +
          `channel), received ${String(bad.value)} at flat index ${bad.index}`,
      );
    }
  }
}
