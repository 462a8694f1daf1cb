/**
 * Keras 3 int8 and int4 models (`model.quantize("int8" | "int4")`) in the loader: a layer whose
 * saved weights are int8 (int4: packed two to an int8, its policy `Int4DTypePolicy` saying so
 * and giving the block size) becomes this package's int8 / int4 form (Dense -> QuantizedDense, Embedding -> QuantizedEmbedding,
 * EinsumDense / ReversibleEmbedding with `quantization_mode`), and a composite layer (keras-hub's
 * blocks, MultiHeadAttention) whose saved weights include int8 ones gets `quantization_mode` too.
 *
 * The weights decide, not the config: Keras 3.15 writes a `QuantizedDTypePolicy` (mode int8) on
 * the layers it quantized, but leaves a composite layer's own dtype float32 although its sublayers
 * were quantized (MultiHeadAttention's projections: Keras then cannot load its own file). A layer
 * with a float policy and int8 weights loads as int8; a layer with an int8 policy and float
 * weights loads as float; the policy decides only where the artifacts have no weights. Each int8
 * weight's scale (the last float weight after it in its folder) is checked against it before
 * anything is built.
 *
 * int8 weights come as bytes in the manifest (tfjs' one-byte dtype `bool`: the `.keras` reader
 * keeps HDF5 int8 datasets as bytes), or as int32 (a converted folder: tfjs has no int8 dtype);
 * either way they load as bytes, which is how the package's int8 layers hold them (ops/int8.ts).
 */
import * as tf from '@tensorflow/tfjs-core';

import {CompositeLayer} from '../layers/engine/composite_layer';
import {contractOf, snakeCase} from '../layers/engine/contract';
import {keras3PathKey} from '../layers/engine/keras3_paths';
import {badScaleText, badScaleValue, int8Replacement} from '../layers/core/quantization';
import {einsumInt8Plan, kernelScaleShape} from '../layers/core/einsum_int8';
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

/** A layer's quantization as its config gives it: int8, int4 with a block size, or none. */
type Quantized = {mode: 'int8'} | {mode: 'int4'; blockSize: number; reverseInputs: boolean};

/**
 * Keras 3.15's quantized dtype policies: `QuantizedDTypePolicy` of mode `int8`, and
 * `Int4DTypePolicy` of mode `int4/<block size>` (-1: per channel); the block size of an int4
 * `quantization_config` first (Keras' `get_block_size_for_layer`). Another mode is an error naming
 * the layer.
 */
export function quantizedPolicy(
  dtype: Json | undefined,
  quantizationConfig: Json | undefined,
  layer: string,
): Quantized | null {
  if (!isObj(dtype) || !isObj(dtype.config)) return null;
  if (dtype.class_name !== 'QuantizedDTypePolicy' && dtype.class_name !== 'Int4DTypePolicy') {
    return null;
  }
  const mode = dtype.config.mode;
  if (mode === 'int8') return {mode: 'int8'};
  if (mode === 'int4' && dtype.class_name === 'QuantizedDTypePolicy') {
    fail(
      `layer '${layer}' is int4 as Keras 3.11-3.13 wrote it (QuantizedDTypePolicy of mode ` +
        "'int4': per channel, packed along the input axis, its inputs quantized to int8); this " +
        "package reads Keras 3.14+'s int4 (Int4DTypePolicy): load the file in Keras 3.13, save " +
        'its float model, and quantize that with Keras 3.15 or quantize()',
    );
  }
  const m = typeof mode === 'string' ? /^int4(?:\/(-?\d+))?$/.exec(mode) : null;
  if (m == null) {
    fail(
      `layer '${layer}' is quantized as ${JSON.stringify(mode)}; this package reads int8 and ` +
        'int4 (int4/<block size>)',
    );
  }
  const qc =
    isObj(quantizationConfig) && isObj(quantizationConfig.config)
      ? quantizationConfig.config
      : null;
  const fromConfig = qc != null && 'block_size' in qc ? qc.block_size : undefined;
  const size = fromConfig !== undefined ? fromConfig : m[1] != null ? Number(m[1]) : 128;
  const blockSize = size == null ? -1 : Number(size);
  if (!(blockSize === -1 || (Number.isInteger(blockSize) && blockSize > 0))) {
    fail(
      `layer '${layer}': int4 block size ${JSON.stringify(size)}; expected a positive integer or -1`,
    );
  }
  // Keras' int4 ReversibleEmbedding quantizes its reverse inputs unless a config says otherwise
  const reverseInputs = qc == null || qc.activation_quantizer != null;
  return {mode: 'int4', blockSize, reverseInputs};
}

/** Whether the weights hold int8 values directly in `path` (`<path>vars/<i>`). */
function ownInt8(path: string, int32: string[]): boolean {
  return int32.some((s) => s.startsWith(`${path}vars/`));
}

/**
 * Rewrites the int8 layers of a model config (in place). `int32` are the paths of the int8
 * weights; `weighted` whether the artifacts have weights at all (else the policies decide).
 * `names` gets each layer's Keras 3 folder and name, for the scale check's errors.
 */
function rewriteLayers(
  config: Obj,
  prefix: string,
  int32: string[],
  weighted: boolean,
  names: Map<string, string>,
  equations: Map<string, string>,
  int4Paths: Set<string>,
): void {
  const counts = new Map<string, number>();
  for (const layer of (config.layers as Json[]) ?? []) {
    if (!isObj(layer) || !isObj(layer.config)) continue;
    const cls = layer.class_name as string;
    const c = layer.config;
    const path = `${prefix}layers/${keras3PathKey(cls, counts)}/`;
    if (MODEL_CLASSES.includes(cls)) {
      rewriteLayers(c, path, int32, weighted, names, equations, int4Paths);
      continue;
    }
    const name = String(layer.name ?? c.name);
    names.set(path, name);
    // an EinsumDense's equation decides its scale's axes (Keras' _get_kernel_scale_shape)
    if (typeof c.equation === 'string') equations.set(path, c.equation);
    const policy = quantizedPolicy(c.dtype, c.quantization_config, name);
    if (policy != null) {
      c.dtype =
        (isObj(c.dtype) && isObj(c.dtype.config) && c.dtype.config.source_name) || 'float32';
      delete c.quantization_config;
    }
    if (policy?.mode === 'int4') int4Paths.add(path);
    // the weights decide (Keras 3.15 leaves float policies on layers it quantized); int4 layers
    // are told by their policy (their packed values are int8 bytes too)
    if (weighted ? ownInt8(path, int32) : policy != null) {
      const int4 = policy?.mode === 'int4' ? policy : null;
      const replacement = int8Replacement(cls);
      if (replacement != null) {
        // the int8 class's options only (initializers and the like have nothing to initialize)
        const keep = new Set([...replacement.contract.configKeys.map(snakeCase), ...COMMON]);
        for (const k of Object.keys(c)) if (!keep.has(k)) delete c[k];
        layer.class_name = replacement.className;
        if (int4 != null)
          Object.assign(c, {quantization_mode: 'int4', int4_block_size: int4.blockSize});
      } else if (contractOf(cls)?.quantization?.kind === 'own') {
        c.quantization_mode = int4 != null ? 'int4' : 'int8';
        if (int4 != null) {
          c.int4_block_size = int4.blockSize;
          if (cls === 'ReversibleEmbedding') c.int4_reverse_input_quantization = int4.reverseInputs;
        }
      } else {
        fail(
          `layer '${name}' (${cls}) is ${int4 != null ? 'int4' : 'int8'}, which this package ` +
            `does not implement for ${cls}`,
        );
      }
    } else if (isComposite(cls) && int32.some((s) => s.startsWith(path))) {
      const perFolder = new Map<string, number>();
      for (const s of int32.filter((n) => n.startsWith(path))) {
        const folder = s.replace(/vars\/\d+$/, '');
        perFolder.set(folder, (perFolder.get(folder) ?? 0) + 1);
      }
      if ([...perFolder.values()].some((n) => n > 1)) {
        // two int8 weights in a sublayer (packed values and zero points): int4 sublayers, whose
        // block size the composite's config does not say
        fail(
          `layer '${name}' (${cls}) holds int4 sublayers, whose quantization its config does not ` +
            'give (Keras 3.15 cannot load such a file either); quantize the float model with ' +
            "quantize(model, 'int4') instead",
        );
      }
      c.quantization_mode = 'int8';
    }
  }
}

/** `[a, b]` as Keras prints shapes in errors. */
const shapeText = (s: readonly number[]) => `[${s.join(', ')}]`;

/**
 * The shapes the scale of the int8 weight `kernel` may have: an embedding table `[V, D]` (a
 * folder named `*embedding*`, its `vars/0`) has one scale per row, `[V]`; a kernel has one per
 * output channel, in the output's shape with 1s for the other axes: `[1, ..., 1, ...kernel's
 * trailing axes]` (Dense `[in, units]` -> `[units]`, EinsumDense `abc,cde->abde` `[c, d, e]` ->
 * `[1, 1, d, e]`), of the scale's rank.
 */
function scaleShapes(kernel: number[], rank: number, embedding: boolean): number[][] {
  if (embedding) return [[kernel[0]]];
  const out: number[][] = [];
  for (let b = 1; b < kernel.length; b++) {
    const tail = kernel.slice(b);
    if (tail.length <= rank) out.push([...new Array(rank - tail.length).fill(1), ...tail]);
  }
  return out.length > 0 ? out : [kernel.slice(-1)];
}

/**
 * Checks each int8 weight's scale against it: the scale is the last float weight after it in its
 * folder (Keras' order: kernel, bias, kernel_scale; embeddings, embeddings_scale); a missing scale
 * or a shape its kernel does not give is an error naming the layer, the expected and the received
 * shape.
 */
export function checkInt8Scales(
  specs: tf.io.WeightsManifestEntry[],
  isInt8: (s: tf.io.WeightsManifestEntry) => boolean,
  layerNames: ReadonlyMap<string, string> = new Map(),
  equations: ReadonlyMap<string, string> = new Map(),
  int4Paths: ReadonlySet<string> = new Set(),
): Array<{scale: tf.io.WeightsManifestEntry; what: string}> {
  const scales: Array<{scale: tf.io.WeightsManifestEntry; what: string}> = [];
  const folders = new Map<string, Array<{index: number; spec: tf.io.WeightsManifestEntry}>>();
  for (const spec of specs) {
    const m = /^(.*\/)vars\/(\d+)$/.exec(spec.name);
    if (m == null) continue;
    // an int4 layer's variables (packed values, zero points) are checked against the layer's
    // when they are bound
    if (int4Paths.has(m[1])) continue;
    const list = folders.get(m[1]) ?? [];
    list.push({index: Number(m[2]), spec});
    folders.set(m[1], list);
  }
  for (const [folder, list] of folders) {
    list.sort((a, b) => a.index - b.index);
    const owner = [...layerNames.keys()]
      .filter((p) => folder.startsWith(p))
      .sort((a, b) => b.length - a.length)[0];
    const layer = owner == null ? '' : `layer '${layerNames.get(owner)}' `;
    list.forEach(({index, spec}, i) => {
      if (!isInt8(spec)) return;
      let scale: tf.io.WeightsManifestEntry | null = null;
      for (let j = i + 1; j < list.length && !isInt8(list[j].spec); j++) scale = list[j].spec;
      const embedding = index === 0 && /embedding[^/]*\/$/.test(folder);
      const what = `${layer}(${folder}vars/${index}, int8 ${shapeText(spec.shape)})`;
      if (scale == null) {
        fail(
          `${what} has no float32 scale after it; expected ${embedding ? 'embeddings_scale' : 'kernel_scale'} (Keras' int8 weights)`,
        );
      }
      const equation = equations.get(folder);
      const plan = equation == null || index !== 0 ? null : einsumInt8Plan(equation);
      const allowed =
        plan != null && typeof plan !== 'string'
          ? [kernelScaleShape(plan, spec.shape)]
          : scaleShapes(spec.shape, scale.shape.length, embedding);
      if (!allowed.some((s) => shapeText(s) === shapeText(scale.shape))) {
        fail(
          `${what}: expected its scale ${scale.name} to have shape ` +
            `${allowed.map(shapeText).join(' or ')} (${embedding ? 'one per row of the table' : plan != null && typeof plan !== 'string' ? `the axes Keras derives from '${equation}'` : "the kernel's output axes"}), ` +
            `received ${shapeText(scale.shape)}`,
        );
      }
      scales.push({scale, what: `${what}: its scale ${scale.name}`});
    });
  }
  return scales;
}

/**
 * Checks the values of each int8 weight's scale in the artifacts' weight data (`scales` from
 * {@link checkInt8Scales}): positive and finite, as Keras writes them, else an error naming the
 * layer. A loader that reads the weights another way calls {@link checkInt8ScaleValues} per scale.
 */
function checkScaleData(
  specs: tf.io.WeightsManifestEntry[],
  data: ArrayBuffer,
  scales: Array<{scale: tf.io.WeightsManifestEntry; what: string}>,
): void {
  const offsets = new Map<string, number>();
  let offset = 0;
  for (const s of specs) {
    offsets.set(s.name, offset);
    offset += s.shape.reduce((p, d) => p * d, 1) * (s.dtype === 'bool' ? 1 : 4);
  }
  for (const {scale, what} of scales) {
    const at = offsets.get(scale.name) as number;
    const size = scale.shape.reduce((p, d) => p * d, 1);
    if (
      scale.dtype !== 'float32' ||
      scale.quantization != null ||
      at + size * 4 > data.byteLength
    ) {
      continue; // not plain float32 values: tfjs' loader names what is wrong with them
    }
    checkInt8ScaleValues(new Float32Array(data.slice(at, at + size * 4)), what);
  }
}

/**
 * Refuses scale values Keras could not have written (zero, negative, NaN, infinite), under
 * `loadKerasModel`'s name; `what` names the layer and the scale.
 */
export function checkInt8ScaleValues(values: ArrayLike<number>, what: string): void {
  const bad = badScaleValue(values);
  if (bad != null) fail(`${what}: ${badScaleText(bad)}`);
}

/** Whether a manifest entry holds a Keras 3 int8 weight (as bytes, or as int32). */
export function isKerasInt8Spec(s: tf.io.WeightsManifestEntry): boolean {
  return (s.dtype === 'bool' || s.dtype === 'int32') && s.name.startsWith('layers/');
}

/**
 * Rewrites int8 layers of a Keras 3 topology (in place) and returns the artifacts with int32
 * int8 weights turned into bytes; artifacts without int32 int8 weights keep their data as it is.
 */
export function rewriteInt8(
  modelConfig: Obj,
  artifacts: tf.io.ModelArtifacts,
  specs: tf.io.WeightsManifestEntry[],
): {artifacts: tf.io.ModelArtifacts; specs: tf.io.WeightsManifestEntry[]} {
  const isInt8 = isKerasInt8Spec;
  const int32 = specs.filter(isInt8);
  const names = new Map<string, string>();
  const equations = new Map<string, string>();
  const int4Paths = new Set<string>();
  rewriteLayers(
    modelConfig.config as Obj,
    '',
    int32.map((s) => s.name),
    specs.length > 0,
    names,
    equations,
    int4Paths,
  );
  const scales = checkInt8Scales(specs, isInt8, names, equations, int4Paths);
  if (int32.length === 0 || artifacts.weightData == null) return {artifacts, specs};
  const data = tf.io.CompositeArrayBuffer.join(artifacts.weightData);
  checkScaleData(specs, data, scales);
  if (!int32.some((s) => s.dtype === 'int32')) return {artifacts, specs};
  // int32 int8 values become bytes, in a new buffer (the artifacts' own is left as it is)
  const sizeOf = (s: tf.io.WeightsManifestEntry) => s.shape.reduce((p, d) => p * d, 1);
  const widthOf = (s: tf.io.WeightsManifestEntry) => (s.dtype === 'bool' ? 1 : 4);
  const bytes = new Uint8Array(
    specs.reduce((n, s) => n + sizeOf(s) * (isInt8(s) ? 1 : widthOf(s)), 0),
  );
  const view = new DataView(data);
  let from = 0;
  let to = 0;
  const out = specs.map((s) => {
    const size = sizeOf(s);
    if (s.quantization != null) {
      fail(`weight '${s.name}' is stored with tfjs weight quantization; expected plain weights`);
    }
    if (s.dtype === 'int32' && isInt8(s)) {
      for (let i = 0; i < size; i++) {
        const v = view.getInt32(from + i * 4, true);
        if (v < -128 || v > 127) {
          fail(
            `int8 weight '${s.name}' holds ${v} at flat index ${i}; expected values in [-128, 127]`,
          );
        }
        bytes[to + i] = v & 0xff;
      }
      from += size * 4;
      to += size;
      return {...s, dtype: 'bool' as const};
    }
    const n = size * widthOf(s);
    bytes.set(new Uint8Array(data, from, n), to);
    from += n;
    to += n;
    return s;
  });
  return {artifacts: {...artifacts, weightData: bytes.buffer}, specs: out};
}
