/**
 * Loading a model folder without a second copy of its weights (src/interop/load_in_place.ts):
 * the model is built once with zeros (sublayers and nested models included) and the weights
 * files, streamed, are written into the variables' own memory on cpu and wasm. The loaded model
 * predicts exactly what the saved one did (tfjs form, converted Keras 3 form, shards cut inside
 * weights, the checksum's `.prev` fallback); the tensor buffers alive during the load never hold
 * more than the model's weights; disposing the model (a tied embedding) frees every byte.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  convertKerasArtifacts,
  fileSystem,
  loadKerasHubPreset,
  loadKerasModel,
  PositionEmbedding,
  ReversibleEmbedding,
  saveKerasFile,
  toKeras3Artifacts,
  TransformerDecoder,
} from '../../src';
import {buildZeroModel, variableBytes} from '../../src/interop/load_in_place';
import {CHUNK_BYTES} from '../../src/io/safe_read';
import {useBackend} from '../helpers/backends';
import {saveToMemory} from '../helpers/save';

type S = tf.SymbolicTensor;

const V = 97;
const D = 16;

/** ReversibleEmbedding (tied: lookup and logits) + PositionEmbedding + 2 decoders + a norm. */
function tiedGpt(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const emb = new ReversibleEmbedding({inputDim: V, outputDim: D});
  const tokens = emb.apply(ids) as S;
  const pos = new PositionEmbedding({sequenceLength: 12}).apply(tokens) as S;
  let x = tf.layers.add().apply([tokens, pos]) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D, numHeads: 2}).apply(x) as S;
  x = new TransformerDecoder({intermediateDim: 3 * D, numHeads: 4, normalizeFirst: true}).apply(
    x,
  ) as S;
  x = tf.layers.layerNormalization().apply(x) as S;
  const model = tf.model({inputs: ids, outputs: emb.apply(x) as S});
  model.weights.forEach((w, i) => {
    const v = tf.randomNormal(w.shape as number[], 0, 0.3, 'float32', 7 + i);
    w.write(v);
    v.dispose();
  });
  return model;
}

const IDS = [[3, 1, 4, 1, 5, 9, 2, 6]];

function predict(model: tf.LayersModel): Float32Array {
  return tf.tidy(() =>
    (model.predict(tf.tensor2d(IDS, [1, IDS[0].length], 'int32')) as tf.Tensor).dataSync(),
  ) as Float32Array;
}

function tmp(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-attention-in-place-'));
}

interface EngineParts {
  state: {tensorInfo: WeakMap<object, {bytes: number; backend: unknown}>};
  trackTensor(a: tf.Tensor, backend: unknown): void;
  removeDataId(dataId: object, backend: unknown): void;
}

/**
 * `f` with the highest number of bytes of tensor buffers (each data buffer once, however many
 * tensors share it) allocated and not yet freed at any point while it runs.
 */
async function peakBufferBytes<T>(f: () => Promise<T>): Promise<{result: T; peak: number}> {
  const engine = tf.engine() as unknown as EngineParts;
  const {trackTensor, removeDataId} = engine;
  const info = engine.state.tensorInfo;
  let live = 0;
  let peak = 0;
  engine.trackTensor = function (this: unknown, a: tf.Tensor, backend: unknown) {
    const fresh = !info.has(a.dataId);
    trackTensor.call(this, a, backend);
    if (fresh && info.has(a.dataId)) {
      live += info.get(a.dataId)!.bytes;
      peak = Math.max(peak, live);
    }
  };
  engine.removeDataId = function (this: unknown, dataId: object, backend: unknown) {
    const had = info.get(dataId);
    removeDataId.call(this, dataId, backend);
    if (had != null && !info.has(dataId)) live -= had.bytes;
  };
  try {
    return {result: await f(), peak};
  } finally {
    engine.trackTensor = trackTensor;
    engine.removeDataId = removeDataId;
  }
}

const weightBytes = (m: tf.LayersModel) =>
  m.weights.reduce((n, w) => n + tf.util.sizeFromShape(w.shape as number[]) * 4, 0);

for (const backend of ['cpu', 'wasm']) {
  describe(`loading a folder in place [${backend}]`, () => {
    let source: tf.LayersModel;
    let expected: Float32Array;
    let sourceWeights: Float32Array[];
    let artifacts: tf.io.ModelArtifacts;
    const dirs: string[] = [];
    const saveTo = async (a: tf.io.ModelArtifacts) => {
      const dir = tmp();
      dirs.push(dir);
      await fileSystem(dir).save(a);
      return dir;
    };

    beforeAll(async () => {
      await useBackend(backend);
      source = tiedGpt();
      expected = predict(source);
      sourceWeights = source.getWeights().map((w) => w.dataSync() as Float32Array);
      artifacts = await saveToMemory(source);
    });
    afterAll(() => {
      source.dispose();
      for (const d of dirs) fs.rmSync(d, {recursive: true, force: true});
    });

    it('writes every weight into the memory of its variable (no assigned copies)', async () => {
      const model = await buildZeroModel(
        (artifacts.modelTopology as {model_config?: object}).model_config ??
          (artifacts.modelTopology as object),
      );
      expect(model.weights.length).toBeGreaterThan(20);
      for (const w of model.weights) expect(variableBytes(w)).not.toBeNull();
      model.dispose();
    });

    for (const form of ['tfjs', 'keras3'] as const) {
      it(`${form} form: predicts exactly what the saved model did, and holds no second copy`, async () => {
        const dir = await saveTo(form === 'tfjs' ? artifacts : await toKeras3Artifacts(artifacts));
        const before = tf.memory();
        const handler = fileSystem(dir);
        const wholeRead = jest.spyOn(handler, 'load');
        const {result: model, peak} = await peakBufferBytes(() => loadKerasModel(handler));
        // the weights were streamed: the handler's load(), which reads them whole, never ran
        expect(wholeRead).not.toHaveBeenCalled();
        const bytes = weightBytes(model);
        expect(bytes).toBe(sourceWeights.reduce((n, w) => n + w.byteLength, 0));
        // the tensor buffers alive at any point of the load are the model's weights, nothing more
        expect(peak).toBe(bytes);
        expect(tf.memory().numBytes - before.numBytes).toBe(bytes);
        model.getWeights().forEach((w, i) => expect(w.dataSync()).toEqual(sourceWeights[i]));
        expect(predict(model)).toEqual(expected);
        model.dispose();
        expect(tf.memory().numTensors).toBe(before.numTensors);
        expect(tf.memory().numBytes).toBe(before.numBytes);
      });
    }

    it('loads weights files cut inside weights (shards of 1000 bytes)', async () => {
      const dir = await saveTo(artifacts);
      const json = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8'));
      const data = fs.readFileSync(path.join(dir, 'weights.bin'));
      fs.rmSync(path.join(dir, 'weights.bin'));
      const paths: string[] = [];
      for (let at = 0; at < data.length; at += 1000) {
        const name = `group1-shard${paths.length + 1}`;
        fs.writeFileSync(path.join(dir, name), data.subarray(at, at + 1000));
        paths.push(name);
      }
      expect(paths.length).toBeGreaterThan(10);
      json.weightsManifest[0].paths = paths;
      fs.writeFileSync(path.join(dir, 'model.json'), JSON.stringify(json));
      const before = tf.memory().numTensors;
      const model = await loadKerasModel(fileSystem(dir));
      expect(predict(model)).toEqual(expected);
      model.dispose();
      expect(tf.memory().numTensors).toBe(before);
    });

    it('after an interrupted save loads the old weights from .prev; with none, leaves nothing', async () => {
      const dir = await saveTo(artifacts);
      const file = path.join(dir, 'weights.bin');
      fs.linkSync(file, `${file}.prev`);
      const other = Buffer.from(fs.readFileSync(file)).fill(2);
      fs.rmSync(file);
      fs.writeFileSync(file, other);
      const before = tf.memory();
      const model = await loadKerasModel(fileSystem(dir));
      expect(predict(model)).toEqual(expected);
      model.dispose();
      expect(tf.memory().numTensors).toBe(before.numTensors);
      fs.rmSync(`${file}.prev`);
      await expect(loadKerasModel(fileSystem(dir))).rejects.toThrow(
        /do not match .*model.json \(checksum\), and no earlier weights/,
      );
      // the model built for the mismatching weights was disposed: no half-written model remains
      expect(tf.memory().numTensors).toBe(before.numTensors);
      expect(tf.memory().numBytes).toBe(before.numBytes);
    });

    it('convertKerasArtifacts leaves nothing of its throwaway build (tied embedding included)', async () => {
      const keras3 = await toKeras3Artifacts(artifacts);
      const before = tf.memory();
      const converted = await convertKerasArtifacts(keras3);
      expect(converted.weightSpecs!.map((s) => s.name)).toEqual(
        artifacts.weightSpecs!.map((s) => s.name),
      );
      expect(tf.memory().numTensors).toBe(before.numTensors);
      expect(tf.memory().numBytes).toBe(before.numBytes);
    });

    it('a weights buffer from another IOHandler is written in place too', async () => {
      const before = tf.memory();
      const {result: model, peak} = await peakBufferBytes(() =>
        loadKerasModel(tf.io.fromMemory(artifacts)),
      );
      expect(peak).toBe(weightBytes(model));
      expect(predict(model)).toEqual(expected);
      model.dispose();
      expect(tf.memory().numTensors).toBe(before.numTensors);
    });
  });
}

describe('streaming a weights file', () => {
  beforeAll(() => useBackend('cpu'));

  it(`reads it in chunks of at most ${CHUNK_BYTES} bytes, a weight straddling chunks`, async () => {
    // a 5.1 MB embedding table: more than one chunk, cut inside the table
    const ids = tf.input({shape: [null], dtype: 'int32'});
    const emb = new ReversibleEmbedding({inputDim: 20000, outputDim: 64});
    const source = tf.model({inputs: ids, outputs: emb.apply(emb.apply(ids) as S) as S});
    const table = tf.randomNormal([20000, 64], 0, 1, 'float32', 3);
    source.weights[0].write(table);
    table.dispose();
    const want = tf.tidy(() =>
      (source.predict(tf.tensor2d([[0, 19999, 12345]], [1, 3], 'int32')) as tf.Tensor).dataSync(),
    );
    const dir = tmp();
    await source.save(fileSystem(dir));
    const size = fs.statSync(path.join(dir, 'weights.bin')).size;
    expect(size).toBeGreaterThan(CHUNK_BYTES);
    const probe = await fs.promises.open(path.join(dir, 'weights.bin'), 'r');
    const proto = Object.getPrototypeOf(probe) as {read: (...a: unknown[]) => Promise<unknown>};
    await probe.close();
    const original = proto.read;
    const reads: number[] = [];
    proto.read = function (this: unknown, ...a: unknown[]) {
      reads.push(a[2] as number);
      return original.apply(this, a);
    };
    let model: tf.LayersModel;
    try {
      model = await loadKerasModel(fileSystem(dir));
    } finally {
      proto.read = original;
    }
    expect(Math.max(...reads)).toBeLessThanOrEqual(CHUNK_BYTES);
    expect(reads.reduce((n, r) => n + r, 0)).toBe(size);
    const got = tf.tidy(() =>
      (model.predict(tf.tensor2d([[0, 19999, 12345]], [1, 3], 'int32')) as tf.Tensor).dataSync(),
    );
    expect(got).toEqual(want);
    model.dispose();
    source.dispose();
    fs.rmSync(dir, {recursive: true});
  });
});

describe('zeros build', () => {
  beforeAll(() => useBackend('cpu'));

  it('zero-initializes every weight, sublayers included, and restores the registry after', async () => {
    const model = tiedGpt();
    const topology = (await saveToMemory(model)).modelTopology as {model_config?: object};
    model.dispose();
    const zeros = await buildZeroModel(topology.model_config ?? topology);
    const nonZero = zeros.weights.filter((w) => tf.tidy(() => w.read().abs().max().dataSync()[0]));
    // LayerNormalization's gamma is ones (its initializer function is kept by tfjs)
    expect(nonZero.map((w) => w.originalName).every((n) => /gamma$/.test(n))).toBe(true);
    expect(zeros.weights.length - nonZero.length).toBeGreaterThan(20);
    zeros.dispose();
    const random = await tf.models.modelFromJSON({
      modelTopology: topology.model_config ?? topology,
    } as never);
    const kernels = random.weights.filter((w) => /kernel$/.test(w.originalName));
    expect(kernels.every((w) => tf.tidy(() => w.read().abs().max().dataSync()[0]) > 0)).toBe(true);
    random.dispose();
  });
});

describe('weights assigned from a tensor, one at a time', () => {
  beforeAll(() => useBackend('cpu'));

  it('a kernel with a constraint is assigned with it applied, as tfjs loads it', async () => {
    const x = tf.input({shape: [4]});
    const dense = tf.layers.dense({units: 3, kernelConstraint: 'nonNeg'});
    const source = tf.model({inputs: x, outputs: dense.apply(x) as S});
    const kernel = [
      [1, -2, 3],
      [-4, 5, -6],
      [7, -8, 9],
      [-1, 2, -3],
    ];
    // assigned past the constraint, so that the saved kernel has negative values
    const unconstrained = tf.tensor2d(kernel);
    (source.weights[0].read() as tf.Variable).assign(unconstrained);
    unconstrained.dispose();
    const dir = tmp();
    await source.save(fileSystem(dir));
    source.dispose();
    const {result: model, peak} = await peakBufferBytes(() => loadKerasModel(fileSystem(dir)));
    // nonNeg: max(0, w), element by element
    expect(model.weights[0].read().arraySync()).toEqual(
      kernel.map((r) => r.map((v) => Math.max(0, v))),
    );
    // the kernel's tensor (and its constrained copy) live beside the model for a moment
    expect(peak).toBeLessThanOrEqual(weightBytes(model) + 2 * 12 * 4);
    model.dispose();
    fs.rmSync(dir, {recursive: true});
  });
});

describe("writeWeight: an int8 preset's int8 datasets into the int8 layers' variables", () => {
  useBackend('cpu');

  it('holds them as bytes (one a value): saved by saveKerasFile and loaded back, the model predicts the same', async () => {
    const dir = path.join(__dirname, '..', 'fixtures', 'int8_files', 'gpt2_preset');
    const preset = await loadKerasHubPreset(dir);
    const model = preset.model;
    // the int8 layers' kernels and tables are variables of int8 bytes (dtype bool), one a value
    const int8 = model.weights.filter(
      (w) => /kernel|embeddings/.test(w.name) && !/scale|position_embedding/.test(w.name),
    );
    expect(int8.length).toBeGreaterThan(4);
    for (const w of int8) {
      const values = w.read().dataSync();
      expect([w.name, w.dtype, values.constructor.name, values.byteLength]).toEqual([
        w.name,
        'bool',
        'Uint8Array',
        w.read().size,
      ]);
    }
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'int8-preset-')), 'gpt2.keras');
    await saveKerasFile(model, file);
    const back = await loadKerasModel(file);
    const ids = tf.tensor2d([[1, 2, 3, 4, 5]], [1, 5], 'int32');
    const mask = tf.onesLike(ids);
    const [a, b] = [model, back].map((m) => (m.predict([ids, mask]) as tf.Tensor).dataSync());
    // the same weights and the same int8 kernels: equal within float32 rounding
    expect(Math.max(...Array.from(a, (v, i) => Math.abs(v - b[i])))).toBeLessThan(1e-5);
    expect(Math.max(...Array.from(a, Math.abs))).toBeGreaterThan(0.1);
    tf.dispose([ids, mask]);
    back.dispose();
    preset.dispose();
    fs.rmSync(path.dirname(file), {recursive: true});
  });
});
