/**
 * Keras 3.15's int8 EinsumDense for every equation form it quantizes (src/layers/core/
 * einsum_int8.ts): the `kernel_scale` axes derived from the equation as Keras'
 * `_analyze_quantization_info` does. Against Keras' own files and predictions
 * (fixtures/einsum_int8.py, Keras 3.15.1): each `<case>_int8.keras` loads with the scale shape
 * Keras stored and predicts Keras' int8 outputs, and `quantize` of `<case>_float.keras` predicts
 * the same. Tolerance 1e-5 absolute (outputs of magnitude ~1; the int8 products are exact, the
 * rest is float32 rounding: measured below 1e-6 on cpu and wasm).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {EinsumDense, loadKerasModel, quantize} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {maxAbsDiff} from '../../helpers/close';

const DIR = path.join(__dirname, '..', '..', 'fixtures', 'einsum_int8');
const TOL = 1e-5;

interface Case {
  equation: string;
  inputs: number[][][];
  int8_outputs: number[];
  float_outputs: number[];
  kernel_shape: number[];
  kernel_scale_shape: number[];
}
const IO = JSON.parse(fs.readFileSync(path.join(DIR, 'io.json'), 'utf8')) as Record<
  string,
  Case | string
>;
const CASES = Object.entries(IO).filter((e): e is [string, Case] => typeof e[1] !== 'string');

const load = (file: string) =>
  loadKerasModel(new Uint8Array(fs.readFileSync(path.join(DIR, file))));

function einsumLayer(model: tf.LayersModel): EinsumDense {
  return model.layers.find((l) => l instanceof EinsumDense) as EinsumDense;
}

describeBackends('int8 EinsumDense equations (Keras 3.15 files)', () => {
  it('covers the issue case abc,dc->abd (kernel [32, 16], scale [1, 1, 32])', () => {
    const c = IO.output_first as Case;
    expect([c.equation, c.kernel_shape, c.kernel_scale_shape]).toEqual([
      'abc,dc->abd',
      [32, 16],
      [1, 1, 32],
    ]);
    expect(CASES.length).toBeGreaterThanOrEqual(6);
  });

  for (const [name, c] of CASES) {
    it(`${name} (${c.equation}): Keras' int8 file loads with Keras' scale shape and predicts Keras' outputs`, async () => {
      const model = await load(`${name}_int8.keras`);
      const layer = einsumLayer(model);
      expect(layer.quantizationMode).toBe('int8');
      expect(layer.kernelScale?.shape).toEqual(c.kernel_scale_shape);
      const before = tf.memory().numTensors;
      const x = tf.tensor(c.inputs);
      const y = model.predict(x) as tf.Tensor;
      expect(maxAbsDiff(y, c.int8_outputs)).toBeLessThan(TOL);
      tf.dispose([x, y]);
      expect(tf.memory().numTensors).toBe(before);
      model.dispose();
    });

    it(`${name} (${c.equation}): quantize of the float file predicts what Keras' model.quantize gives`, async () => {
      const float = await load(`${name}_float.keras`);
      const x = tf.tensor(c.inputs);
      const yf = float.predict(x) as tf.Tensor;
      expect(maxAbsDiff(yf, c.float_outputs)).toBeLessThan(TOL);
      const q = quantize(float, 'int8');
      expect(einsumLayer(q).kernelScale?.shape).toEqual(c.kernel_scale_shape);
      const y = q.predict(x) as tf.Tensor;
      expect(maxAbsDiff(y, c.int8_outputs)).toBeLessThan(TOL);
      tf.dispose([x, y, yf]);
      float.dispose();
      q.dispose();
    });
  }

  it('an equation with an ellipsis is refused for int8 by name (Keras 3.15 cannot quantize it)', () => {
    const layer = new EinsumDense({
      name: 'ell',
      equation: '...b,bc->...c',
      outputShape: [5],
      quantizationMode: 'int8',
    });
    const before = tf.memory().numTensors;
    expect(() => layer.build([null, 3, 6])).toThrow(
      "EinsumDense 'ell': int8 cannot take the equation '...b,bc->...c': Keras 3.15 cannot " +
        "quantize an equation with an ellipsis ('...')",
    );
    expect(tf.memory().numTensors).toBe(before);
  });
});
