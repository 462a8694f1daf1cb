/**
 * A model whose Dense and Embedding layers have LoRA adapters (float, and int8 after `quantize`),
 * written by `saveKerasFile` (the adapters merged, int8 weights requantized, as Keras'
 * `save_own_variables` does), then loaded by Keras 3.15.1 (fixtures/lora_layers_keras_check.py,
 * which records Keras' predictions of the files in
 * __tests__/fixtures/lora/layers/js/keras_check.json). Write the files again with
 * `SAVE_LORA_LAYERS_FIXTURE=1 npx jest __tests__/interop/keras_file_save_lora_layers.test.ts`, then run
 * the script.
 *
 * - float: Keras' predictions of the merged file equal the package's predictions with the
 *   adapters on, within 1e-5 (outputs of magnitude ~1);
 * - int8: the package reads back the bytes it wrote and predicts Keras' predictions of that file
 *   within 1e-5; the merge moved them (the adapters are in the saved weights).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  Dense,
  Embedding,
  enableLora,
  loadKerasModel,
  LoraLayer,
  quantize,
  saveKerasFile,
} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {lcg} from '../helpers/data';

const JS = path.join(__dirname, '..', 'fixtures', 'lora', 'layers', 'js');
const DATE = new Date(Date.UTC(2026, 11, 8, 0, 0, 0));
const IDS = [
  [1, 0, 6],
  [3, 3, 5],
];

/** ids [3] -> Embedding 'tokens' (7 x 6) -> Dense 'query' (5) -> Dense 'value' (4, relu). */
function floatModel(): tf.LayersModel {
  const ids = tf.input({shape: [3], dtype: 'int32', name: 'ids'});
  const e = new Embedding({inputDim: 7, outputDim: 6, name: 'tokens'}).apply(ids);
  const q = new Dense({units: 5, name: 'query'}).apply(e);
  const v = new Dense({units: 4, name: 'value', activation: 'relu'}).apply(q);
  const m = tf.model({inputs: ids, outputs: v as tf.SymbolicTensor, name: 'lora_layers'});
  m.weights.forEach((w, i) => {
    const shape = w.shape as number[];
    const t = tf.tensor(
      lcg(
        shape.reduce((p, d) => p * d, 1),
        70 + i,
        0.5,
      ),
      shape,
    );
    w.write(t);
    t.dispose();
  });
  return m;
}

/** LoRA on 'tokens' and 'query' (rank 2, alpha 3), A and B seeded (B non-zero). */
function adapt(m: tf.LayersModel): void {
  const layers = enableLora(m, 2, {targets: ['tokens', 'query'], alpha: 3});
  layers.forEach((l: LoraLayer, i) => {
    for (const [v, seed] of [
      [l.lora!.a, 80 + i],
      [l.lora!.b, 90 + i],
    ] as const) {
      const shape = v.shape as number[];
      const t = tf.tensor(
        lcg(
          shape.reduce((p, d) => p * d, 1),
          seed,
          0.5,
        ),
        shape,
      );
      v.write(t);
      t.dispose();
    }
  });
}

const predict = (m: tf.LayersModel) =>
  tf.tidy(() => Array.from((m.predict(tf.tensor2d(IDS, [2, 3], 'int32')) as tf.Tensor).dataSync()));

const kerasCheck = (): Record<string, {ids: number[][]; predictions: number[]}> =>
  JSON.parse(fs.readFileSync(path.join(JS, 'keras_check.json'), 'utf8'));

describeBackends('LoRA on Dense / Embedding saved by saveKerasFile, read by Keras 3.15', () => {
  it('float: Keras predicts the merged file as the package predicts with the adapters (1e-5)', async () => {
    const m = floatModel();
    adapt(m);
    const ours = predict(m);
    const before = tf.memory().numTensors;
    const bytes = await saveKerasFile(m, undefined, {date: DATE});
    expect(tf.memory().numTensors).toBe(before);
    if (process.env.SAVE_LORA_LAYERS_FIXTURE === '1') {
      fs.mkdirSync(JS, {recursive: true});
      fs.writeFileSync(path.join(JS, 'float.keras'), bytes);
    }
    const keras = kerasCheck().float;
    expect(keras.ids).toEqual(IDS);
    expectClose(ours, keras.predictions, 1e-5, 0);
    // the package reads its own file back to the same predictions, without adapters
    const back = await loadKerasModel(bytes);
    expect(back.weights.some((w) => w.originalName.includes('lora_'))).toBe(false);
    expectClose(predict(back), keras.predictions, 1e-5, 0);
    back.dispose();
    m.dispose();
  });

  it('int8: the requantized file reads back to what Keras predicts from it (1e-5)', async () => {
    const f = floatModel();
    const m = quantize(f, 'int8');
    f.dispose();
    const plain = predict(m);
    adapt(m);
    const bytes = await saveKerasFile(m, undefined, {date: DATE});
    if (process.env.SAVE_LORA_LAYERS_FIXTURE === '1') {
      fs.writeFileSync(path.join(JS, 'int8.keras'), bytes);
    }
    const keras = kerasCheck().int8;
    const back = await loadKerasModel(bytes);
    const ours = predict(back);
    expectClose(ours, keras.predictions, 1e-5, 0);
    // the adapters are in the saved int8 weights: the predictions moved from the plain model's
    expect(Math.max(...ours.map((v, i) => Math.abs(v - plain[i])))).toBeGreaterThan(1e-2);
    back.dispose();
    m.dispose();
  });
});
