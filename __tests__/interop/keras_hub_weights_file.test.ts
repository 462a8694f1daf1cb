/**
 * kerasHubWeightsFile: a fine-tuned preset's `model.weights.h5`, LoRA merged as Keras saves it.
 * The tiny GPT-2 and Llama 3 of fixtures/lora_finetune.py, in the state keras-hub reached after 5
 * Adam steps (its `trained.lora.h5` and trained biases): the file holds the datasets of
 * keras-hub's own `save_to_preset` (`merged_preset/model.weights.h5`: paths, shapes, values within
 * 1e-6), and the preset made of it loads and generates keras-hub's greedy strings.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {generateText, loadKerasHubPreset, loadLoraWeights, saveLoraWeights} from '../../src';
import {kerasHubWeightsFile} from '../../src/interop/keras_hub_weights_file';
import {Hdf5Reader} from '../../src/io/hdf5_datasets';
import {useBackend} from '../helpers/backends';
import {
  batchOf,
  LORA_DIR,
  loadLoraCase,
  loraExpected,
  loraFile,
  relativeError,
  variableAt,
} from '../helpers/lora_fixture';

/** Every dataset: its shape and its values (float), or its bytes (int8). */
async function datasets(
  bytes: Uint8Array,
): Promise<Map<string, {shape: number[]; values: Float32Array; bytes?: Uint8Array}>> {
  const reader = await Hdf5Reader.open(bytes, 'weights');
  const out = new Map<string, {shape: number[]; values: Float32Array; bytes?: Uint8Array}>();
  for (const p of reader.datasetPaths('/')) {
    const ds = reader.dataset(p);
    const buf = new Uint8Array(ds.bytes);
    reader.copy(ds, buf, 0);
    out.set(
      p,
      ds.dtype === 'bool'
        ? {shape: ds.shape, values: new Float32Array(0), bytes: buf}
        : {shape: ds.shape, values: new Float32Array(buf.buffer)},
    );
  }
  return out;
}

/** What keras-hub 0.32 made of the files below (fixtures/lora_keras_check.py). */
interface KerasCheck {
  generate_merged_preset: string[];
  merged_preset_logits: number[];
  lora_h5_logits: number[];
}

describe.each(['gpt2', 'llama3'] as const)('a fine-tuned %s preset', (c) => {
  const e = loraExpected(c);
  beforeAll(() => useBackend('cpu'));

  /** The case's model as keras-hub left it after 5 Adam steps. */
  async function trained() {
    const preset = await loadLoraCase(c);
    await loadLoraWeights(preset.model, loraFile(c, 'trained.lora.h5'));
    for (const w of e.adam.weights_after.filter((v) => v.path.endsWith('/bias'))) {
      variableAt(preset.model, w.path).write(tf.tensor(w.values, w.shape));
    }
    return preset;
  }

  it("writes keras-hub's merged model.weights.h5 (every path and shape; values within 1e-6)", async () => {
    const preset = await trained();
    const before = tf.memory().numTensors;
    const mine = await datasets(await kerasHubWeightsFile(preset.model));
    expect(tf.memory().numTensors).toBe(before);
    const theirs = await datasets(
      new Uint8Array(fs.readFileSync(path.join(LORA_DIR, c, 'merged_preset', 'model.weights.h5'))),
    );
    expect([...mine.keys()].sort()).toEqual([...theirs.keys()].sort());
    for (const [p, t] of theirs) {
      const m = mine.get(p) as {shape: number[]; values: Float32Array};
      expect(m.shape).toEqual(t.shape);
      expect(relativeError(m.values, t.values)).toBeLessThan(1e-6);
    }
    preset.dispose();
  });

  it('writes the files keras-hub read back (js/: the merged preset and the adapters)', async () => {
    // js/ holds this package's merged preset and .lora.h5 of the trained state, written by this
    // test with SAVE_LORA_FIXTURE=1; fixtures/lora_keras_check.py loaded both with keras-hub
    // (CausalLM.from_preset; load_lora_weights into the source preset) into js/keras_check.json
    const dir = path.join(LORA_DIR, c, 'js');
    const preset = await trained();
    const weights = await kerasHubWeightsFile(preset.model);
    const adapters = await saveLoraWeights(preset.model);
    if (process.env.SAVE_LORA_FIXTURE === '1') {
      fs.rmSync(dir, {recursive: true, force: true});
      fs.cpSync(path.join(LORA_DIR, c, 'preset'), path.join(dir, 'preset'), {recursive: true});
      fs.writeFileSync(path.join(dir, 'preset', 'model.weights.h5'), weights);
      fs.writeFileSync(path.join(dir, 'adapters.lora.h5'), adapters);
    }
    expect(
      Buffer.compare(fs.readFileSync(path.join(dir, 'preset', 'model.weights.h5')), weights),
    ).toBe(0);
    expect(Buffer.compare(fs.readFileSync(path.join(dir, 'adapters.lora.h5')), adapters)).toBe(0);
    const keras = JSON.parse(
      fs.readFileSync(path.join(dir, 'keras_check.json'), 'utf8'),
    ) as KerasCheck;
    // keras-hub generates its own greedy strings from the merged preset written here
    expect(keras.generate_merged_preset).toEqual(e.generate_lora.strings);
    // and predicts what this model predicts, from both files
    const b = batchOf(e);
    const ids = tf.tensor2d(b.tokenIds, undefined, 'int32');
    const mask = tf.tensor2d(b.paddingMask, undefined, 'int32');
    const logits = preset.model.predict([ids, mask]) as tf.Tensor;
    expect(relativeError(logits.dataSync(), keras.merged_preset_logits)).toBeLessThan(1e-5);
    expect(relativeError(logits.dataSync(), keras.lora_h5_logits)).toBeLessThan(1e-5);
    tf.dispose([ids, mask, logits]);
    preset.dispose();
  });

  it("makes a preset that loads and generates keras-hub's greedy strings", async () => {
    const preset = await trained();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tuned-'));
    fs.cpSync(path.join(LORA_DIR, c, 'preset'), dir, {recursive: true});
    fs.writeFileSync(path.join(dir, 'model.weights.h5'), await kerasHubWeightsFile(preset.model));
    preset.dispose();
    const tuned = await loadKerasHubPreset(dir);
    const b = batchOf(e);
    const ids = tf.tensor2d(b.tokenIds, undefined, 'int32');
    const mask = tf.tensor2d(b.paddingMask, undefined, 'int32');
    const logits = tuned.model.predict([ids, mask]) as tf.Tensor;
    const merged = (e.merged_logits as unknown as {values: number[]}).values;
    expect(relativeError(logits.dataSync(), merged)).toBeLessThan(1e-5);
    tf.dispose([ids, mask, logits]);
    const prompts = ['the quick brown', 'hello world'];
    const strings = await generateText(tuned, prompts, {maxLength: 16});
    expect(strings).toEqual(e.generate_lora.strings);
    tuned.dispose();
    fs.rmSync(dir, {recursive: true});
  });
});

describe('a fine-tuned int8 Llama 3 (LoRA on int8 layers)', () => {
  beforeAll(() => useBackend('cpu'));

  it("requantizes the merged kernels as Keras saves them: keras-hub's merged int8 datasets", async () => {
    // keras-hub 0.32: task.quantize("int8"), enable_lora(4), 5 Adam steps, save_to_preset, whose
    // save dequantizes each adapted kernel, adds (alpha / rank) A @ B and quantizes it again
    const preset = await loadLoraCase('llama3_int8');
    await loadLoraWeights(preset.model, loraFile('llama3_int8', 'trained.lora.h5'));
    const before = tf.memory().numTensors;
    const mine = await datasets(await kerasHubWeightsFile(preset.model));
    expect(tf.memory().numTensors).toBe(before);
    const theirs = await datasets(
      new Uint8Array(
        fs.readFileSync(path.join(LORA_DIR, 'llama3_int8', 'merged_preset', 'model.weights.h5')),
      ),
    );
    expect([...mine.keys()].sort()).toEqual([...theirs.keys()].sort());
    let int8Values = 0;
    for (const [p, t] of theirs) {
      const m = mine.get(p) as {shape: number[]; values: Float32Array; bytes?: Uint8Array};
      expect(m.shape).toEqual(t.shape);
      if (t.bytes != null) {
        // the int8 kernels, adapted ones requantized: every byte equal
        expect([
          p,
          Buffer.compare(Buffer.from(m.bytes as Uint8Array), Buffer.from(t.bytes)),
        ]).toEqual([p, 0]);
        int8Values += t.bytes.length;
      } else {
        expect([p, relativeError(m.values, t.values) < 1e-6]).toEqual([p, true]);
      }
    }
    expect(int8Values).toBeGreaterThan(0);
    preset.dispose();
  });
});
