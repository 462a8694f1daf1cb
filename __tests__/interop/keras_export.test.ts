/**
 * tfjs -> Keras: models built here, saved with toKerasArtifacts, converted by
 * tensorflowjs_converter to .h5 and loaded in tf-keras predict what tfjs predicts
 * (fixtures/tfjs_to_keras.py records Keras' outputs). Tolerance: atol 1e-5, rtol 1e-5.
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  AdditiveAttention,
  DotProductAttention,
  loadKerasModel,
  MultiHeadAttention,
  toKerasArtifacts,
} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose, maxAbsDiff} from '../helpers/close';
import {recordFidelity} from '../helpers/fidelity';
import {saveToMemory} from '../helpers/save';

const dir = path.join(__dirname, '..', 'fixtures', 'tfjs_to_keras');
const cases = fs.readdirSync(dir).filter((d) => fs.existsSync(path.join(dir, d, 'keras.json')));

interface TensorJson {
  dtype?: string;
  shape: number[];
  data: number[];
}

const toTensor = (t: TensorJson) =>
  tf.tensor(t.data, t.shape, (t.dtype ?? 'float32') as tf.DataType);

describeBackends('tfjs -> Keras', (backend) => {
  it('covers attention layers of every Keras class', () => {
    const classes = new Set<string>();
    for (const name of cases) {
      const json = JSON.parse(fs.readFileSync(path.join(dir, name, 'model.json'), 'utf8'));
      const topology = json.modelTopology.model_config ?? json.modelTopology;
      for (const layer of topology.config.layers) classes.add(layer.class_name);
    }
    for (const cls of ['MultiHeadAttention', 'Attention', 'AdditiveAttention']) {
      expect(classes).toContain(cls);
    }
  });

  for (const name of cases) {
    it(`${name}: Keras predicts what tfjs predicts`, async () => {
      const io = JSON.parse(fs.readFileSync(path.join(dir, name, 'io.json'), 'utf8'));
      const keras = JSON.parse(fs.readFileSync(path.join(dir, name, 'keras.json'), 'utf8'));
      const model = await loadKerasModel(path.join(dir, name));
      const inputs = (io.inputs as TensorJson[]).map(toTensor);
      let out = model.predict(inputs.length === 1 ? inputs[0] : inputs) as tf.Tensor | tf.Tensor[];
      if (!Array.isArray(out)) out = [out];
      let worst = 0;
      out.forEach((o, i) => {
        // the Keras-compatible save loads back to the model that was saved
        expectClose(o, toTensor(io.tfjs_outputs[i]), 1e-6, 1e-6);
        const k = toTensor(keras.outputs[i]);
        worst = Math.max(worst, maxAbsDiff(o, k));
        expectClose(o, k, 1e-5, 1e-5);
      });
      recordFidelity({
        case: name,
        reference: `tf-keras ${keras.keras} (tfjs -> Keras)`,
        backend,
        maxAbsError: worst,
      });
      tf.dispose([...inputs, ...out]);
      model.dispose();
    });
  }
});

describe('toKerasArtifacts refusals', () => {
  async function artifactsOf(
    make: (x: tf.SymbolicTensor) => tf.SymbolicTensor,
    extra?: tf.SymbolicTensor,
  ) {
    const x = tf.input({shape: [3, 4]});
    const model = tf.model({inputs: extra ? [x, extra] : x, outputs: make(x)});
    const saved = await saveToMemory(model);
    return saved;
  }

  it('refuses what Keras cannot express', async () => {
    await expect(async () =>
      toKerasArtifacts(
        await artifactsOf((x) => new DotProductAttention().apply(x) as tf.SymbolicTensor),
      ),
    ).rejects.toThrow(/is a DotProductAttention, which Keras has no class for/);
    await expect(async () =>
      toKerasArtifacts(
        await artifactsOf(
          (x) => new AdditiveAttention({numHiddens: 3}).apply(x) as tf.SymbolicTensor,
        ),
      ),
    ).rejects.toThrow(/d2l form of AdditiveAttention/);
    const lens = tf.input({shape: [1], dtype: 'int32'});
    await expect(async () =>
      toKerasArtifacts(
        await artifactsOf(
          (x) =>
            new MultiHeadAttention({numHeads: 1, keyDim: 2}).apply([x, lens]) as tf.SymbolicTensor,
          lens,
        ),
      ),
    ).rejects.toThrow(/takes valid lengths, which Keras cannot express/);
  });
});
