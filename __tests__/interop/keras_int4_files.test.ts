/**
 * Keras 3.15 int4 files read directly (fixtures/int4_files.py): `.keras` files of a functional
 * model quantized with `model.quantize("int4")` at block 128 (one short group per layer), block 8
 * (several groups, a short last one) and per channel (`block_size=-1`): Dense, three EinsumDense
 * equations (one whose contracted kernel axis is not the first: Keras reshapes, not transposes),
 * Embedding and keras-hub ReversibleEmbedding tied and untied; keras-hub int4 presets (Llama 3 at
 * blocks 128 and 8, GPT-2) with their greedy generations; the package's JavaScript int4
 * quantizer against the bytes, scales, zero points and group indices Keras wrote, bit for bit;
 * and Keras 3.13's int4 layout (per channel, packed along the input axis) refused, naming the
 * version. Predictions within 1e-4 of Keras' (the files reloaded in Keras: the reference).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  buildKerasHubModel,
  EinsumDense,
  generate,
  loadKerasHubPreset,
  loadKerasModel,
  QuantizedDense,
  QuantizedEmbedding,
  ReversibleEmbedding,
} from '../../src';
import {Hdf5Reader} from '../../src/io/hdf5_datasets';
import {COMPILED_STEP} from '../../src/kernels/flags';
import {checkInt4Scales} from '../../src/layers/core/quantize_model';
import {Int4Layout, quantizeInt4} from '../../src/ops/int4';
import {describeBackends, useBackend} from '../helpers/backends';
import {maxAbsDiff} from '../helpers/close';

const DIR = path.join(__dirname, '..', 'fixtures', 'int4_files');
const TOL = 1e-4;

interface LayerCase {
  class: string;
  vars: [number, string, number[], string][];
  saved: Record<string, number[]>;
  flattening?: {rows: number; columns: number};
}
interface FileCase {
  file: string;
  block_size: number | null;
  outputs: Record<string, number[]>;
  layers: Record<string, LayerCase>;
}
interface PresetCase {
  dir: string;
  block_size: number;
  inputs: {token_ids: number[][]; padding_mask: number[][]};
  outputs: number[];
  generate: {token_ids: number[][]; prompt_lengths: number[]; tokens: number[][]};
}
interface Io {
  output_names: string[];
  inputs: {x: number[]; x_shape: number[]; ids: number[][]};
  float_weights: Record<string, Record<string, {shape: number[]; values: number[]}>>;
  block128: FileCase;
  block8: FileCase;
  per_channel: FileCase;
  presets: Record<string, PresetCase>;
}
const IO = JSON.parse(fs.readFileSync(path.join(DIR, 'io.json'), 'utf8')) as Io;
const FILES = ['block128', 'block8', 'per_channel'] as const;

function fileInputs(): tf.Tensor[] {
  return [
    tf.tensor(IO.inputs.x, IO.inputs.x_shape),
    tf.tensor2d(IO.inputs.ids, undefined, 'int32'),
  ];
}

describeBackends('Keras 3 int4 files', (backend) => {
  for (const name of FILES) {
    it(`${name}.keras: int4 Dense, EinsumDense (3 equations), Embedding, ReversibleEmbedding tied and untied`, async () => {
      const c = IO[name];
      const model = await loadKerasModel(path.join(DIR, c.file));
      const dense = model.layers.find((l) => l instanceof QuantizedDense) as QuantizedDense;
      expect(dense.quantizationMode).toBe('int4');
      expect(dense.int4BlockSize).toBe(c.block_size ?? -1);
      const emb = model.layers.find((l) => l instanceof QuantizedEmbedding) as QuantizedEmbedding;
      expect(emb.quantizationMode).toBe('int4');
      const einsums = model.layers.filter((l) => l instanceof EinsumDense) as EinsumDense[];
      expect(einsums.map((l) => l.quantizationMode)).toEqual(['int4', 'int4', 'int4']);
      const reversible = model.layers.filter(
        (l) => l instanceof ReversibleEmbedding,
      ) as ReversibleEmbedding[];
      // their quantization config was saved: no int8 input quantizer on the reverse call
      expect(reversible.map((l) => l.int4ReverseInputQuantization)).toEqual([false, false]);
      const inputs = fileInputs();
      const before = tf.memory().numTensors;
      const ys = model.predict(inputs) as tf.Tensor[];
      // the model's outputs, in Keras' order
      const diffs = IO.output_names.map((o, i) => maxAbsDiff(ys[i], c.outputs[o]));
      console.log(`int4 ${name}.keras [${backend}]: max |ours - Keras| ${diffs.join(', ')}`);
      for (const d of diffs) expect(d).toBeLessThan(TOL);
      tf.dispose(ys);
      expect(tf.memory().numTensors).toBe(before);
      tf.dispose(inputs);
      model.dispose();
    });
  }

  it("int4 presets: keras-hub's Llama 3 (blocks 128 and 8) and GPT-2 logits", async () => {
    for (const [name, p] of Object.entries(IO.presets)) {
      const before = tf.memory().numTensors;
      const {model, backbone} = await loadKerasHubPreset(path.join(DIR, p.dir));
      const emb = model.layers.find((l) => l.name === 'token_embedding') as ReversibleEmbedding;
      expect(emb.quantizationMode).toBe('int4');
      expect(emb.int4BlockSize).toBe(p.block_size);
      // reloaded without a quantization config, Keras quantizes the tied logits' inputs to int8
      expect(emb.int4ReverseInputQuantization).toBe(true);
      const inputs = [
        tf.tensor2d(p.inputs.token_ids, undefined, 'int32'),
        tf.tensor2d(p.inputs.padding_mask, undefined, 'int32'),
      ];
      const y = model.predict(inputs) as tf.Tensor;
      const d = maxAbsDiff(y, p.outputs);
      console.log(`int4 preset ${name} [${backend}]: max |ours - Keras| ${d}`);
      expect(d).toBeLessThan(TOL);
      tf.dispose([...inputs, y]);
      model.dispose();
      backbone.dispose();
      expect(tf.memory().numTensors).toBe(before);
    }
  });
});

describe('Keras 3 int4 presets: generation', () => {
  for (const backend of ['cpu', 'wasm']) {
    it(`[${backend}] greedy generate on the compiled step gives keras-hub's int4 tokens (Llama 3 at blocks 128 and 8, GPT-2)`, async () => {
      await useBackend(backend);
      for (const p of Object.values(IO.presets)) {
        const g = p.generate;
        const {model, backbone} = await loadKerasHubPreset(path.join(DIR, p.dir));
        const before = tf.memory().numTensors;
        const reasons: Array<string | null> = [];
        const ids = await generate(model, g.token_ids, {
          maxLength: g.token_ids[0].length,
          promptLengths: g.prompt_lengths,
          useCache: true,
          onCompile: (report) => reasons.push(report.reason),
        });
        expect(reasons).toEqual([null]); // the compiled step ran (no reason to fall back)
        expect(await ids.array()).toEqual(g.tokens);
        // and the eager stepper gives the same tokens
        tf.env().set(COMPILED_STEP, false);
        let eager: tf.Tensor;
        try {
          eager = await generate(model, g.token_ids, {
            maxLength: g.token_ids[0].length,
            promptLengths: g.prompt_lengths,
            useCache: true,
          });
        } finally {
          tf.env().set(COMPILED_STEP, true);
        }
        expect(await eager.array()).toEqual(g.tokens);
        tf.dispose([ids, eager]);
        expect(tf.memory().numTensors).toBe(before);
        model.dispose();
        backbone.dispose();
      }
    });
  }
});

describe("the JavaScript int4 quantizer against Keras' quantize('int4')", () => {
  /** Each quantized layer's float weight, its [rows, cols] view and its layout as Keras lays it out. */
  const weights = (
    c: FileCase,
  ): Array<{layer: string; name: string; float: number[]; layout: Int4Layout}> => {
    const bs = c.block_size ?? -1;
    const out: Array<{layer: string; name: string; float: number[]; layout: Int4Layout}> = [];
    for (const [layer, lc] of Object.entries(c.layers)) {
      const float = IO.float_weights[layer];
      const shapeOf = (v: string) => lc.vars.find(([, n]) => n === v)?.[2] as number[];
      if (lc.class === 'Dense' || lc.class === 'EinsumDense') {
        const packed = shapeOf('kernel');
        const rows = packed[0];
        const cols = float.kernel.values.length / rows;
        out.push({
          layer,
          name: 'kernel',
          float: float.kernel.values,
          layout: {rows, cols, packAxis: 1, groupAxis: 0, blockSize: bs},
        });
        continue;
      }
      const [V] = shapeOf('embeddings');
      const D = float.embeddings.values.length / V;
      out.push({
        layer,
        name: 'embeddings',
        float: float.embeddings.values,
        layout: {rows: V, cols: D, packAxis: 1, groupAxis: 1, blockSize: bs},
      });
      if (float.reverse_embeddings != null) {
        out.push({
          layer,
          name: 'reverse_embeddings',
          float: float.reverse_embeddings.values,
          layout: {rows: D, cols: V, packAxis: 0, groupAxis: 0, blockSize: bs},
        });
      }
    }
    return out;
  };

  for (const name of FILES) {
    it(`${name}: every packed byte, scale, zero point and g_idx equals Keras'`, () => {
      const c = IO[name];
      const checked: string[] = [];
      for (const w of weights(c)) {
        const saved = c.layers[w.layer].saved;
        const q = quantizeInt4(Float32Array.from(w.float), w.layout); // float32, as Keras holds them
        const prefix = w.name === 'kernel' ? 'kernel' : w.name;
        expect(Array.from(q.packed)).toEqual(saved[w.name]);
        expect(Array.from(q.scale)).toEqual(saved[`${prefix}_scale`].map(Math.fround));
        if (w.layout.blockSize > 0) {
          expect(Array.from(q.zero as Int8Array)).toEqual(saved[`${prefix}_zero`]);
          if (saved.g_idx != null && w.name !== 'reverse_embeddings') {
            expect(Array.from(q.gIdx as Float32Array)).toEqual(saved.g_idx);
          }
        } else {
          expect(q.zero).toBeNull();
        }
        checked.push(`${w.layer}/${w.name}`);
      }
      expect(checked).toEqual([
        'dense/kernel',
        'einsum_abd/kernel',
        'einsum_abde/kernel',
        'einsum_btnh/kernel',
        'embedding/embeddings',
        'tied/embeddings',
        'untied/embeddings',
        'untied/reverse_embeddings',
      ]);
    });
  }
});

describe("Keras 3.13's int4 layout", () => {
  beforeAll(() => useBackend('cpu'));

  it('is refused, naming the version and the layout (per channel, packed along the input axis)', async () => {
    const before = tf.memory().numTensors;
    await expect(loadKerasModel(path.join(DIR, 'keras313', 'dense.keras'))).rejects.toThrow(
      "layer 'dense' is int4 as Keras 3.11-3.13 wrote it (QuantizedDTypePolicy of mode 'int4': " +
        'per channel, packed along the input axis, its inputs quantized to int8); this package ' +
        "reads Keras 3.14+'s int4 (Int4DTypePolicy): load the file in Keras 3.13, save its float " +
        'model, and quantize that with Keras 3.15 or quantize()',
    );
    expect(tf.memory().numTensors).toBe(before);
  });
});

describe('int4 scales Keras could not have written', () => {
  beforeAll(() => useBackend('cpu'));

  it('a loaded int4 model with a NaN, zero or negative scale is refused, naming the layer', async () => {
    const model = await loadKerasModel(path.join(DIR, 'block8.keras'));
    const dense = model.layers.find((l) => l instanceof QuantizedDense) as QuantizedDense;
    const scale = dense.kernelScale as tf.LayerVariable;
    const good = scale.read().clone();
    expect(() => checkInt4Scales(model, 'loadKerasModel')).not.toThrow();
    for (const bad of [NaN, 0, -1]) {
      const values = good.dataSync().slice();
      values[5] = bad;
      tf.tidy(() => {
        scale.write(tf.tensor(values, good.shape));
      });
      expect(() => checkInt4Scales(model, 'loadKerasModel')).toThrow(
        `loadKerasModel: layer '${dense.name}': the int4 scale ${scale.originalName} expected ` +
          'positive finite values (Keras writes (max - min + 1e-7) / 15, or 7 / max|w| per ' +
          `channel), received ${String(bad)} at flat index 5`,
      );
    }
    good.dispose();
    model.dispose();
  });

  it('an int4 preset with a NaN scale is refused by buildKerasHubModel, nothing left allocated', async () => {
    const dir = path.join(DIR, 'gpt2_block128');
    const reader = await Hdf5Reader.open(
      new Uint8Array(fs.readFileSync(path.join(dir, 'model.weights.h5'))),
      'gpt2_block128',
    );
    const weights = new Map<string, {shape: number[]; dtype: string; values: ArrayLike<number>}>();
    for (const p of reader.datasetPaths('/')) {
      const d = reader.dataset(p);
      const bytes = new Uint8Array(d.bytes);
      reader.copy(d, bytes, 0);
      const values =
        d.dtype === 'bool'
          ? new Int8Array(bytes.buffer)
          : d.dtype === 'int32'
            ? new Int32Array(bytes.buffer)
            : new Float32Array(bytes.buffer);
      weights.set(`layers/gpt2_backbone/${p}`, {
        shape: d.shape,
        dtype: d.dtype === 'bool' ? 'int8' : d.dtype,
        values,
      });
    }
    // the first decoder's feed-forward output kernel_scale: vars/2 (kernel, bias, scale, ...)
    const target = [...weights.keys()].find((k) =>
      /transformer_decoder\/_feedforward_output_dense\/vars\/2$/.test(k),
    );
    expect(target).toBeDefined();
    const w = weights.get(target as string) as {values: ArrayLike<number>};
    const nan = Float32Array.from(w.values);
    nan[0] = NaN;
    w.values = nan;
    const task = JSON.parse(fs.readFileSync(path.join(dir, 'task.json'), 'utf8')).config;
    const before = tf.memory().numTensors;
    expect(() => buildKerasHubModel('GPT2CausalLM', task, weights as never)).toThrow(
      /GPT2CausalLM: layer 'feedforward_output_dense': the int4 scale .*kernel_scale expected positive finite values .* received NaN at flat index 0/,
    );
    expect(tf.memory().numTensors).toBe(before);
  });
});
