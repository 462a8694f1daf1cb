/**
 * Keras 3 int8 models (`model.quantize("int8")`) in the loader: a layer whose dtype is a
 * `QuantizedDTypePolicy` (mode int8) becomes this package's int8 form (Dense -> QuantizedDense,
 * Embedding -> QuantizedEmbedding, EinsumDense / ReversibleEmbedding with `quantization_mode`),
 * and a composite layer (keras-hub's blocks, MultiHeadAttention) whose saved weights include int8
 * ones gets `quantization_mode` too (Keras 3.15 quantizes their sublayers but leaves their own
 * dtype float32). int8 weights come as int32 in the manifest (tfjs has no int8 dtype) and are
 * read as float32 values, which is how the package's int8 layers hold them.
 */
import * as tf from '@tensorflow/tfjs-core';

import {CompositeLayer} from '../layers/engine/composite_layer';
import {contractOf, snakeCase} from '../layers/engine/contract';
import {int8Replacement} from '../layers/core/quantization';
import {fail, isObj, Json, Obj} from './keras_json';

const MODEL_CLASSES = ['Functional', 'Model', 'Sequential'];
const COMMON = ['name', 'trainable', 'dtype', 'batch_input_shape', 'batch_shape'];

function isComposite(cls: string): boolean {
  const map = tf.serialization.SerializationMap.getMap().classNameMap as unknown as Record<
    string,
    [{prototype?: unknown}]
  >;
  if (!Object.prototype.hasOwnProperty.call(map, cls)) return false;
  return map[cls][0]?.prototype instanceof CompositeLayer;
}

function int8Policy(dtype: Json | undefined, layer: string): boolean {
  if (!isObj(dtype) || dtype.class_name !== 'QuantizedDTypePolicy') return false;
  const mode = isObj(dtype.config) ? dtype.config.mode : undefined;
  if (mode !== 'int8') {
    fail(`layer '${layer}' is quantized as ${JSON.stringify(mode)}; this package reads int8 only`);
  }
  return true;
}

function rewriteLayers(config: Obj, prefix: string, int32: string[]): void {
  const counts = new Map<string, number>();
  for (const layer of (config.layers as Json[]) ?? []) {
    if (!isObj(layer) || !isObj(layer.config)) continue;
    const cls = layer.class_name as string;
    const c = layer.config;
    const keras3 = contractOf(cls)?.keras.keras3;
    const base =
      (keras3 != null && 'keys' in keras3 ? keras3.pathPrefix : undefined) ??
      (cls === 'Model' || cls === 'Functional' ? 'functional' : snakeCase(cls));
    const n = counts.get(base) ?? 0;
    counts.set(base, n + 1);
    const path = `${prefix}layers/${n === 0 ? base : `${base}_${n}`}/`;
    if (MODEL_CLASSES.includes(cls)) {
      rewriteLayers(c, path, int32);
      continue;
    }
    const name = String(layer.name ?? c.name);
    if (int8Policy(c.dtype, name)) {
      c.dtype =
        (isObj(c.dtype) && isObj(c.dtype.config) && c.dtype.config.source_name) || 'float32';
      delete c.quantization_config;
      const replacement = int8Replacement(cls);
      if (replacement != null) {
        // the int8 class's options only (initializers and the like have nothing to initialize)
        const keep = new Set([
          ...Object.keys(replacement.contract.configSample().getConfig()).map(snakeCase),
          ...COMMON,
        ]);
        for (const k of Object.keys(c)) if (!keep.has(k)) delete c[k];
        layer.class_name = replacement.className;
      } else if (contractOf(cls)?.quantization?.kind === 'own') {
        c.quantization_mode = 'int8';
      } else {
        fail(`layer '${name}' (${cls}) is int8, which this package does not implement for ${cls}`);
      }
    } else if (isComposite(cls) && int32.some((s) => s.startsWith(path))) {
      c.quantization_mode = 'int8';
    }
  }
}

/**
 * Rewrites int8 layers of a Keras 3 topology (in place) and returns the artifacts with int32
 * weights turned into float32 values; artifacts without int32 weights are returned as they are.
 */
export function rewriteInt8(
  modelConfig: Obj,
  artifacts: tf.io.ModelArtifacts,
  specs: tf.io.WeightsManifestEntry[],
): {artifacts: tf.io.ModelArtifacts; specs: tf.io.WeightsManifestEntry[]} {
  const int32 = specs.filter((s) => s.dtype === 'int32' && s.name.startsWith('layers/'));
  rewriteLayers(
    modelConfig.config as Obj,
    '',
    int32.map((s) => s.name),
  );
  if (int32.length === 0 || artifacts.weightData == null) return {artifacts, specs};
  const data = tf.io.CompositeArrayBuffer.join(artifacts.weightData).slice(0);
  let offset = 0;
  const out = specs.map((s) => {
    const size = s.shape.reduce((p, d) => p * d, 1);
    const bytes = size * (s.dtype === 'bool' ? 1 : 4);
    if (s.quantization != null) {
      fail(`weight '${s.name}' is stored with tfjs weight quantization; expected plain weights`);
    }
    if (s.dtype === 'int32' && s.name.startsWith('layers/')) {
      const ints = new Int32Array(data, offset, size);
      new Float32Array(data, offset, size).set(Float32Array.from(ints));
      offset += bytes;
      return {...s, dtype: 'float32' as const};
    }
    offset += bytes;
    return s;
  });
  return {artifacts: {...artifacts, weightData: data}, specs: out};
}
