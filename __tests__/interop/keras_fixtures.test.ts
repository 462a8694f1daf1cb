/**
 * Keras models converted by tensorflowjs_converter (fixtures/keras_models.py) load with
 * loadKerasModel and predict what Keras predicted.
 *
 * Tolerance: atol 1e-5 + rtol 1e-5 (float32; TF and tfjs sum in different orders).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {
  cachedDecodingRefusal,
  convertKerasArtifacts,
  fileSystem,
  generate,
  loadKerasModel,
} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose, maxAbsDiff} from '../helpers/close';
import {recordFidelity} from '../helpers/fidelity';

const dir = path.join(__dirname, '..', 'fixtures', 'keras');
const cases = fs.readdirSync(dir).filter((d) => fs.existsSync(path.join(dir, d, 'io.json')));

interface TensorJson {
  dtype: string;
  shape: number[];
  data: Array<number | boolean>;
}

function toTensor(t: TensorJson): tf.Tensor {
  if (t.dtype === 'bool')
    return tf.tensor(
      t.data.map((v) => (v ? 1 : 0)),
      t.shape,
      'bool',
    );
  return tf.tensor(t.data as number[], t.shape, t.dtype.startsWith('int') ? 'int32' : 'float32');
}

describeBackends('Keras-converted models', (backend) => {
  it('covers at least 12 models of tf-keras 2 and Keras 3', () => {
    expect(cases.length).toBeGreaterThanOrEqual(12);
    expect(cases.some((c) => c.startsWith('k2_'))).toBe(true);
    expect(cases.some((c) => c.startsWith('k3_'))).toBe(true);
  });

  it('fails in plain tfjs-layers, as tfjs issue 8574 reports, without loadKerasModel', async () => {
    // importing this package registers MultiHeadAttention; tf-keras' tensor kwargs and Keras 3's
    // node format still break plain loading
    await expect(
      tf.loadLayersModel(fileSystem(path.join(dir, 'k2_mha_cross_key'))),
    ).rejects.toThrow();
    await expect(tf.loadLayersModel(fileSystem(path.join(dir, 'k3_mha_block')))).rejects.toThrow(
      /Corrupted configuration|batchInputShape|expected array/,
    );
  });

  for (const name of cases) {
    it(`${name}: loads and predicts as Keras does (atol 1e-5, rtol 1e-5)`, async () => {
      const io = JSON.parse(fs.readFileSync(path.join(dir, name, 'io.json'), 'utf8'));
      const model = await loadKerasModel(path.join(dir, name, 'model.json'));
      const inputs = (io.inputs as TensorJson[]).map(toTensor);
      let out = model.predict(inputs.length === 1 ? inputs[0] : inputs) as tf.Tensor | tf.Tensor[];
      if (!Array.isArray(out)) out = [out];
      expect(out.length).toBe(io.outputs.length);
      let worst = 0;
      (io.outputs as TensorJson[]).forEach((want, i) => {
        const expected = toTensor(want);
        expect(out[i].shape).toEqual(want.shape);
        worst = Math.max(worst, maxAbsDiff(out[i], expected));
        expectClose(out[i], expected, 1e-5, 1e-5);
      });
      recordFidelity({
        case: name,
        reference: `${io.format} (Keras ${io.keras})`,
        backend,
        maxAbsError: worst,
      });
      tf.dispose([...inputs, ...out]);
      model.dispose();
    });
  }
});

describeBackends('greedy generation of Keras-converted causal LMs', () => {
  const lms = cases.filter(
    (c) => JSON.parse(fs.readFileSync(path.join(dir, c, 'io.json'), 'utf8')).generate != null,
  );

  it('covers at least 3 language models', () => {
    expect(lms.length).toBeGreaterThanOrEqual(3);
  });

  for (const name of lms) {
    it(`${name}: generate gives Keras' greedy tokens, token for token (with and without the cache)`, async () => {
      const io = JSON.parse(fs.readFileSync(path.join(dir, name, 'io.json'), 'utf8'));
      const g = io.generate as {
        prompts: number[][];
        promptLengths: number[];
        maxLength: number;
        padId: number;
        ids: number[][];
      };
      const model = await loadKerasModel(path.join(dir, name, 'model.json'));
      // all three decode with the key / value cache: the keras.io GPT and the GQA LM (their
      // mask_zero masks keep every known token) and GPT-2's graph (its padding mask input is
      // all ones at the known positions)
      expect(cachedDecodingRefusal(model)).toBeNull();
      for (const useCache of [true, false]) {
        const ids = await generate(model, g.prompts, {
          maxLength: g.maxLength,
          promptLengths: g.promptLengths,
          padId: g.padId,
          useCache,
        });
        expect(ids.arraySync()).toEqual(g.ids);
        ids.dispose();
      }
      model.dispose();
    });
  }
});

describe('convertKerasArtifacts refusals', () => {
  const load = (name: string) => {
    const json = JSON.parse(fs.readFileSync(path.join(dir, name, 'model.json'), 'utf8'));
    return {
      modelTopology: json.modelTopology,
      weightSpecs: json.weightsManifest.flatMap((g: {weights: unknown[]}) => g.weights),
    };
  };
  const mha = (a: {
    modelTopology: {
      model_config: {
        config: {
          layers: Array<{
            class_name: string;
            config: Record<string, unknown>;
            inbound_nodes: unknown;
          }>;
        };
      };
    };
  }) =>
    a.modelTopology.model_config.config.layers.find((l) => l.class_name === 'MultiHeadAttention')!;

  it('refuses Keras options it does not implement, naming them, instead of ignoring them', async () => {
    const a = load('k3_mha_block');
    mha(a).config.use_rope = true;
    await expect(convertKerasArtifacts(a as tf.io.ModelArtifacts)).rejects.toThrow(
      /layer 'multi_head_attention' \(MultiHeadAttention\) has the option 'use_rope' = true, which this package does not implement/,
    );
  });

  it('refuses explicit mask tensors and shared attention layers', async () => {
    const a = load('k2_mha_cross_key');
    const layer = mha(a);
    (layer.inbound_nodes as unknown[][][])[0][0][3] = {
      value: ['input_3', 0, 0],
      query_mask: ['input_2', 0, 0],
    };
    await expect(convertKerasArtifacts(a as tf.io.ModelArtifacts)).rejects.toThrow(
      /explicit 'query_mask' tensor/,
    );
    const b = load('k2_mha_cross_key');
    const nodes = mha(b).inbound_nodes as unknown[];
    nodes.push(nodes[0]);
    await expect(convertKerasArtifacts(b as tf.io.ModelArtifacts)).rejects.toThrow(
      /is called 2 times/,
    );
  });

  it('maps Keras 3 weight paths to tfjs weight names', async () => {
    const a = await convertKerasArtifacts(load('k3_mha_gate_window') as tf.io.ModelArtifacts);
    expect(a.weightSpecs!.map((w) => w.name).sort()).toEqual(
      ['attention_output', 'gate', 'key', 'query', 'value']
        .flatMap((n) => [`multi_head_attention_3/${n}/bias`, `multi_head_attention_3/${n}/kernel`])
        .sort(),
    );
  });
});
