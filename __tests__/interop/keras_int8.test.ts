/**
 * Keras 3.15's int8 models (fixtures/int8_models.py: `model.quantize("int8")` on a Dense +
 * EinsumDense + Embedding model and on a decoder-only LM with tied keras.layers.ReversibleEmbedding
 * and keras-hub TransformerDecoders): the float model loaded with loadKerasModel and quantized
 * here, and the int8 model loaded as Keras wrote it, predict Keras' int8 outputs within 1e-4
 * (a rounding flip of one int8 value moves an output by about 1e-3, dequantized float weights
 * miss by more, so this holds only with Keras' own arithmetic). Greedy tokens of the quantized LM
 * against Keras' int8 tokens and against the float model's.
 */
import * as path from 'path';
import * as fs from 'fs';

import * as tf from '@tensorflow/tfjs';

import {generate, loadKerasModel, quantize} from '../../src/index';
import {describeBackends} from '../helpers/backends';
import {maxAbsDiff} from '../helpers/close';

const TOL = 1e-4;
const DIR = path.join(__dirname, '..', 'fixtures', 'int8');

interface TensorJson {
  dtype: string;
  shape: number[];
  data: number[];
}
interface Io {
  inputs: TensorJson[];
  float_outputs: TensorJson[];
  int8_outputs: TensorJson[];
  generate?: {
    prompts: number[][];
    steps: number;
    float_tokens: number[][];
    int8_tokens: number[][];
  };
}

function io(name: string): Io {
  return JSON.parse(fs.readFileSync(path.join(DIR, name, 'io.json'), 'utf8')) as Io;
}

function tensorOf(t: TensorJson): tf.Tensor {
  return tf.tensor(t.data, t.shape, t.dtype === 'int32' ? 'int32' : 'float32');
}

function diff(model: tf.LayersModel, fixture: Io, key: 'float_outputs' | 'int8_outputs'): number {
  const x = tensorOf(fixture.inputs[0]);
  const y = model.predict(x) as tf.Tensor;
  const want = tensorOf(fixture[key][0]);
  expect(y.shape).toEqual(want.shape);
  const d = maxAbsDiff(y, want);
  tf.dispose([x, y, want]);
  return d;
}

const CASES = ['dense_einsum_embedding', 'decoder_lm'];

describeBackends('Keras 3 int8 models', (backend) => {
  for (const name of CASES) {
    it(`${name}: quantize(float model loaded from Keras) predicts Keras' int8 outputs`, async () => {
      const fixture = io(name);
      const float = await loadKerasModel(path.join(DIR, name, 'float', 'model.json'));
      expect(diff(float, fixture, 'float_outputs')).toBeLessThan(TOL);
      const before = tf.memory().numTensors;
      const q = quantize(float, 'int8');
      const d = diff(q, fixture, 'int8_outputs');
      console.log(`int8 ${name} [${backend}]: quantize(float) vs Keras int8, max |diff| ${d}`);
      expect(d).toBeLessThan(TOL);
      // dequantized weights are not Keras' arithmetic: the float outputs are far off
      expect(diff(q, fixture, 'float_outputs')).toBeGreaterThan(1e-3);
      q.dispose();
      expect(tf.memory().numTensors).toBe(before);
      float.dispose();
    });
  }

  for (const name of CASES) {
    it(`${name}: the int8 model Keras wrote, loaded, predicts Keras' int8 outputs`, async () => {
      const fixture = io(name);
      const q = await loadKerasModel(path.join(DIR, name, 'int8', 'model.json'));
      const d = diff(q, fixture, 'int8_outputs');
      console.log(`int8 ${name} [${backend}]: loaded Keras int8 vs Keras int8, max |diff| ${d}`);
      expect(d).toBeLessThan(TOL);
      q.dispose();
    });
  }

  it('decoder_lm: greedy tokens of the quantized model', async () => {
    const fixture = io('decoder_lm');
    const g = fixture.generate as NonNullable<Io['generate']>;
    const float = await loadKerasModel(path.join(DIR, 'decoder_lm', 'float', 'model.json'));
    const q = quantize(float, 'int8');
    const maxLength = g.prompts[0].length + g.steps;
    const run = async (m: tf.LayersModel) => {
      const fallbacks: string[] = [];
      const t = await generate(m, g.prompts, {maxLength, onFallback: (r) => fallbacks.push(r)});
      expect(fallbacks).toEqual([]); // cached decoding, int8 or float
      const rows = t.arraySync() as number[][];
      t.dispose();
      return rows;
    };
    const tokens = await run(q);
    expect(tokens).toEqual(g.int8_tokens);
    const floatTokens = await run(float);
    expect(floatTokens).toEqual(g.float_tokens);
    let same = 0;
    let total = 0;
    tokens.forEach((row, i) =>
      row.slice(g.prompts[i].length).forEach((t, j) => {
        total += 1;
        same += t === floatTokens[i][g.prompts[i].length + j] ? 1 : 0;
      }),
    );
    console.log(`int8 decoder_lm [${backend}]: greedy int8 vs float agreement ${same}/${total}`);
    q.dispose();
    float.dispose();
  });
});
