/**
 * keras-hub's position layers against plain loops written from their formulas: RotaryEmbedding
 * (halves rotated, any sequence / feature axis, scaling factor, start index), SinePositionEncoding
 * (sin on even, cos on odd features), PositionEmbedding (table rows from a start index); refused
 * options (harness cases: helpers/layer_harness.ts). Tolerance 1e-5 (abs and rel).
 */
import * as tf from '@tensorflow/tfjs';

import {PositionEmbedding, RotaryEmbedding, SinePositionEncoding} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {expectClose} from '../../helpers/close';
import {randTensor} from '../../helpers/data';
import {saveToMemory} from '../../helpers/save';

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

  describe('the positions call option (keras-hub: explicit, ragged or left-padded positions)', () => {
    // left-padded row 1: its tokens sit at positions 0, 0, 0, 1, 2
    const POS = [
      [0, 1, 2, 3, 4],
      [0, 0, 0, 1, 2],
    ];
    const sineRow = (t: number, D: number, w: number) =>
      Array.from({length: D}, (_, j) => {
        const a = t * Math.pow(1 / w, (2 * Math.floor(j / 2)) / D);
        return j % 2 === 0 ? Math.sin(a) : Math.cos(a);
      });

    it('RotaryEmbedding: [batch, T] and [T] positions = plain loops; startIndex ignored', () => {
      const before = tf.memory().numTensors;
      tf.tidy(() => {
        const x = randTensor([2, 5, 3, 6], 11); // [batch, T, heads, D]
        const X = x.arraySync() as number[][][][];
        const rope = new RotaryEmbedding({maxWavelength: 100, scalingFactor: 2});
        const positions = tf.tensor2d(POS, [2, 5], 'int32');
        const y = rope.apply(x, {positions, startIndex: 3}) as tf.Tensor;
        const expected = X.map((b, i) =>
          b.map((heads, t) => heads.map((v) => ropeVector(v, POS[i][t] / 2, 100))),
        );
        expectClose(y, expected, TOL, TOL);
        // [T] float positions (fractional ones too) apply to every row
        const flat = [0.5, 2, 7, 1, 3];
        const y1 = rope.apply(x, {positions: tf.tensor1d(flat)}) as tf.Tensor;
        const expected1 = X.map((b) =>
          b.map((heads, t) => heads.map((v) => ropeVector(v, flat[t] / 2, 100))),
        );
        expectClose(y1, expected1, TOL, TOL);
        // sequence on axis 0, batch on axis 1 (the first other axis), features on axis 2
        const x3 = randTensor([2, 5, 6], 12); // [batch, T, D]
        const seqFirst = new RotaryEmbedding({
          maxWavelength: 100,
          scalingFactor: 2,
          sequenceAxis: 0,
        });
        const y3 = seqFirst.apply(tf.transpose(x3, [1, 0, 2]), {positions}) as tf.Tensor;
        const X3 = x3.arraySync() as number[][][];
        const expected3 = X3.map((b, i) => b.map((v, t) => ropeVector(v, POS[i][t] / 2, 100)));
        expectClose(tf.transpose(y3, [1, 0, 2]), expected3, TOL, TOL);
        // features on axis 1, sequence on axis 2: batch on axis 0
        const xt = tf.transpose(x, [0, 3, 1, 2]); // [batch, D, T, heads]
        const other = new RotaryEmbedding({
          maxWavelength: 100,
          scalingFactor: 2,
          sequenceAxis: 2,
          featureAxis: 1,
        });
        expectClose(
          other.apply(xt, {positions}) as tf.Tensor,
          tf.transpose(y, [0, 3, 1, 2]),
          TOL,
          TOL,
        );
      });
      expect(tf.memory().numTensors).toBe(before);
    });

    it('SinePositionEncoding: [batch, T] and [T] positions = plain loops; startIndex ignored', () => {
      const before = tf.memory().numTensors;
      tf.tidy(() => {
        const x = randTensor([2, 5, 6], 13);
        const sine = new SinePositionEncoding({maxWavelength: 50, startIndex: 4});
        const y = sine.apply(x, {positions: tf.tensor2d(POS, [2, 5], 'int32')}) as tf.Tensor;
        expectClose(
          y,
          POS.map((row) => row.map((t) => sineRow(t, 6, 50))),
          TOL,
          TOL,
        );
        const flat = [3, 1.5, 0, 9, 2];
        const y1 = sine.apply(x, {positions: tf.tensor1d(flat), startIndex: 2}) as tf.Tensor;
        const one = flat.map((t) => sineRow(t, 6, 50));
        expectClose(y1, [one, one], TOL, TOL);
      });
      expect(tf.memory().numTensors).toBe(before);
    });

    it('PositionEmbedding: rows gathered at [batch, T] or [T] positions; startIndex ignored', () => {
      const layer = new PositionEmbedding({sequenceLength: 6, startIndex: 1});
      tf.tidy(() => void layer.apply(tf.zeros([2, 5, 4]))); // builds the table
      const before = tf.memory().numTensors;
      tf.tidy(() => {
        const x = randTensor([2, 5, 4], 14);
        const table = layer.getWeights()[0].arraySync() as number[][];
        const y = layer.apply(x, {positions: tf.tensor2d(POS, [2, 5], 'int32')}) as tf.Tensor;
        expectClose(
          y,
          POS.map((row) => row.map((t) => table[t])),
          0,
          0,
        );
        // [T] float32 whole numbers, with a startIndex that is ignored
        const flat = [5, 0, 5, 2, 1];
        const y1 = layer.apply(x, {positions: tf.tensor1d(flat), startIndex: 3}) as tf.Tensor;
        const one = flat.map((t) => table[t]);
        expectClose(y1, [one, one], 0, 0);
        // rank 4 input [2, 2, 5, 4]: positions [2, 5] broadcast on axis -3
        const x4 = tf.zeros([3, 2, 5, 4]);
        const y4 = layer.apply(x4, {positions: tf.tensor2d(POS, [2, 5], 'int32')}) as tf.Tensor;
        const rows = POS.map((row) => row.map((t) => table[t]));
        expectClose(y4, [rows, rows, rows], 0, 0);
      });
      expect(tf.memory().numTensors).toBe(before);
    });

    it('refuses positions of the wrong shape, dtype, values or batch, and in functional models', () => {
      const pe = new PositionEmbedding({sequenceLength: 6, name: 'pe'});
      const rope = new RotaryEmbedding({name: 'rope'});
      const sine = new SinePositionEncoding({name: 'sine'});
      tf.tidy(() => {
        const x = tf.zeros([2, 5, 4]);
        expect(() => pe.apply(x, {positions: tf.tensor1d([0, 1, 2], 'int32')})).toThrow(
          "Layer 'pe': expected positions to be an int32 or float32 tensor [5] or [batch, 5] " +
            "(the input's length), received a int32 tensor of shape [3]",
        );
        expect(() => rope.apply(x, {positions: [0, 1, 2, 3, 4]})).toThrow(
          "Layer 'rope': expected positions to be an int32 or float32 tensor [5] or [batch, 5] " +
            "(the input's length), received [0,1,2,3,4]",
        );
        expect(() => sine.apply(x, {positions: tf.zeros([2, 5], 'bool')})).toThrow(
          'received a bool tensor of shape [2, 5]',
        );
        expect(() => pe.apply(x, {positions: tf.tensor1d([0, 1, 6, 2, 3], 'int32')})).toThrow(
          "Layer 'pe': expected positions to be whole numbers 0 .. 5 (sequenceLength 6), received 6 at [2]",
        );
        expect(() =>
          pe.apply(x, {
            positions: tf.tensor2d([
              [0, 1, 2, 3, 4],
              [0, 1, 2, 2.5, 3],
            ]),
          }),
        ).toThrow(
          'expected positions to be whole numbers 0 .. 5 (sequenceLength 6), received 2.5 at [1, 3]',
        );
        expect(() => pe.apply(x, {positions: tf.tensor1d([0, -1, 1, 2, 3], 'int32')})).toThrow(
          'received -1 at [1]',
        );
        expect(() => sine.apply(x, {positions: tf.tensor1d([0, 1, NaN, 2, 3])})).toThrow(
          "Layer 'sine': expected positions to be finite numbers, received NaN at [2]",
        );
        expect(() => rope.apply(x, {positions: tf.zeros([3, 5], 'int32')})).toThrow(
          "Layer 'rope': positions of 3 rows do not match the input of shape [2, 5, 4]: " +
            "expected 1 row or 2 (the input's axis 0)",
        );
        expect(() => sine.apply(tf.zeros([5, 4]), {positions: tf.zeros([2, 5], 'int32')})).toThrow(
          "Layer 'sine': positions of 2 rows do not match the input of shape [5, 4]: expected 1 " +
            'row or positions [length]',
        );
      });
      const input = tf.input({shape: [5, 4]});
      for (const layer of [pe, rope, sine]) {
        expect(() => layer.apply(input, {positions: tf.zeros([5], 'int32')})).toThrow(
          'positions works in eager calls, not in a functional model',
        );
      }
    });
  });
});
