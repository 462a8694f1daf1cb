/**
 * keras-hub's `.lora.h5` (`save_lora_weights` / `load_lora_weights`), both ways: the files
 * keras-hub 0.32 wrote (fixtures/lora_finetune.py) read into the same tiny GPT-2 and Llama 3,
 * each A and B equal to the values keras-hub gave them; the file written here holds keras-hub's
 * datasets (paths, types, shapes, values), and reads back into a fresh model.
 */
import * as tf from '@tensorflow/tfjs';

import {enableLora, loadLoraWeights, saveLoraWeights} from '../../src';
import {Hdf5Reader} from '../../src/io/hdf5_datasets';
import {useBackend} from '../helpers/backends';
import {
  loadLoraCase,
  loadLoraCaseWithAdapters,
  loraExpected,
  loraFile,
  variableAt,
} from '../helpers/lora_fixture';

/** Every dataset of a `.lora.h5`: path -> dtype, shape and values. */
async function datasets(
  bytes: Uint8Array,
): Promise<Map<string, {fileType: string; shape: number[]; values: number[]}>> {
  const reader = await Hdf5Reader.open(bytes, 'lora file');
  const out = new Map<string, {fileType: string; shape: number[]; values: number[]}>();
  for (const p of reader.datasetPaths('/')) {
    const ds = reader.dataset(p);
    const buf = new Uint8Array(ds.bytes);
    reader.copy(ds, buf, 0);
    const values =
      ds.dtype === 'int32' ? [...new Int32Array(buf.buffer)] : [...new Float32Array(buf.buffer)];
    out.set(p, {fileType: ds.fileType, shape: ds.shape, values});
  }
  return out;
}

describe.each(['gpt2', 'llama3'] as const)('.lora.h5 of %s', (c) => {
  const e = loraExpected(c);
  beforeAll(() => useBackend('cpu'));

  it("reads keras-hub's file: LoRA enabled at its rank, each A and B set from it", async () => {
    const preset = await loadLoraCaseWithAdapters(c);
    const init = (e as unknown as {init_values: {path: string; values: number[]}[]}).init_values;
    const lora = init.filter((v) => v.path.includes('lora_kernel'));
    expect(lora.length).toBe(8);
    for (const v of lora) {
      expect([...variableAt(preset.model, v.path).read().dataSync()]).toEqual(
        v.values.map(Math.fround),
      );
    }
    preset.dispose();
  });

  it("writes keras-hub's datasets: the same paths, types, shapes and values", async () => {
    const preset = await loadLoraCaseWithAdapters(c);
    const mine = await datasets(await saveLoraWeights(preset.model));
    const theirs = await datasets(loraFile(c, 'init.lora.h5'));
    expect([...mine.keys()].sort()).toEqual([...theirs.keys()].sort());
    for (const [p, t] of theirs) expect(mine.get(p)).toEqual(t);
    preset.dispose();
  });

  it('reads back what it wrote into a fresh model', async () => {
    const a = await loadLoraCaseWithAdapters(c);
    const bytes = await saveLoraWeights(a.model);
    const b = await loadLoraCase(c);
    const before = tf.memory().numTensors;
    await loadLoraWeights(b.model, bytes);
    expect(tf.memory().numTensors - before).toBe(4 * 2); // A and B of each of the 4 layers
    for (const w of a.model.trainableWeights.filter((v) => v.name.includes('lora'))) {
      expect([...variableAt(b.model, w.originalName).read().dataSync()]).toEqual([
        ...w.read().dataSync(),
      ]);
    }
    a.dispose();
    b.dispose();
  });

  it('refuses a file of another rank, a model without LoRA and bytes that are not HDF5', async () => {
    const preset = await loadLoraCase(c);
    enableLora(preset.model, 2);
    await expect(loadLoraWeights(preset.model, loraFile(c, 'init.lora.h5'))).rejects.toThrow(
      "the file's LoRA rank is 4, but the model's LoRA was enabled with rank 2",
    );
    const other = await loadLoraCase(c);
    await expect(saveLoraWeights(other.model)).rejects.toThrow(/has no LoRA layers/);
    await expect(loadLoraWeights(other.model, new Uint8Array([1, 2, 3]))).rejects.toThrow(
      /expected the bytes of a \.lora\.h5 file/,
    );
    preset.dispose();
    other.dispose();
  });
});

it("refuses a file whose layers are not the model's LoRA layers, naming both", async () => {
  await useBackend('cpu');
  const gpt2 = await loadLoraCase('gpt2');
  // keras-hub's Llama file numbers its layers 9, 11, 20, 22; GPT-2's are 9, 11, 19, 21
  await expect(loadLoraWeights(gpt2.model, loraFile('llama3', 'init.lora.h5'))).rejects.toThrow(
    "the file adapts the layers 9 (value), 11 (query), 20 (key), 22 (layer_norm); the model's " +
      'LoRA layers are 9 (value), 11 (query), 19 (value), 21 (query)',
  );
  gpt2.dispose();
});
