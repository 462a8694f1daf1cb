/**
 * Keras 3.15 int8 files read and written directly (fixtures/int8_files.py): `.keras` files of
 * quantized models (a functional model whose MultiHeadAttention config says float32 while its
 * projections' weights are int8; a decoder LM of keras-hub layers), a quantized GPT2CausalLM
 * preset (`save_to_preset`, keras-hub's DTypePolicyMap) built by buildKerasHubModel from the
 * weights the HDF5 reader gives, and saveKerasFile of a quantized model, which Keras 3.15 loaded
 * (fixtures/int8_files.py check). Predictions are compared with Keras' within 1e-4 (loading) and
 * 1e-5 (Keras loading the file written here).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  buildKerasHubModel,
  cachedDecodingRefusal,
  EinsumDense,
  generate,
  int8ValuesOf,
  loadKerasModel,
  MultiHeadAttention,
  quantize,
  QuantizedDense,
  QuantizedEmbedding,
  ReversibleEmbedding,
  saveKerasFile,
  TransformerDecoder,
  loadKerasHubPreset,
} from '../../src';
import * as int8Weights from '../../src/hub_models/int8_weights';
import {Hdf5Reader} from '../../src/io/hdf5_datasets';
import {kerasBytesArtifacts} from '../../src/interop/keras_file';
import {loadArtifacts} from '../../src/interop/keras_source';
import {describeBackends, useBackend} from '../helpers/backends';
import {maxAbsDiff} from '../helpers/close';

const DIR = path.join(__dirname, '..', 'fixtures', 'int8_files');
const TOL = 1e-4;
type S = tf.SymbolicTensor;

interface FileCase {
  inputs: number[][];
  outputs: number[];
  keras_loads_it: boolean;
  file: {layers: [string, string | null][]; weights: [string, number[], string][]};
}
interface Io {
  functional: FileCase;
  decoder_lm: FileCase;
  gpt2_preset: {
    inputs: {token_ids: number[][]; padding_mask: number[][]};
    outputs: number[];
    keras_loads_it: boolean;
    weights: [string, number[], string][];
    generate: {token_ids: number[][]; prompt_lengths: number[]; tokens: number[][]};
  };
}
const IO = JSON.parse(fs.readFileSync(path.join(DIR, 'io.json'), 'utf8')) as Io;

interface Weight {
  shape: number[];
  dtype: string;
  values: Float32Array | Int32Array | Int8Array;
}

/** Every dataset of an HDF5 file as the package's reader gives it (int8 datasets: dtype int8). */
async function h5Weights(file: string, prefix = ''): Promise<Map<string, Weight>> {
  const reader = await Hdf5Reader.open(new Uint8Array(fs.readFileSync(file)), file);
  const out = new Map<string, Weight>();
  for (const p of reader.datasetPaths('/')) {
    const d = reader.dataset(p);
    const bytes = new Uint8Array(d.bytes);
    reader.copy(d, bytes, 0);
    out.set(prefix + p, {
      shape: d.shape,
      dtype: d.fileType === '<i1' ? 'int8' : d.dtype,
      values:
        d.dtype === 'bool'
          ? new Int8Array(bytes.buffer)
          : d.dtype === 'int32'
            ? new Int32Array(bytes.buffer)
            : new Float32Array(bytes.buffer),
    });
  }
  return out;
}

function predictDiff(model: tf.LayersModel, inputs: tf.Tensor | tf.Tensor[], want: number[]) {
  const before = tf.memory().numTensors;
  const y = model.predict(inputs) as tf.Tensor;
  const d = maxAbsDiff(y, want);
  y.dispose();
  expect(tf.memory().numTensors).toBe(before);
  return d;
}

function gpt2Inputs(): tf.Tensor[] {
  const {token_ids, padding_mask} = IO.gpt2_preset.inputs;
  return [
    tf.tensor2d(token_ids, undefined, 'int32'),
    tf.tensor2d(padding_mask, undefined, 'int32'),
  ];
}

function taskConfig() {
  return JSON.parse(fs.readFileSync(path.join(DIR, 'gpt2_preset', 'task.json'), 'utf8')).config;
}

async function gpt2Weights(): Promise<Map<string, Weight>> {
  return h5Weights(path.join(DIR, 'gpt2_preset', 'model.weights.h5'), 'layers/gpt2_backbone/');
}

describeBackends('Keras 3 int8 files', (backend) => {
  it('functional.keras: int8 Embedding, Dense, EinsumDense and a MultiHeadAttention whose config says float32', async () => {
    expect(IO.functional.keras_loads_it).toBe(false); // Keras 3.15 cannot load its own file
    const mha = IO.functional.file.layers.find(([c]) => c === 'MultiHeadAttention');
    expect(mha?.[1]).toBe('DTypePolicy');
    const model = await loadKerasModel(path.join(DIR, 'functional.keras'));
    const classes = model.layers.map((l) => l.getClassName());
    expect(classes).toEqual([
      'InputLayer',
      'QuantizedEmbedding',
      'QuantizedDense',
      'EinsumDense',
      'MultiHeadAttention',
      'EinsumDense',
    ]);
    expect((model.layers[4] as MultiHeadAttention).quantizationMode).toBe('int8');
    expect((model.layers[5] as EinsumDense).quantizationMode).toBe('int8');
    const x = tf.tensor2d(IO.functional.inputs, undefined, 'int32');
    const d = predictDiff(model, x, IO.functional.outputs);
    console.log(`int8 functional.keras [${backend}]: max |ours - Keras| ${d}`);
    expect(d).toBeLessThan(TOL);
    x.dispose();
    model.dispose();
  });

  it('decoder_lm.keras: int8 TransformerDecoders (float policies), a float ReversibleEmbedding', async () => {
    const model = await loadKerasModel(path.join(DIR, 'decoder_lm.keras'));
    const decoders = model.layers.filter((l) => l instanceof TransformerDecoder);
    expect(decoders.map((l) => (l as TransformerDecoder).quantizationMode)).toEqual([
      'int8',
      'int8',
    ]);
    // keras-hub's ReversibleEmbedding is left float by Keras' model.quantize: its weights are
    const emb = model.layers.find((l) => l instanceof ReversibleEmbedding) as ReversibleEmbedding;
    expect(emb.quantizationMode).toBeNull();
    const x = tf.tensor2d(IO.decoder_lm.inputs, undefined, 'int32');
    const d = predictDiff(model, x, IO.decoder_lm.outputs);
    console.log(`int8 decoder_lm.keras [${backend}]: max |ours - Keras| ${d}`);
    expect(d).toBeLessThan(TOL);
    x.dispose();
    model.dispose();
  });

  it("gpt2_preset: buildKerasHubModel on the preset's int8 weights predicts Keras' int8 logits", async () => {
    expect(IO.gpt2_preset.keras_loads_it).toBe(true);
    const weights = await gpt2Weights();
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('GPT2CausalLM', taskConfig(), weights);
    const emb = model.layers.find((l) => l.name === 'token_embedding') as ReversibleEmbedding;
    expect(emb.quantizationMode).toBe('int8');
    const decoders = model.layers.filter((l) => l instanceof TransformerDecoder);
    expect(decoders.map((l) => (l as TransformerDecoder).quantizationMode)).toEqual([
      'int8',
      'int8',
    ]);
    const inputs = gpt2Inputs();
    const d = predictDiff(model, inputs, IO.gpt2_preset.outputs);
    console.log(`int8 gpt2 preset [${backend}]: max |ours - Keras| ${d}`);
    expect(d).toBeLessThan(TOL);
    tf.dispose(inputs);
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('Keras 3 int8 files: generation', () => {
  beforeAll(() => useBackend('cpu'));

  it("gpt2_preset: greedy generate with the cache gives keras-hub's int8 generate tokens", async () => {
    const g = IO.gpt2_preset.generate;
    // the weights as a loader passing the reader's dtype gives them: int8 datasets as int32
    const weights = await gpt2Weights();
    for (const [p, w] of weights) if (w.dtype === 'int8') weights.set(p, {...w, dtype: 'int32'});
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('GPT2CausalLM', taskConfig(), weights);
    expect(cachedDecodingRefusal(model)).toBeNull();
    const fallbacks: string[] = [];
    const ids = await generate(model, g.token_ids, {
      maxLength: g.token_ids[0].length,
      promptLengths: g.prompt_lengths,
      useCache: true,
      onFallback: (why) => fallbacks.push(why),
    });
    expect(fallbacks).toEqual([]);
    expect(await ids.array()).toEqual(g.tokens);
    ids.dispose();
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
  it('gpt2_preset through loadKerasHubPreset (the folder, as a user loads it): int8 layers, the same tokens', async () => {
    const g = IO.gpt2_preset.generate;
    const before = tf.memory().numTensors;
    const {model, backbone, tokenizer} = await loadKerasHubPreset(path.join(DIR, 'gpt2_preset'));
    expect(tokenizer).toBeNull(); // this preset was saved without its preprocessor
    const emb = model.layers.find((l) => l.name === 'token_embedding') as ReversibleEmbedding;
    expect(emb.quantizationMode).toBe('int8');
    const ids = await generate(model, g.token_ids, {
      maxLength: g.token_ids[0].length,
      promptLengths: g.prompt_lengths,
      useCache: true,
    });
    expect(await ids.array()).toEqual(g.tokens);
    ids.dispose();
    model.dispose();
    backbone.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('Keras 3 int8 presets: the int8 form built directly', () => {
  beforeAll(() => useBackend('cpu'));
  afterEach(() => jest.restoreAllMocks());

  it('a wholly int8 preset builds its int8 form directly (no float model built first); one quantized in part goes through the float model', async () => {
    const fallback = jest.spyOn(int8Weights, 'int8HubModel');
    const weights = await gpt2Weights();
    const before = tf.memory().numTensors;
    const model = buildKerasHubModel('GPT2CausalLM', taskConfig(), weights);
    expect(fallback).not.toHaveBeenCalled();
    const emb = model.layers.find((l) => l.name === 'token_embedding') as ReversibleEmbedding;
    expect(emb.embeddings?.read().dtype).toBe('bool');
    model.dispose();
    expect(tf.memory().numTensors).toBe(before);
    // the token embedding float (its int8 values / its scale), the rest int8: the direct int8
    // form does not match, the float model's int8 layers are rebuilt
    const table = 'layers/gpt2_backbone/layers/reversible_embedding/vars/0';
    const scale = 'layers/gpt2_backbone/layers/reversible_embedding/vars/1';
    const q = weights.get(table) as Weight;
    const s = (weights.get(scale) as Weight).values;
    const D = q.shape[1];
    weights.set(table, {
      shape: q.shape,
      dtype: 'float32',
      values: Float32Array.from(q.values, (v, i) => v / s[Math.floor(i / D)]),
    });
    weights.delete(scale);
    const part = buildKerasHubModel('GPT2CausalLM', taskConfig(), weights);
    expect(fallback).toHaveBeenCalledTimes(1);
    const floatEmb = part.layers.find((l) => l.name === 'token_embedding') as ReversibleEmbedding;
    expect(floatEmb.quantizationMode).toBeNull();
    const decoders = part.layers.filter((l) => l instanceof TransformerDecoder);
    expect(decoders.map((l) => (l as TransformerDecoder).quantizationMode)).toEqual([
      'int8',
      'int8',
    ]);
    const inputs = gpt2Inputs();
    const d = predictDiff(part, inputs, IO.gpt2_preset.outputs);
    expect(d).toBeLessThan(0.05); // float tied logits against Keras' int8 ones
    tf.dispose(inputs);
    part.dispose();
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('Keras 3 int8 files: what is read and checked', () => {
  beforeAll(() => useBackend('cpu'));

  it("the HDF5 reader gives Keras' int8 datasets (<i1) as bytes, one per value (bool), in [-127, 127]", async () => {
    const weights = await gpt2Weights();
    const int8 = [...weights].filter(([, w]) => w.dtype === 'int8');
    const listed = IO.gpt2_preset.weights.filter(([, , dtype]) => dtype === 'int8');
    expect(int8.map(([p, w]) => [p.replace('layers/gpt2_backbone/', ''), w.shape])).toEqual(
      listed.map(([p, shape]) => [p, shape]),
    );
    for (const [, w] of int8) {
      expect(w.values).toBeInstanceOf(Int8Array);
      expect(w.values.length).toBe(w.shape.reduce((a, b) => a * b, 1));
      expect(Math.max(...w.values.map(Math.abs))).toBeLessThanOrEqual(127);
      expect(Math.max(...w.values.map(Math.abs))).toBeGreaterThan(100); // abs-max: 127 per row
    }
  });

  it('a Dense whose config says float32 but whose weights are int8 loads as int8 (the weights decide)', async () => {
    const bytes = new Uint8Array(fs.readFileSync(path.join(DIR, 'functional.keras')));
    const artifacts = await kerasBytesArtifacts(bytes, 'functional.keras');
    const config = (artifacts.modelTopology as {model_config: {config: {layers: unknown[]}}})
      .model_config.config;
    const dense = config.layers[2] as {class_name: string; config: {dtype: unknown}};
    expect(dense.class_name).toBe('Dense');
    dense.config.dtype = {class_name: 'DTypePolicy', config: {name: 'float32'}};
    const model = await loadArtifacts(artifacts);
    expect(model.layers[2]).toBeInstanceOf(QuantizedDense);
    expect(model.layers[1]).toBeInstanceOf(QuantizedEmbedding);
    const x = tf.tensor2d(IO.functional.inputs, undefined, 'int32');
    expect(predictDiff(model, x, IO.functional.outputs)).toBeLessThan(TOL);
    x.dispose();
    model.dispose();
  });

  it('a scale whose shape its kernel does not give is refused, naming the layer and both shapes', async () => {
    const bytes = new Uint8Array(fs.readFileSync(path.join(DIR, 'functional.keras')));
    const artifacts = await kerasBytesArtifacts(bytes, 'functional.keras');
    const spec = (artifacts.weightSpecs ?? []).find(
      (s) => s.name === 'layers/multi_head_attention/query_dense/vars/2',
    ) as tf.io.WeightsManifestEntry;
    expect(spec.shape).toEqual([1, 1, 2, 8]);
    spec.shape = [1, 1, 8, 2]; // same size, another shape
    await expect(loadArtifacts(artifacts)).rejects.toThrow(
      "loadKerasModel: layer 'multi_head_attention' (layers/multi_head_attention/query_dense/" +
        'vars/0, int8 [16, 2, 8]): expected its scale layers/multi_head_attention/query_dense/' +
        "vars/2 to have shape [1, 1, 2, 8] or [1, 1, 1, 8] (the kernel's output axes), " +
        'received [1, 1, 8, 2]',
    );
  });

  it('a scale of 0, NaN, Infinity or a negative value is refused, naming the layer (Keras writes 127 / max|w|)', async () => {
    const bytes = new Uint8Array(fs.readFileSync(path.join(DIR, 'functional.keras')));
    const name = 'layers/multi_head_attention/query_dense/vars/2';
    for (const bad of [0, NaN, Infinity, -0.5]) {
      const artifacts = await kerasBytesArtifacts(bytes, 'functional.keras');
      const data = tf.io.CompositeArrayBuffer.join(artifacts.weightData ?? []).slice(0);
      let offset = 0; // the scale's bytes: int8 weights 1 byte a value, the others 4
      for (const s of artifacts.weightSpecs ?? []) {
        if (s.name === name) break;
        offset += s.shape.reduce((a, b) => a * b, 1) * (s.dtype === 'bool' ? 1 : 4);
      }
      new DataView(data).setFloat32(offset + 4 * 5, bad, true); // its sixth value
      const before = tf.memory().numTensors;
      await expect(loadArtifacts({...artifacts, weightData: data})).rejects.toThrow(
        "loadKerasModel: layer 'multi_head_attention' (layers/multi_head_attention/query_dense/" +
          `vars/0, int8 [16, 2, 8]): its scale ${name}: expected positive finite scale values ` +
          `(Keras writes 127 / max|w|), received ${String(bad)} at flat index 5`,
      );
      expect(tf.memory().numTensors).toBe(before);
    }
  });

  it('an int8 preset scale of 0, NaN, Infinity or a negative value is refused, naming the layer', async () => {
    const p =
      'layers/gpt2_backbone/layers/transformer_decoder/_self_attention_layer/key_dense/vars/2';
    for (const bad of [0, NaN, -Infinity, -2]) {
      const weights = await gpt2Weights();
      const scale = weights.get(p) as Weight;
      const values = Float32Array.from(scale.values);
      values[3] = bad;
      weights.set(p, {...scale, values});
      const before = tf.memory().numTensors;
      expect(() => buildKerasHubModel('GPT2CausalLM', taskConfig(), weights)).toThrow(
        `GPT2CausalLM: layer 'key': the scale ${p} of the int8 weight ` +
          'layers/gpt2_backbone/layers/transformer_decoder/_self_attention_layer/key_dense/' +
          'vars/0 expected positive finite scale values (Keras writes 127 / max|w|), received ' +
          `${String(bad)} at flat index 3`,
      );
      expect(tf.memory().numTensors).toBe(before);
    }
  });

  it('an int8 preset scale of the wrong shape is refused, naming the layer and both shapes', async () => {
    const weights = await gpt2Weights();
    const p =
      'layers/gpt2_backbone/layers/transformer_decoder/_self_attention_layer/key_dense/vars/2';
    const scale = weights.get(p) as Weight;
    expect(scale.shape).toEqual([1, 1, 4, 8]);
    weights.set(p, {...scale, shape: [1, 1, 8, 4]});
    const before = tf.memory().numTensors;
    expect(() => buildKerasHubModel('GPT2CausalLM', taskConfig(), weights)).toThrow(
      `GPT2CausalLM: layer 'key': the scale ${p} of the int8 weight ` +
        'layers/gpt2_backbone/layers/transformer_decoder/_self_attention_layer/key_dense/vars/0 ' +
        '[32, 4, 8] expected shape [1, 1, 4, 8], received [1, 1, 8, 4]',
    );
    expect(tf.memory().numTensors).toBe(before);
  });

  it('an int8 layer with a float kernel, and a policy map entry that is not int8, are refused', async () => {
    const weights = await gpt2Weights();
    const p = 'layers/gpt2_backbone/layers/transformer_decoder/_feedforward_output_dense/vars/0';
    const w = weights.get(p) as Weight;
    weights.set(p, {shape: w.shape, dtype: 'float32', values: Float32Array.from(w.values)});
    expect(() => buildKerasHubModel('GPT2CausalLM', taskConfig(), weights)).toThrow(
      `expected int8 values, received float32`,
    );
    const config = taskConfig();
    const map = config.backbone.config.dtype.config.policy_map;
    map['transformer_layer_1/self_attention/query'].config.mode = 'int4';
    expect(() => buildKerasHubModel('GPT2CausalLM', config, new Map())).toThrow(
      "GPT2Backbone: config dtype of 'transformer_layer_1/self_attention/query' is ",
    );
  });
});

const SAVED = path.join(DIR, 'saved');
const DATE = new Date(Date.UTC(2026, 11, 4, 12, 0, 0));
const SAVE_IDS = [
  [1, 2, 3, 4, 5, 6],
  [7, 8, 9, 1, 2, 3],
];

/** Embedding, Dense (relu), EinsumDense abc,cd->abd, Dense: what Keras 3.15 loads back as int8. */
function floatModel(): tf.LayersModel {
  const ids = tf.input({shape: [6], dtype: 'int32', name: 'ids'});
  let x = tf.layers.embedding({inputDim: 12, outputDim: 8, name: 'embed'}).apply(ids) as S;
  x = tf.layers.dense({units: 16, activation: 'relu', name: 'hidden'}).apply(x) as S;
  x = new EinsumDense({
    equation: 'abc,cd->abd',
    outputShape: [null, 8],
    biasAxes: 'd',
    name: 'proj',
  }).apply(x) as S;
  const y = tf.layers.dense({units: 5, name: 'logits'}).apply(x) as S;
  const m = tf.model({inputs: ids, outputs: y});
  m.setWeights(m.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.4, 'float32', 31 + i)));
  return m;
}

describe('saveKerasFile of a quantized model', () => {
  let q: tf.LayersModel;
  let bytes: Uint8Array;
  beforeAll(async () => {
    await useBackend('cpu');
    const float = floatModel();
    q = quantize(float, 'int8');
    float.dispose();
    const before = tf.memory().numTensors;
    bytes = await saveKerasFile(q, undefined, {date: DATE});
    expect(tf.memory().numTensors).toBe(before);
    if (process.env.SAVE_KERAS_FIXTURE === '1') {
      fs.mkdirSync(SAVED, {recursive: true});
      fs.writeFileSync(path.join(SAVED, 'model.keras'), bytes);
    }
  });
  afterAll(() => q.dispose());

  it('writes the file Keras 3.15 loaded as int8, predicting what Keras predicted within 1e-5', () => {
    expect(Buffer.from(bytes).equals(fs.readFileSync(path.join(SAVED, 'model.keras')))).toBe(true);
    const keras = JSON.parse(fs.readFileSync(path.join(SAVED, 'keras_predictions.json'), 'utf8'));
    expect(keras.ids).toEqual(SAVE_IDS);
    expect(keras.policies).toEqual({
      ids: 'float32', // Keras' InputLayer policy
      embed: 'int8_from_float32',
      hidden: 'int8_from_float32',
      proj: 'int8_from_float32',
      logits: 'int8_from_float32',
    });
    const x = tf.tensor2d(SAVE_IDS, undefined, 'int32');
    const d = predictDiff(q, x, keras.predictions);
    console.log(`saveKerasFile int8: max |ours - Keras loading our file| ${d}`);
    expect(d).toBeLessThan(1e-5);
    x.dispose();
  });

  it("holds int8 kernels and float32 scales in Keras' order, with QuantizedDTypePolicy configs", async () => {
    const artifacts = await kerasBytesArtifacts(bytes, 'saved.keras');
    const layers = (
      artifacts.modelTopology as {
        model_config: {config: {layers: Array<{class_name: string; config: {dtype: unknown}}>}};
      }
    ).model_config.config.layers;
    expect(layers.map((l) => l.class_name)).toEqual([
      'InputLayer',
      'Embedding',
      'Dense',
      'EinsumDense',
      'Dense',
    ]);
    for (const l of layers.slice(1)) {
      expect(l.config.dtype).toEqual({
        class_name: 'QuantizedDTypePolicy',
        config: {mode: 'int8', source_name: 'float32'},
      });
    }
    const zip = await import('../../src/io/zip_entries');
    const entries = zip.zipEntries(bytes, 'saved.keras');
    const h5 = await zip.zipEntryBytes(bytes, entries.get('model.weights.h5')!, 2 ** 30);
    const reader = await Hdf5Reader.open(h5, 'model.weights.h5');
    const listing = reader.datasetPaths('/').map((p) => {
      const d = reader.dataset(p);
      return [p, d.fileType, d.shape];
    });
    expect(listing).toEqual([
      ['layers/dense/vars/0', '<i1', [8, 16]],
      ['layers/dense/vars/1', '<f4', [16]],
      ['layers/dense/vars/2', '<f4', [16]],
      ['layers/dense_1/vars/0', '<i1', [8, 5]],
      ['layers/dense_1/vars/1', '<f4', [5]],
      ['layers/dense_1/vars/2', '<f4', [5]],
      ['layers/einsum_dense/vars/0', '<i1', [16, 8]],
      ['layers/einsum_dense/vars/1', '<f4', [8]],
      ['layers/einsum_dense/vars/2', '<f4', [1, 1, 8]],
      ['layers/embedding/vars/0', '<i1', [12, 8]],
      ['layers/embedding/vars/1', '<f4', [12]],
    ]);
    // the int8 values are the model's kernel values
    const hidden = q.getLayer('hidden') as QuantizedDense;
    const kernel = reader.dataset('layers/dense/vars/0');
    const out = new Uint8Array(kernel.bytes);
    reader.copy(kernel, out, 0);
    expect(Array.from(new Int8Array(out.buffer))).toEqual(
      Array.from(int8ValuesOf((hidden.kernel as tf.LayerVariable).read())),
    );
  });
});
