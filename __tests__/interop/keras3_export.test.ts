/**
 * tfjs -> Keras 3 -> tfjs. One model per layer of the package, saved with toKeras3Artifacts and
 * loaded by Keras 3 (fixtures/tfjs_to_keras3.py records Keras' outputs), loads back with
 * loadKerasModel and predicts what Keras predicted; what Keras 3 cannot express is refused with
 * an error naming the alternative. The scale/ run's model (trained data-parallel in Keras 3,
 * converted with tensorflowjs_converter) predicts what Keras predicted. Tolerance: 1e-5.
 */
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  AdditiveAttention,
  Attention,
  DotProductAttention,
  loadKerasModel,
  MultiHeadAttention,
  toKeras3Artifacts,
} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose, maxAbsDiff} from '../helpers/close';
import {saveToMemory} from '../helpers/save';

const dir = path.join(__dirname, '..', 'fixtures', 'tfjs_to_keras3');
const cases = fs.readdirSync(dir).filter((d) => fs.existsSync(path.join(dir, d, 'keras.json')));
const scaleDir = path.join(__dirname, '..', 'fixtures', 'scale', 'reverse');

interface TensorJson {
  dtype?: string;
  shape: number[];
  data: Array<number | boolean>;
}

const toTensor = (t: TensorJson) =>
  tf.tensor(
    t.data.map((v) => Number(v)),
    t.shape,
    (t.dtype ?? 'float32') as tf.DataType,
  );

/** Classes of the package's layers and where each is covered. */
const ROUND_TRIPS: Record<string, string> = {
  MultiHeadAttention: 'multi_head_attention',
  GroupQueryAttention: 'group_query_attention',
  CachedMultiHeadAttention: 'cached_multi_head_attention',
  Attention: 'attention',
  AdditiveAttention: 'additive_attention',
  EinsumDense: 'einsum_dense',
  TokenAndPositionEmbedding: 'token_and_position_embedding',
  PositionEmbedding: 'position_embedding',
  SinePositionEncoding: 'sine_position_encoding',
  RotaryEmbedding: 'rotary_embedding',
  ReversibleEmbedding: 'reversible_embedding',
  TransformerEncoder: 'transformer_encoder',
  TransformerDecoder: 'transformer_decoder',
  GetItem: 'get_item',
};

describeBackends('tfjs -> Keras 3 -> tfjs', () => {
  it('has a Keras-checked model for every layer that round-trips', () => {
    expect(cases.sort()).toEqual(
      [...Object.values(ROUND_TRIPS), 'multi_head_attention_valid_lens'].sort(),
    );
    for (const [cls, name] of Object.entries(ROUND_TRIPS)) {
      const json = JSON.parse(fs.readFileSync(path.join(dir, name, 'model.json'), 'utf8'));
      expect(json.format).toBe('keras3-config');
      const classes = json.modelTopology.config.layers.map(
        (l: {class_name: string}) => l.class_name,
      );
      expect(classes).toContain(cls);
    }
  });

  for (const name of cases) {
    it(`${name}: Keras 3 predicts what tfjs predicts, and the export loads back`, async () => {
      const io = JSON.parse(fs.readFileSync(path.join(dir, name, 'io.json'), 'utf8'));
      const keras = JSON.parse(fs.readFileSync(path.join(dir, name, 'keras.json'), 'utf8'));
      // the export is in the form tensorflowjs_converter writes for a .keras file
      const model = await loadKerasModel(path.join(dir, name, 'model.json'));
      const inputs = (io.keras_inputs as TensorJson[]).map(toTensor);
      let out = model.predict(inputs.length === 1 ? inputs[0] : inputs) as tf.Tensor | tf.Tensor[];
      if (!Array.isArray(out)) out = [out];
      expect(out.length).toBe(keras.outputs.length);
      out.forEach((o, i) => {
        expectClose(o, toTensor(keras.outputs[i]), 1e-5, 1e-5);
        expectClose(o, toTensor(io.tfjs_outputs[i]), 1e-5, 1e-5);
      });
      tf.dispose([...inputs, ...out]);
      model.dispose();
    });
  }

  it('the scale/ run: a model trained data-parallel in Keras 3 predicts as Keras did', async () => {
    const io = JSON.parse(fs.readFileSync(path.join(scaleDir, 'io.json'), 'utf8'));
    const run = JSON.parse(fs.readFileSync(path.join(scaleDir, 'run.json'), 'utf8'));
    expect(run.devices.length).toBeGreaterThanOrEqual(2);
    // each device took its slice of a batch, and the loss fell
    const shards = (run.batch_shards as string[]).map((s) => /^(\S+) \((\d+), /.exec(s));
    expect(new Set(shards.map((m) => m?.[1])).size).toBe(run.devices.length);
    expect(shards.map((m) => Number(m?.[2])).reduce((a, b) => a + b, 0)).toBe(run.batch_size);
    const losses = (run.epochs_log as {loss: number}[]).map((s) => s.loss);
    expect(losses[losses.length - 1]).toBeLessThan(losses[0] / 10);
    const model = await loadKerasModel(path.join(scaleDir, 'tfjs', 'model.json'));
    expect(model.inputs.map((i) => i.shape)).toEqual([
      [null, 10],
      [null, 10, 10],
    ]);
    const inputs = (io.inputs as TensorJson[]).map(toTensor);
    const out = model.predict(inputs) as tf.Tensor;
    const want = toTensor(io.outputs[0]);
    expect(maxAbsDiff(out, want)).toBeLessThanOrEqual(1e-5);
    expectClose(out, want, 1e-5, 1e-5);
    // trained: it reverses the tokens
    const tokens = (await inputs[0].array()) as number[][];
    const mask = (await inputs[1].array()) as number[][][];
    const pred = (await out.argMax(-1).array()) as number[][];
    tokens.forEach((row, b) => {
      const len = mask[b][0].filter(Boolean).length;
      for (let t = 0; t < len; t++) expect(pred[b][t]).toBe(row[len - 1 - t]);
    });
    tf.dispose([...inputs, out, want]);
    model.dispose();
  });
});

describe('toKeras3Artifacts refusals', () => {
  async function artifactsOf(make: (x: tf.SymbolicTensor) => tf.SymbolicTensor) {
    const x = tf.input({shape: [3, 4]});
    return saveToMemory(tf.model({inputs: x, outputs: make(x)}));
  }
  async function withLengths(make: (x: tf.SymbolicTensor, l: tf.SymbolicTensor) => unknown) {
    const x = tf.input({shape: [3, 4]});
    const lens = tf.input({shape: [1], dtype: 'int32', name: 'lens'});
    const y = make(x, lens) as tf.SymbolicTensor;
    return saveToMemory(tf.model({inputs: [x, lens], outputs: y}));
  }

  it('DotProductAttention: refused, naming Attention / MultiHeadAttention', async () => {
    const a = await artifactsOf((x) => new DotProductAttention().apply(x) as tf.SymbolicTensor);
    await expect(toKeras3Artifacts(a)).rejects.toThrow(
      /is a DotProductAttention, which Keras has no class for; build the model with Attention .* or MultiHeadAttention instead/,
    );
  });

  it('AdditiveAttention (d2l form, numHiddens): refused, naming the Keras form', async () => {
    const a = await artifactsOf(
      (x) => new AdditiveAttention({numHiddens: 3}).apply(x) as tf.SymbolicTensor,
    );
    await expect(toKeras3Artifacts(a)).rejects.toThrow(
      /d2l form of AdditiveAttention \(numHiddens\).*use AdditiveAttention without numHiddens/,
    );
  });

  it('MultiHeadAttention with valid lengths: refused unless validLens is mask', async () => {
    const a = await withLengths((x, l) =>
      new MultiHeadAttention({numHeads: 1, keyDim: 2}).apply([x, l]),
    );
    await expect(toKeras3Artifacts(a)).rejects.toThrow(
      /takes valid lengths \(input 'lens'\).*pass \{validLens: 'mask'\}.*'lens_mask' of shape \[batch, queryLength, keyLength\]/,
    );
    const k3 = await toKeras3Artifacts(a, {validLens: 'mask'});
    expect(k3.userDefinedMetadata?.keras3_masks).toEqual({
      lens: {input: 'lens_mask', shape: [null, 3, 3]},
    });
  });

  it('Attention with valid lengths: refused, naming MultiHeadAttention', async () => {
    const a = await withLengths((x, l) => new Attention().apply([x, x, l]));
    await expect(toKeras3Artifacts(a, {validLens: 'mask'})).rejects.toThrow(
      /takes an attention mask or valid lengths, which Keras' Attention does not; use MultiHeadAttention/,
    );
  });

  it('rejects an unknown validLens option', async () => {
    const a = await artifactsOf((x) => new Attention().apply([x, x]) as tf.SymbolicTensor);
    await expect(toKeras3Artifacts(a, {validLens: 'drop' as never})).rejects.toThrow(
      /validLens must be 'refuse' or 'mask'/,
    );
  });
});

describe('toKeras3Artifacts output', () => {
  it('is byte for byte the model the Keras-checked fixtures were made from (the export code is unchanged in effect)', () => {
    // the fixture script rebuilds every case with the built package and exports it again
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'tfjs-keras3-'));
    try {
      execFileSync(
        process.execPath,
        [path.join(__dirname, '..', '..', 'fixtures', 'tfjs_keras3_models.js')],
        {
          cwd: path.join(__dirname, '..', '..'),
          env: {...process.env, TFJS_KERAS3_OUT: out},
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      expect(fs.readdirSync(out).sort()).toEqual([...cases].sort());
      const differ: string[] = [];
      for (const name of cases) {
        // the exported model: byte for byte
        for (const file of ['model.json', 'weights.bin']) {
          const made = fs.readFileSync(path.join(out, name, file));
          const committed = fs.readFileSync(path.join(dir, name, file));
          if (!made.equals(committed)) differ.push(`${name}/${file}`);
        }
        // the inputs exactly; tfjs' outputs within 1e-6 (the product kernels may round otherwise)
        const made = JSON.parse(fs.readFileSync(path.join(out, name, 'io.json'), 'utf8'));
        const committed = JSON.parse(fs.readFileSync(path.join(dir, name, 'io.json'), 'utf8'));
        expect([name, made.inputs, made.keras_inputs]).toEqual([
          name,
          committed.inputs,
          committed.keras_inputs,
        ]);
        made.tfjs_outputs.forEach((o: TensorJson, i: number) => {
          expectClose(toTensor(o), toTensor(committed.tfjs_outputs[i]), 1e-6, 1e-6);
        });
      }
      expect(differ).toEqual([]);
    } finally {
      fs.rmSync(out, {recursive: true, force: true});
    }
  });
});

describe('toKeras3Artifacts of models loadKerasModel read, against the configs Keras wrote', () => {
  const kerasDir = path.join(__dirname, '..', 'fixtures', 'keras');
  beforeAll(async () => {
    await tf.setBackend('cpu');
  });
  type Layer = {
    class_name: string;
    name: string;
    config: Record<string, unknown>;
    inbound_nodes: Array<{kwargs: Record<string, unknown>}>;
  };
  /** The layers of the Keras 3 config: Keras' own (converted fixture) and the export's. */
  async function both(name: string): Promise<{keras: Layer[]; ours: Layer[]}> {
    const file = path.join(kerasDir, name, 'model.json');
    const json = JSON.parse(fs.readFileSync(file, 'utf8'));
    const model = await loadKerasModel(file);
    try {
      const out = await toKeras3Artifacts(await saveToMemory(model));
      const topology = out.modelTopology as unknown as {config: {layers: Layer[]}};
      return {keras: json.modelTopology.model_config.config.layers, ours: topology.config.layers};
    } finally {
      model.dispose();
    }
  }

  it("a constant start_index goes back to the position layers' calls, as Keras wrote it", async () => {
    const {keras, ours} = await both('k3_hub_rotary_start_index');
    for (const cls of ['RotaryEmbedding', 'PositionEmbedding']) {
      const k = keras.find((l) => l.class_name === cls) as Layer;
      const o = ours.find((l) => l.class_name === cls) as Layer;
      expect(o.inbound_nodes.map((n) => n.kwargs)).toEqual(k.inbound_nodes.map((n) => n.kwargs));
      expect(Object.keys(o.config)).not.toContain('start_index');
    }
  });

  it("Keras 3.15's use_gate and sliding_window are written as Keras wrote them", async () => {
    for (const name of ['k3_mha_gate_window', 'k3_gqa_window', 'k3_gqa_gate']) {
      const {keras, ours} = await both(name);
      const k = keras.find((l) => /Attention$/.test(l.class_name)) as Layer;
      const o = ours.find((l) => l.name === k.name) as Layer;
      expect(Object.keys(o.config).filter((key) => !(key in k.config))).toEqual([]);
      // unset here is Keras' default (use_gate false, sliding_window None)
      expect([o.config.use_gate ?? false, o.config.sliding_window ?? null]).toEqual([
        k.config.use_gate,
        k.config.sliding_window,
      ]);
    }
  });

  it("Keras' zero weights for fully masked rows (returned scores, dropout) are not an option Keras is given", async () => {
    // loadKerasModel sets zero_fully_masked_rows where Keras 3 takes its non-fused path; that
    // path is Keras' own with returned scores or dropout, so the config Keras wrote has no such key
    for (const name of ['k3_mha_scores_key', 'k3_gqa_dropout_masks']) {
      const {keras, ours} = await both(name);
      const k = keras.find((l) => /Attention$/.test(l.class_name)) as Layer;
      const o = ours.find((l) => l.name === k.name) as Layer;
      const extra = Object.keys(o.config).filter((key) => !(key in k.config));
      expect(extra).toEqual([]);
      // the call options (tensors aside: Keras passes the key positionally, the export by keyword)
      const options = (l: Layer) =>
        l.inbound_nodes.map((n) =>
          Object.fromEntries(Object.entries(n.kwargs).filter(([, v]) => typeof v !== 'object')),
        );
      expect(options(o)).toEqual(options(k));
    }
    // elsewhere Keras gives such rows uniform weights: the option is refused by name
    const q = tf.input({shape: [3, 4]});
    const mha = new MultiHeadAttention({numHeads: 1, keyDim: 4, zeroFullyMaskedRows: true});
    const model = tf.model({inputs: q, outputs: mha.apply(q) as tf.SymbolicTensor});
    await expect(toKeras3Artifacts(await saveToMemory(model))).rejects.toThrow(
      "has the option 'zero_fully_masked_rows' = true, which Keras 3's MultiHeadAttention does not take",
    );
    model.dispose();
  });
});
