/**
 * keras-hub's position layers against plain loops written from their formulas: RotaryEmbedding
 * (halves rotated, any sequence / feature axis, scaling factor, start index), SinePositionEncoding
 * (sin on even, cos on odd features), PositionEmbedding (table rows from a start index); refused
 * options (harness cases: helpers/layer_harness.ts). Tolerance 1e-5 (abs and rel).
 */
import * as tf from '@tensorflow/tfjs';

import {PositionEmbedding, RotaryEmbedding, SinePositionEncoding} from '../src';
import {describeBackends} from './helpers/backends';
import {expectClose} from './helpers/close';
import {randTensor} from './helpers/data';
import {saveToMemory} from './helpers/save';

const TOL = 1e-5;

/** RoFormer on one vector at position `pos`: pairs (i, i + D/2) rotated by pos * w^(-2i/D). */
function ropeVector(x: number[], pos: number, wavelength: number): number[] {
  const D = x.length;
  const out = new Array(D).fill(0);
  for (let i = 0; i < D / 2; i++) {
    const angle = pos * Math.pow(wavelength, (-2 * i) / D);
    out[i] = x[i] * Math.cos(angle) - x[i + D / 2] * Math.sin(angle);
    out[i + D / 2] = x[i + D / 2] * Math.cos(angle) + x[i] * Math.sin(angle);
  }
  return out;
}

describeBackends('position layers', () => {
  it('RotaryEmbedding = plain loops (scaling factor, start index, sequence axis 2, feature axis 1)', () => {
    tf.tidy(() => {
      const x = randTensor([2, 5, 3, 6], 1); // [batch, T, heads, D]
      const rope = new RotaryEmbedding({maxWavelength: 100, scalingFactor: 2});
      const y = rope.apply(x, {startIndex: 3}) as tf.Tensor;
      const X = x.arraySync() as number[][][][];
      const expected = X.map((b) =>
        b.map((heads, t) => heads.map((v) => ropeVector(v, (t + 3) / 2, 100))),
      );
      expectClose(y, expected, TOL, TOL);
      // features on axis 1, sequence on axis 2: the same numbers, transposed
      const xt = tf.transpose(x, [0, 3, 1, 2]); // [batch, D, T, heads]
      const other = new RotaryEmbedding({
        maxWavelength: 100,
        scalingFactor: 2,
        sequenceAxis: 2,
        featureAxis: 1,
      });
      expectClose(
        other.apply(xt, {startIndex: 3}) as tf.Tensor,
        tf.transpose(y, [0, 3, 1, 2]),
        TOL,
        TOL,
      );
    });
  });

  it('SinePositionEncoding = sin / cos of t * (1 / w)^(2 floor(j / 2) / D), broadcast to the input', () => {
    tf.tidy(() => {
      const x = randTensor([2, 4, 6], 2);
      const y = new SinePositionEncoding({maxWavelength: 50}).apply(x, {
        startIndex: 1,
      }) as tf.Tensor;
      const row = (t: number) =>
        Array.from({length: 6}, (_, j) => {
          const a = t * Math.pow(1 / 50, (2 * Math.floor(j / 2)) / 6);
          return j % 2 === 0 ? Math.sin(a) : Math.cos(a);
        });
      const one = [1, 2, 3, 4].map(row);
      expectClose(y, [one, one], TOL, TOL);
    });
  });

  it('PositionEmbedding returns table rows from the start index; too far is an error', () => {
    tf.tidy(() => {
      const layer = new PositionEmbedding({sequenceLength: 6});
      const x = randTensor([2, 3, 4], 3);
      layer.apply(x);
      const table = layer.getWeights()[0].arraySync() as number[][];
      const y = layer.apply(x, {startIndex: 2}) as tf.Tensor;
      expectClose(y, [table.slice(2, 5), table.slice(2, 5)], 0, 0);
      expect(() => layer.apply(x, {startIndex: 4})).toThrow(
        'positions 4 to 6 exceed sequenceLength 6',
      );
    });
  });

  it('serialize: config round trips and a saved model loads with the same outputs', async () => {
    const x = tf.input({shape: [4, 6]});
    const y = new SinePositionEncoding({maxWavelength: 30}).apply(x) as tf.SymbolicTensor;
    const z = new RotaryEmbedding({scalingFactor: 4}).apply(
      tf.layers.add().apply([x, y]),
    ) as tf.SymbolicTensor;
    const model = tf.model({inputs: x, outputs: z});
    const loaded = await tf.loadLayersModel(tf.io.fromMemory(await saveToMemory(model)));
    const input = randTensor([2, 4, 6], 4);
    expectClose(loaded.predict(input) as tf.Tensor, model.predict(input) as tf.Tensor, 1e-6, 1e-6);
  });

  it('refuses options it does not implement, naming them', () => {
    expect(() => new RotaryEmbedding({ropeType: 'yarn'} as never)).toThrow(
      'RotaryEmbedding: ropeType "yarn" is not implemented; only \'linear\'',
    );
    expect(() => new RotaryEmbedding({lowFreqFactor: 1} as never)).toThrow(
      "RotaryEmbedding: the option 'lowFreqFactor' = 1 is not implemented",
    );
    expect(() => new SinePositionEncoding({maxWavelength: 0})).toThrow(
      'SinePositionEncoding: expected maxWavelength to be a number > 0, received 0',
    );
    tf.tidy(() => {
      expect(() => new RotaryEmbedding().apply(tf.ones([1, 2, 5]))).toThrow(
        /with an even feature size/,
      );
    });
  });
});
