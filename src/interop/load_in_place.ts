/**
 * Loading a model without a second copy of its weights. tfjs' `loadLayersModel` holds the whole
 * weights buffer, builds the model (zeros at the top level, random values in sublayers), decodes
 * every weight into a new tensor and then assigns it: three copies at the peak. Here the model is
 * built once with zeros for every weight, sublayers and nested models included
 * ({@link withFastInit}), and the weights' bytes, as they stream in, are written into the memory
 * of the variables themselves where the backend allows (cpu: the variable's typed array; wasm:
 * its bytes in tfjs-wasm's heap); elsewhere (webgl, webgpu, tfjs-node), and for weights that need
 * decoding (quantized, float16, a constraint), one weight at a time is collected, made a tensor
 * and assigned.
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, LayersModel, LayerVariable, models} from '@tensorflow/tfjs-layers';

import type {WeightsStream, WeightsTarget} from '../io/model_folder';
import {arenaTakes, currentWeightArena} from '../kernels/weight_arena';
import {entryBytes} from '../io/weight_bytes';

type FromConfig = (
  cls: unknown,
  config: tf.serialization.ConfigDict,
  customObjects?: tf.serialization.ConfigDict,
  fastWeightInit?: boolean,
) => unknown;

/** tfjs' model classes, whose `fromConfig` takes the fast-initialization flag. */
const MODEL_CLASSES = ['Model', 'Functional', 'Sequential'];

/**
 * Runs `build` with tfjs' fast weight initialization (zeros instead of each initializer) forced
 * for every model deserialized synchronously inside it, nested models included (tfjs passes the
 * flag to the top-level model's layers only; the package's composite layers pass it on to their
 * sublayers). The registry entries are restored before this returns.
 */
export function withFastInit<T>(build: () => T): T {
  const map = tf.serialization.SerializationMap.getMap().classNameMap as unknown as Record<
    string,
    [unknown, FromConfig] | undefined
  >;
  const saved: Array<[string, [unknown, FromConfig]]> = [];
  for (const name of MODEL_CLASSES) {
    const entry = map[name];
    if (entry == null) continue;
    saved.push([name, entry]);
    const [cls, fromConfig] = entry;
    map[name] = [cls, (c, config, custom) => fromConfig(c, config, custom, true)];
  }
  try {
    return build();
  } finally {
    for (const [name, entry] of saved) map[name] = entry;
  }
}

/** A model built from a topology with every weight zero-initialized (no random values drawn). */
export function buildZeroModel(topology: object): Promise<LayersModel> {
  // modelFromJSON deserializes before its first `await`, so inside withFastInit
  return withFastInit(() => models.modelFromJSON({modelTopology: topology} as never));
}

/**
 * Disposes every weight of a model once, shared layers included (tfjs' `model.dispose()` alone
 * keeps the weights of a layer called twice, e.g. a tied embedding, because its count of uses
 * stays above 0).
 */
export function disposeAllWeights(model: LayersModel): void {
  const seen = new Set<LayerVariable>();
  const visit = (layer: layers.Layer) => {
    for (const w of layer.weights) seen.add(w);
    if (layer instanceof LayersModel) layer.layers.forEach(visit);
  };
  visit(model);
  for (const w of seen) w.dispose();
}

/** The tfjs backends' internals read here to find a variable's memory. */
interface CpuData {
  data: {get(id: tf.DataId): {values?: unknown; refCount: number} | undefined};
}
interface WasmData {
  dataIdMap: {get(id: tf.DataId): {memoryOffset: number; refCount: number} | undefined};
  wasm: {HEAPU8: Uint8Array};
}

/**
 * The bytes of `v`'s memory, as a function giving a fresh view (the wasm heap may move when it
 * grows), or null where they cannot be written in place (another backend, a shared buffer).
 */
export function variableBytes(v: LayerVariable): (() => Uint8Array) | null {
  const t = v.read();
  const bytes = t.size * (t.dtype === 'bool' ? 1 : 4);
  if ((t.dtype !== 'float32' && t.dtype !== 'int32' && t.dtype !== 'bool') || bytes === 0) {
    return null;
  }
  // by name: `tf.findBackend('wasm')` would start tfjs-wasm's asynchronous set-up where wasm is
  // registered but not current, and `tf.backend()` throws until that ends (tfjs-node, webgl)
  const name = tf.getBackend();
  const backend = tf.backend();
  if (name === 'cpu') {
    const data = (backend as unknown as CpuData).data?.get(t.dataId);
    const values = data?.values;
    const typed =
      t.dtype === 'float32' ? Float32Array : t.dtype === 'bool' ? Uint8Array : Int32Array;
    if (data == null || data.refCount !== 1 || !(values instanceof typed)) return null;
    if (values.length !== t.size) return null;
    return () => new Uint8Array(values.buffer, values.byteOffset, bytes);
  }
  if (name === 'wasm') {
    const wasm = backend as unknown as WasmData;
    const data = wasm.dataIdMap?.get(t.dataId);
    if (data == null || data.refCount !== 1 || !(wasm.wasm?.HEAPU8 instanceof Uint8Array)) {
      return null;
    }
    return () => new Uint8Array(wasm.wasm.HEAPU8.buffer, data.memoryOffset, bytes);
  }
  return null;
}

/**
 * The bytes a weight of `dtype` (its file's, as tfjs holds it) is written into in place: the
 * memory of `v` where the backend allows and nothing decodes them (no quantization, no
 * constraint, the same dtype), else null (then one weight at a time is made a tensor and
 * assigned). The one rule the streams of model folders, `.keras` files and keras-hub presets
 * share.
 */
function inPlaceBytes(
  v: LayerVariable,
  dtype: tf.DataType,
  quantized = false,
): (() => Uint8Array) | null {
  return !quantized && v.constraint == null && v.dtype === dtype ? variableBytes(v) : null;
}

/**
 * Writes one weight into `v` (of `shape`, checked by the caller): `fill(out, at)` puts its
 * values (`dtype`, 4 bytes each; int8 bytes, `bool`, 1) into `out` from byte `at`. Straight into
 * the variable's memory where {@link inPlaceBytes} allows (no copy of the weight held), else
 * through one buffer of the weight, made a tensor (cast to the variable's dtype) and assigned.
 * int8 bytes go into an int8 layer's variable only (ops/int8.ts).
 */
export function writeWeight(
  v: LayerVariable,
  shape: readonly number[],
  dtype: 'float32' | 'int32' | 'bool',
  fill: (out: Uint8Array, at: number) => void,
): void {
  if ((dtype === 'bool') !== (v.dtype === 'bool')) {
    fail(
      `weight '${v.originalName}' (${v.dtype}) cannot take ${dtype === 'bool' ? 'int8' : dtype} ` +
        `values; expected ${v.dtype === 'bool' ? 'int8 values (an int8 layer)' : 'float or int32 values'}`,
    );
  }
  // loading into a weight arena (cpu, tfjs-node's int8 bytes): the tensor's values are a view of
  // its buffer there, which the compiled step reads where it is
  const arena = currentWeightArena();
  if (arena != null && v.constraint == null && v.dtype === dtype && arenaTakes(dtype)) {
    tf.tidy(() => {
      v.write(arena.holdWeight(shape, dtype as 'float32' | 'bool', fill));
    });
    return;
  }
  const view = inPlaceBytes(v, dtype);
  if (view != null) {
    fill(view(), 0);
    return;
  }
  const size = shape.reduce((p, d) => p * d, 1);
  const buffer = new Uint8Array(size * (dtype === 'bool' ? 1 : 4));
  fill(buffer, 0);
  if (dtype === 'bool') {
    tf.tidy(() => {
      v.write(tf.tensor(buffer, [...shape], 'bool'));
    });
    return;
  }
  tf.tidy(() => {
    const values =
      dtype === 'int32' ? new Int32Array(buffer.buffer) : new Float32Array(buffer.buffer);
    // whole numbers for a float32 variable (an int8 layer's kernel) become float32 values here:
    // tfjs' cast from int32 to float32 keeps the Int32Array, which readers of the variable's
    // values as float32 (saveKerasFile, the compiled step) would misread
    v.write(
      dtype === 'int32' && v.dtype === 'float32'
        ? tf.tensor(Float32Array.from(values), [...shape], 'float32')
        : tf.cast(tf.tensor(values, [...shape], dtype), v.dtype),
    );
  });
}

/** One manifest entry: where its bytes are in the stream and where they go. */
interface Entry {
  spec: tf.io.WeightsManifestEntry;
  start: number;
  end: number;
  /** Receives `part`, the entry's bytes from `offset`. */
  put(part: Uint8Array, offset: number): void;
  /** Called once all its bytes were put. */
  done(): void;
  finished: boolean;
}

function fail(message: string): never {
  throw new Error(`loading a model: ${message}`);
}

const sameShape = (a: readonly (number | null)[], b: readonly number[]) =>
  a.length === b.length && a.every((d, i) => d === b[i]);

/** The model's variable of each weight name, as tfjs' `loadWeights` matches them. */
function variablesByName(model: LayersModel): Map<string, LayerVariable> {
  const out = new Map<string, LayerVariable>();
  for (const layer of model.layers) {
    for (const w of layer.weights) {
      if (out.has(w.originalName)) fail(`the model has two weights named '${w.originalName}'`);
      out.set(w.originalName, w);
    }
  }
  return out;
}

/**
 * Whether tfjs' `loadWeights` would read these names as Keras' saved-model form (`dense/0`),
 * which it matches by position: such models keep tfjs' own path.
 */
export function numberedNames(specs: tf.io.WeightsManifestEntry[]): boolean {
  const first = specs.find((s) => s.group !== 'optimizer');
  if (first == null) return false;
  const parts = first.name.split('/');
  return !isNaN(parseInt(parts[parts.length - 1], 10));
}

/**
 * What the weights' bytes are written into: the variables of `model` (see the file's comment),
 * the optimizer's weights collected as tensors.
 */
export class ModelWeightsTarget implements WeightsTarget {
  private readonly entries: Entry[] = [];
  private cursor = 0;
  /** Optimizer weights, set after loading when the model has an optimizer. */
  readonly optimizerWeights: Array<{name: string; tensor: tf.Tensor}> = [];
  /** How many weights were written in place (the others were assigned). */
  inPlace = 0;

  constructor(
    readonly model: LayersModel,
    specs: tf.io.WeightsManifestEntry[],
  ) {
    const byName = variablesByName(model);
    const unset = new Set(byName.keys());
    let at = 0;
    for (const spec of specs) {
      const start = at;
      at += entryBytes(spec);
      if (spec.group === 'optimizer') {
        this.entries.push(this.staged(spec, start, at, (t) => this.keepOptimizer(spec, t)));
        continue;
      }
      let name = spec.name;
      if (!byName.has(name)) {
        // TF 2.2 writes `layer/cell/weight` for `layer/weight` (as tfjs' loadWeights reads it)
        const parts = name.split('/');
        name = parts
          .slice(0, -2)
          .concat(parts[parts.length - 1])
          .join('/');
      }
      const v = byName.get(name);
      if (v == null) {
        fail(
          `the weights list '${spec.name}', which no weight of the model is named; expected ` +
            `one of ${[...byName.keys()].slice(0, 8).join(', ')}${byName.size > 8 ? ', ...' : ''}`,
        );
      }
      if (!unset.delete(name)) fail(`the weights list the weight '${name}' more than once`);
      if (!sameShape(v.shape, spec.shape)) {
        fail(
          `weight '${name}' has the shape [${v.shape}] in the model, but the weights file holds ` +
            `[${spec.shape}]`,
        );
      }
      if (v.dtype !== spec.dtype) {
        fail(
          `weight '${name}' is ${v.dtype} in the model, but the weights file holds ${spec.dtype}`,
        );
      }
      const view = inPlaceBytes(v, v.dtype, spec.quantization != null);
      if (view != null) {
        this.inPlace++;
        this.entries.push({
          spec,
          start,
          end: at,
          put: (part, offset) => view().set(part, offset),
          done: () => undefined,
          finished: false,
        });
      } else {
        this.entries.push(this.staged(spec, start, at, (t) => v.write(t)));
      }
    }
    if (unset.size > 0) {
      fail(
        `${unset.size} of ${byName.size} weights of the model are not in the weights file: ` +
          [...unset].join(', '),
      );
    }
  }

  /** An entry whose bytes are collected, then decoded into a tensor handed to `use`. */
  private staged(
    spec: tf.io.WeightsManifestEntry,
    start: number,
    end: number,
    use: (t: tf.Tensor) => void,
  ): Entry {
    let buffer: Uint8Array | null = null;
    return {
      spec,
      start,
      end,
      put: (part, offset) => {
        buffer ??= new Uint8Array(end - start);
        buffer.set(part, offset);
      },
      done: () => {
        const bytes = buffer ?? new Uint8Array(end - start);
        buffer = null;
        const plain = {...spec};
        delete plain.group;
        const t = tf.io.decodeWeights(bytes.buffer as ArrayBuffer, [plain])[spec.name];
        try {
          use(t);
        } finally {
          if (!this.optimizerWeights.some((w) => w.tensor === t)) t.dispose();
        }
      },
      finished: false,
    };
  }

  private keepOptimizer(spec: tf.io.WeightsManifestEntry, t: tf.Tensor): void {
    this.optimizerWeights.push({name: spec.name, tensor: t});
  }

  readonly write = (bytes: Uint8Array, at: number): void => {
    const end = at + bytes.length;
    const {entries} = this;
    while (this.cursor < entries.length && entries[this.cursor].end <= at) this.cursor++;
    for (let i = this.cursor; i < entries.length && entries[i].start < end; i++) {
      const e = entries[i];
      const from = Math.max(at, e.start);
      const to = Math.min(end, e.end);
      if (to <= from) continue;
      e.put(bytes.subarray(from - at, to - at), from - e.start);
      if (to === e.end) {
        e.finished = true;
        e.done();
      }
    }
  };

  /** Completes the entries of no bytes; throws if any entry did not receive all its bytes. */
  finish(): void {
    for (const e of this.entries) {
      if (e.finished) continue;
      if (e.end !== e.start) fail(`the weights stream ended before the weight '${e.spec.name}'`);
      e.finished = true;
      e.done();
    }
  }

  readonly discard = (): void => {
    tf.dispose(this.optimizerWeights.map((w) => w.tensor));
    this.optimizerWeights.length = 0;
    disposeAllWeights(this.model);
  };
}

/** A stream over weights already in memory (an IOHandler's `weightData`). */
export function memoryStream(data: tf.io.WeightData): WeightsStream {
  const buffers = Array.isArray(data) ? data : [data];
  return async (open) => {
    const target = await open();
    try {
      let at = 0;
      for (const b of buffers) {
        target.write(new Uint8Array(b), at);
        at += b.byteLength;
      }
    } catch (e) {
      target.discard();
      throw e;
    }
    return target;
  };
}

/**
 * Builds the model of `artifacts` (a topology tfjs reads; `weightSpecs` set, `weightData` not
 * used) with zeros, then streams its weights into it in place. `rename` gives the weights' names
 * from the built model (Keras 3 paths), when they need it. As tfjs' loader: the training config
 * and user metadata are applied, optimizer weights set when the model has an optimizer.
 */
export async function loadInPlace(
  artifacts: tf.io.ModelArtifacts,
  stream: WeightsStream,
  rename:
    | ((model: LayersModel, specs: tf.io.WeightsManifestEntry[]) => tf.io.WeightsManifestEntry[])
    | null = null,
): Promise<LayersModel> {
  const raw = artifacts.modelTopology as {model_config?: object} | null;
  if (raw == null || raw instanceof ArrayBuffer) fail('expected a JSON model topology');
  const topology = raw.model_config ?? raw;
  const specs = artifacts.weightSpecs ?? [];
  const target = await stream(async () => {
    const model = await buildZeroModel(topology);
    try {
      return new ModelWeightsTarget(model, rename == null ? specs : rename(model, specs));
    } catch (e) {
      disposeAllWeights(model);
      throw e;
    }
  });
  const {model} = target;
  try {
    target.finish();
    if (artifacts.trainingConfig != null)
      model.loadTrainingConfig(artifacts.trainingConfig as never);
    if (artifacts.userDefinedMetadata != null) {
      model.setUserDefinedMetadata(artifacts.userDefinedMetadata);
    }
    if (model.optimizer != null && target.optimizerWeights.length > 0) {
      await model.optimizer.setWeights(target.optimizerWeights);
    }
  } catch (e) {
    target.discard();
    throw e;
  }
  tf.dispose(target.optimizerWeights.map((w) => w.tensor));
  return model;
}
