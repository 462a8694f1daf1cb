/**
 * saveKerasFile: a model of the package's layers written as a `.keras` file in JavaScript. Keras
 * 3.15 (with keras-hub 0.32) loaded the committed fixtures/keras_save/model.keras, written by this
 * test with SAVE_KERAS_FIXTURE=1, and recorded its predictions
 * (fixtures/keras_save_check.py -> keras_predictions.json); the writer must still produce those
 * bytes, and the model predict what Keras predicted from them.
 */
import {execFileSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  MultiHeadAttention,
  saveKerasFile,
  TokenAndPositionEmbedding,
  TransformerDecoder,
} from '../../src';
import {crc32} from '../../src/io/zip_writer';

const FIXTURE = path.join(__dirname, '..', '..', 'fixtures', 'keras_save');
const DATE = new Date(Date.UTC(2026, 11, 4, 12, 0, 0));
const IDS = [
  [1, 2, 3, 4, 5, 6],
  [7, 8, 9, 1, 2, 3],
];
type S = tf.SymbolicTensor;

/** TokenAndPositionEmbedding, a TransformerDecoder, a causal MultiHeadAttention, Dense logits. */
function model(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32', name: 'ids'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: 20,
    sequenceLength: 8,
    embeddingDim: 8,
    name: 'embed',
  }).apply(ids) as S;
  x = new TransformerDecoder({intermediateDim: 16, numHeads: 2, name: 'decoder'}).apply(x) as S;
  x = new MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true, name: 'mha'}).apply(
    x,
  ) as S;
  const m = tf.model({
    inputs: ids,
    outputs: tf.layers.dense({units: 5, name: 'logits'}).apply(x) as S,
  });
  m.setWeights(m.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.4, 'float32', 11 + i)));
  return m;
}

/** The entries of a stored zip, read with the format's fields (no zip library). */
function entries(bytes: Uint8Array): Map<string, Uint8Array> {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = new Map<string, Uint8Array>();
  let at = 0;
  while (view.getUint32(at, true) === 0x04034b50) {
    const crc = view.getUint32(at + 14, true);
    const size = view.getUint32(at + 18, true);
    const nameLength = view.getUint16(at + 26, true);
    const name = new TextDecoder().decode(bytes.subarray(at + 30, at + 30 + nameLength));
    const data = bytes.subarray(at + 30 + nameLength, at + 30 + nameLength + size);
    expect(crc32(data)).toBe(crc);
    out.set(name, data);
    at += 30 + nameLength + size;
  }
  return out;
}

describe('saveKerasFile', () => {
  let m: tf.LayersModel;
  beforeAll(() => {
    m = model();
  });
  afterAll(() => m.dispose());

  it('writes the .keras file Keras 3.15 loaded, predicting what Keras predicted from it', async () => {
    const before = tf.memory().numTensors;
    const bytes = await saveKerasFile(m, undefined, {date: DATE});
    expect(tf.memory().numTensors).toBe(before);
    if (process.env.SAVE_KERAS_FIXTURE === '1') {
      fs.writeFileSync(path.join(FIXTURE, 'model.keras'), bytes);
    }
    expect(Buffer.from(bytes).equals(fs.readFileSync(path.join(FIXTURE, 'model.keras')))).toBe(
      true,
    );
    const keras = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'keras_predictions.json'), 'utf8'));
    expect(keras.ids).toEqual(IDS);
    const ours = tf.tidy(
      () => (m.predict(tf.tensor2d(IDS, [2, 6], 'int32')) as tf.Tensor).arraySync() as number[][][],
    );
    const worst = Math.max(
      ...ours.flat(2).map((v, i) => Math.abs(v - (keras.predictions as number[][][]).flat(2)[i])),
    );
    expect(worst).toBeLessThan(1e-5);
  });

  it("holds Keras' three entries, stored, with Keras 3's config and weight paths", async () => {
    const files = entries(await saveKerasFile(m, undefined, {date: DATE}));
    expect([...files.keys()]).toEqual(['metadata.json', 'config.json', 'model.weights.h5']);
    expect(JSON.parse(new TextDecoder().decode(files.get('metadata.json')))).toEqual({
      keras_version: '3.15.1',
      date_saved: '2026-12-04@12:00:00',
    });
    const config = JSON.parse(new TextDecoder().decode(files.get('config.json')));
    expect(config.class_name).toBe('Functional');
    expect(config.config.layers.map((l: {class_name: string}) => l.class_name)).toEqual([
      'InputLayer',
      'TokenAndPositionEmbedding',
      'TransformerDecoder',
      'MultiHeadAttention',
      'Dense',
    ]);
    const h5 = files.get('model.weights.h5') as Uint8Array;
    expect(Array.from(h5.subarray(0, 8))).toEqual([0x89, 0x48, 0x44, 0x46, 0x0d, 0x0a, 0x1a, 0x0a]);
  });

  it('writes the file at a path (Node), atomically', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-save-'));
    try {
      const file = path.join(dir, 'model.keras');
      const bytes = await saveKerasFile(m, file, {date: DATE});
      expect(Buffer.from(bytes).equals(fs.readFileSync(file))).toBe(true);
      expect(fs.readdirSync(dir)).toEqual(['model.keras']);
    } finally {
      fs.rmSync(dir, {recursive: true, force: true});
    }
  });

  it('names the path it could not write and why, not its temporary file (/proc/self/x.keras)', async () => {
    // Linux's /proc/self is a folder that takes no new file: the temporary file's open fails
    const before = tf.memory().numTensors;
    const message = await saveKerasFile(m, '/proc/self/x.keras').then(
      () => 'written',
      (e: Error) => e.message,
    );
    expect(message).toBe(
      'saveKerasFile: could not write /proc/self/x.keras: the folder /proc/self does not accept ' +
        'new files (ENOENT); expected a writable path in a folder that accepts new files ' +
        '(the file is written beside the target, then renamed to it)',
    );
    expect(tf.memory().numTensors).toBe(before);
  });

  it("refuses a layer or model name holding '/', which Keras 3.15's keras.Operation refuses", async () => {
    // Keras 3.15, keras/src/ops/operation.py: `if not isinstance(name, str) or "/" in name: raise`
    const dense = () => {
      const x = tf.input({shape: [3], name: 'x'});
      return {x, y: tf.layers.dense({units: 2, name: 'a/b'}).apply(x) as S};
    };
    const {x, y} = dense();
    const slash = tf.model({inputs: x, outputs: y});
    const before = tf.memory().numTensors;
    await expect(saveKerasFile(slash)).rejects.toThrow(
      'saveKerasFile: the layer name "a/b" holds \'/\', which Keras 3 refuses in a name ' +
        '(keras.Operation: "Argument `name` must be a string and cannot contain character `/`"); ' +
        "expected a name without '/': rename the layer before saving",
    );
    expect(tf.memory().numTensors).toBe(before);
    slash.dispose();
    const other = dense();
    const inner = tf.layers.dense({units: 2, name: 'c'});
    const named = tf.model({inputs: other.x, outputs: inner.apply(other.x) as S, name: 'm/1'});
    await expect(saveKerasFile(named)).rejects.toThrow(
      'saveKerasFile: the model name "m/1" holds \'/\'',
    );
    named.dispose();
  });

  it('refuses the recurrent layers, the wrappers and hardSigmoid, which Keras 3.15 loads otherwise', async () => {
    // Keras 3.15 on files written before: LSTM / GRU "expected 0 variables, but received 3",
    // Bidirectional / TimeDistributed "could not be deserialized"; an activation 'hardSigmoid'
    // loaded as Keras' hard_sigmoid, relu6(x + 3) / 6, predicted 0.083 away
    const cases: Array<[string, (x: S) => S, RegExp]> = [
      ['lstm', (x) => tf.layers.lstm({units: 3, name: 'r'}).apply(x) as S, /'r' is a LSTM/],
      ['gru', (x) => tf.layers.gru({units: 3, name: 'r'}).apply(x) as S, /'r' is a GRU/],
      [
        'bidirectional',
        (x) =>
          tf.layers
            .bidirectional({layer: tf.layers.lstm({units: 3}) as never, name: 'r'})
            .apply(x) as S,
        /'r' is a Bidirectional/,
      ],
      [
        'timeDistributed',
        (x) =>
          tf.layers.timeDistributed({layer: tf.layers.dense({units: 3}), name: 'r'}).apply(x) as S,
        /'r' is a TimeDistributed/,
      ],
      [
        'hardSigmoid',
        (x) => tf.layers.dense({units: 3, activation: 'hardSigmoid', name: 'h'}).apply(x) as S,
        /layer 'h' uses the activation 'hardSigmoid', which Keras 3 would load as another function/,
      ],
    ];
    for (const [, make, message] of cases) {
      const x = tf.input({shape: [4, 2], name: 'x'});
      const model = tf.model({inputs: x, outputs: make(x)});
      const before = tf.memory().numTensors;
      await expect(saveKerasFile(model)).rejects.toThrow(message);
      expect(tf.memory().numTensors).toBe(before);
      model.dispose();
    }
  });

  it('refuses a nested model and a Sequential model under its own name', async () => {
    const x = tf.input({shape: [3], name: 'x'});
    const innerIn = tf.input({shape: [3], name: 'inner_x'});
    const inner = tf.model({
      inputs: innerIn,
      outputs: tf.layers.dense({units: 2, name: 'inner_dense'}).apply(innerIn) as S,
      name: 'inner',
    });
    const outer = tf.model({inputs: x, outputs: inner.apply(x) as S, name: 'outer'});
    const before = tf.memory().numTensors;
    await expect(saveKerasFile(outer)).rejects.toThrow(
      "saveKerasFile: layer 'inner' is a nested model; export a flat functional model",
    );
    expect(tf.memory().numTensors).toBe(before);
    outer.dispose();
    const seq = tf.sequential({layers: [tf.layers.dense({units: 2, inputShape: [3]})]});
    await expect(saveKerasFile(seq)).rejects.toThrow(
      'saveKerasFile: expected a functional model (tf.model), not a Sequential',
    );
    seq.dispose();
  });

  it('refuses a path in the browser build', async () => {
    const browser = await import('../../src/interop/keras_file_save');
    await expect(browser.saveKerasFile(m, 'x.keras')).rejects.toThrow(
      'saveKerasFile: a path is written in Node only; in the browser, save the returned bytes',
    );
  });
});

/** A layer of the user's own, registered with tfjs: Keras has no class of that name. */
class DoubleIt extends tf.layers.Layer {
  static className = 'DoubleIt';
  override call(x: tf.Tensor | tf.Tensor[]): tf.Tensor {
    return tf.tidy(() => tf.mul(Array.isArray(x) ? x[0] : x, 2));
  }
}
tf.serialization.registerClass(DoubleIt);

describe('saveKerasFile refuses what Keras could not load back', () => {
  beforeAll(() => tf.setBackend('cpu'));
  it('a layer Keras has no class for, by its name and class', async () => {
    const input = tf.input({shape: [3]});
    const dense = tf.layers.dense({units: 2, name: 'dense_in'}).apply(input) as tf.SymbolicTensor;
    const out = new DoubleIt({name: 'double_it'}).apply(dense) as tf.SymbolicTensor;
    const model = tf.model({inputs: input, outputs: out});
    const before = tf.memory().numTensors;
    await expect(saveKerasFile(model)).rejects.toThrow(
      /^saveKerasFile: layer 'double_it' is a DoubleIt, which Keras has no class for \(expected tfjs' built-in layers or this package's\)/,
    );
    expect(tf.memory().numTensors).toBe(before);
    model.dispose();
  });

  it("tfjs' layers whose class Keras 3 removed (ThresholdedReLU, RandomWidth)", async () => {
    for (const [layer, cls] of [
      [tf.layers.thresholdedReLU({theta: 0.5, name: 'gone'}), 'ThresholdedReLU'],
      [tf.layers.randomWidth({factor: 0.1, name: 'gone'}), 'RandomWidth'],
    ] as Array<[tf.layers.Layer, string]>) {
      const input = tf.input({shape: [4, 4, 1]});
      const model = tf.model({inputs: input, outputs: layer.apply(input) as tf.SymbolicTensor});
      await expect(saveKerasFile(model)).rejects.toThrow(
        new RegExp(`^saveKerasFile: layer 'gone' is a ${cls}, which Keras has no class for`),
      );
      model.dispose();
    }
  });

  it('something other than a model, by what it received', async () => {
    const save = saveKerasFile as unknown as (m: unknown) => Promise<Uint8Array>;
    await expect(save(null)).rejects.toThrow(
      /^saveKerasFile: expected a tf.LayersModel .*received null$/,
    );
    await expect(save({})).rejects.toThrow(
      /^saveKerasFile: expected a tf.LayersModel .*received object$/,
    );
  });
});

describe('saveKerasFile to a path that cannot hold the file', () => {
  // made in beforeAll, not while collecting: auto-named layers made earlier would rename those
  // of the model the fixture test above writes
  let model: tf.LayersModel;
  beforeAll(async () => {
    await tf.setBackend('cpu');
    const input = tf.input({shape: [3]});
    model = tf.model({
      inputs: input,
      outputs: tf.layers.dense({units: 2}).apply(input) as tf.SymbolicTensor,
    });
  });
  afterAll(() => model.dispose());

  it('a folder: refused by name, nothing written beside it', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    const dir = path.join(parent, 'out');
    fs.mkdirSync(dir);
    try {
      await expect(saveKerasFile(model, dir)).rejects.toThrow(
        new RegExp(
          `^saveKerasFile: expected a file path, received the folder ${dir.replace(/[.\\/]/g, '\\$&')}$`,
        ),
      );
      expect(fs.readdirSync(parent)).toEqual(['out']);
      expect(fs.readdirSync(dir)).toEqual([]);
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });

  it('a FIFO or a device: refused, never replaced (a rename over /dev/full replaced it)', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    const fifo = path.join(parent, 'pipe.keras');
    execFileSync('mkfifo', [fifo]);
    try {
      await expect(saveKerasFile(model, fifo)).rejects.toThrow(
        `saveKerasFile: expected a path of a regular file, received ${fifo}, a FIFO`,
      );
      expect(fs.lstatSync(fifo).isFIFO()).toBe(true);
      expect(fs.readdirSync(parent)).toEqual(['pipe.keras']);
      // a device, by a link named .keras (the check is on what the path resolves to)
      const dev = path.join(parent, 'dev.keras');
      fs.symlinkSync('/dev/null', dev);
      await expect(saveKerasFile(model, dev)).rejects.toThrow(
        `saveKerasFile: expected a path of a regular file, received ${dev}, a device`,
      );
      expect(fs.lstatSync('/dev/null').isCharacterDevice()).toBe(true);
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });

  it("a symlink: written through to its target, as Keras' model.save writes; a dangling one refused", async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    try {
      const target = path.join(parent, 'real.keras');
      fs.writeFileSync(target, 'old');
      const link = path.join(parent, 'link.keras');
      fs.symlinkSync(target, link);
      const bytes = await saveKerasFile(model, link);
      expect(fs.lstatSync(link).isSymbolicLink()).toBe(true);
      expect(Buffer.from(bytes).equals(fs.readFileSync(target))).toBe(true);
      const dangling = path.join(parent, 'gone.keras');
      fs.symlinkSync(path.join(parent, 'missing.keras'), dangling);
      await expect(saveKerasFile(model, dangling)).rejects.toThrow(
        `saveKerasFile: cannot write ${dangling}: it is a symlink to a path that does not exist`,
      );
      expect(fs.readdirSync(parent).sort()).toEqual(['gone.keras', 'link.keras', 'real.keras']);
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });

  it('a name not ending in .keras, which keras.saving.load_model refuses', async () => {
    const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'keras-user-'));
    try {
      const file = path.join(parent, 'x.zip');
      await expect(saveKerasFile(model, file)).rejects.toThrow(
        `saveKerasFile: expected a path ending in .keras (keras.saving.load_model reads no other name), received ${file}`,
      );
      expect(fs.readdirSync(parent)).toEqual([]);
    } finally {
      fs.rmSync(parent, {recursive: true});
    }
  });

  it('a file in a folder that does not exist', async () => {
    const file = path.join(os.tmpdir(), 'keras-user-no-such-folder', 'm.keras');
    await expect(saveKerasFile(model, file)).rejects.toThrow(
      /^saveKerasFile: cannot write .*m\.keras: the folder .*keras-user-no-such-folder does not exist$/,
    );
  });
});

describe('saveKerasFile with LoRA adapters', () => {
  it("merges them into the kernels as Keras saves them (A and B not written; keras-hub's merged logits)", async () => {
    await tf.setBackend('cpu');
    const {loadLoraCaseWithAdapters, loraExpected, batchOf, relativeError} =
      await import('../helpers/lora_fixture');
    const {loadKerasModel} = await import('../../src');
    const e = loraExpected('gpt2');
    const preset = await loadLoraCaseWithAdapters('gpt2');
    const bytes = await saveKerasFile(preset.model);
    const back = await loadKerasModel(bytes);
    expect(back.weights.some((w) => w.originalName.includes('lora'))).toBe(false);
    const b = batchOf(e);
    const inputs = [
      tf.tensor2d(b.tokenIds, undefined, 'int32'),
      tf.tensor2d(b.paddingMask, undefined, 'int32'),
    ];
    const mine = back.predict(inputs) as tf.Tensor;
    const withAdapters = (e.logits as unknown as {values: number[]}).values;
    expect(relativeError(mine.dataSync(), withAdapters)).toBeLessThan(1e-5);
    tf.dispose([...inputs, mine]);
    back.dispose();
    preset.dispose();
  });
});
