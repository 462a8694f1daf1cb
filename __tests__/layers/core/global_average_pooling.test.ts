/**
 * GlobalAveragePooling1D (src/layers/core/global_average_pooling.ts): Keras 3's masked average.
 * Against Keras 3.15.1 / keras-hub 0.32 (fixtures/masked_layers.py: each `.keras` file loaded by
 * loadKerasModel predicts Keras' outputs on rows padded with 0, the masked ids; tolerance 1e-5
 * absolute, measured below 1e-6) and against plain loops (1e-5: float32 sums of values up to 100).
 */
import * as fs from 'fs';
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {GlobalAveragePooling1D, loadKerasModel} from '../../../src';
import {describeBackends} from '../../helpers/backends';
import {maxAbsDiff} from '../../helpers/close';

const DIR = path.join(__dirname, '..', '..', 'fixtures', 'masked_layers');
const IO = JSON.parse(fs.readFileSync(path.join(DIR, 'io.json'), 'utf8')) as Record<
  string,
  unknown
>;
const IDS = IO.ids as number[][];
const TOL = 1e-5;

/** Plain-loop masked mean over axis 1 of `x [B, T, F]` with `mask [B, T]`. */
function maskedMean(x: number[][][], mask: boolean[][]): number[][] {
  return x.map((row, b) => {
    const out = new Array<number>(row[0].length).fill(0);
    let n = 0;
    row.forEach((step, t) => {
      if (!mask[b][t]) return;
      n++;
      step.forEach((v, f) => (out[f] += v));
    });
    return out.map((v) => v / n);
  });
}

describeBackends('GlobalAveragePooling1D with a Keras mask', () => {
  for (const name of ['text_classifier', 'pooling', 'pooling_keepdims']) {
    it(`${name}.keras predicts Keras' outputs on padded rows`, async () => {
      const model = await loadKerasModel(
        new Uint8Array(fs.readFileSync(path.join(DIR, `${name}.keras`))),
      );
      const before = tf.memory().numTensors;
      const x = tf.tensor2d(IDS, undefined, 'int32');
      const y = model.predict(x) as tf.Tensor;
      expect(maxAbsDiff(y, IO[name] as number[])).toBeLessThan(TOL);
      tf.dispose([x, y]);
      expect(tf.memory().numTensors).toBe(before);
      model.dispose();
    });
  }

  it('averages over the unmasked steps only (plain loops), leaking nothing', () => {
    const x = [
      [
        [1, 2],
        [3, -4],
        [100, 100],
      ],
      [
        [0.5, 1],
        [-1, 2],
        [4, 8],
      ],
    ];
    const mask = [
      [true, true, false],
      [true, true, true],
    ];
    const layer = new GlobalAveragePooling1D({name: 'gap'});
    const xt = tf.tensor3d(x);
    const mt = tf.tensor2d(mask, undefined, 'bool');
    const before = tf.memory().numTensors;
    const y = layer.call(xt, {mask: mt});
    expect(maxAbsDiff(y, maskedMean(x, mask))).toBeLessThan(1e-5);
    // without a mask, the plain mean; channelsFirst pools the last axis
    const plain = layer.call(xt, {});
    expect(
      maxAbsDiff(
        plain,
        maskedMean(x, [
          [true, true, true],
          [true, true, true],
        ]),
      ),
    ).toBeLessThan(1e-5);
    const first = new GlobalAveragePooling1D({dataFormat: 'channelsFirst', keepdims: true});
    const yf = first.call(tf.transpose(xt, [0, 2, 1]), {mask: mt});
    expect(yf.shape).toEqual([2, 2, 1]);
    expect(maxAbsDiff(tf.squeeze(yf, [2]), maskedMean(x, mask))).toBeLessThan(1e-5);
    expect(() => layer.call(xt, {mask: tf.ones([2, 2], 'bool')})).toThrow(
      "Layer 'gap' (GlobalAveragePooling1D): expected a mask of shape [2, 3] ([batch, steps]) " +
        'for the input [2, 3, 2], received [2, 2]',
    );
    tf.dispose([y, plain, yf]);
    expect(tf.memory().numTensors).toBe(before + 3); // the transposed input and two ones masks
    tf.dispose([xt, mt]);
  });

  it("is what a loaded model gets for tfjs' GlobalAveragePooling1D (registered under its name)", () => {
    const map = tf.serialization.SerializationMap.getMap().classNameMap;
    expect(map.GlobalAveragePooling1D[0]).toBe(GlobalAveragePooling1D);
  });

  it("a keras.layers.Embedding mask, which Keras 3.15 passes as a NotEqual node's tensor, is refused by name", async () => {
    const bytes = new Uint8Array(fs.readFileSync(path.join(DIR, 'embedding_pooling.keras')));
    await expect(loadKerasModel(bytes)).rejects.toThrow(
      /loadKerasModel: layer 'global_average_pooling1d(_\d+)?' \(GlobalAveragePooling1D\) is called with tensor arguments mask/,
    );
  });

  /** The fixture's Keras models built in tfjs (the package's pooling, tfjs' other layers). */
  function recurrentModel(kind: string): tf.LayersModel {
    const ids = tf.input({shape: [IDS[0].length], dtype: 'int32'});
    let x = tf.layers
      .embedding({inputDim: 30, outputDim: 6, maskZero: true})
      .apply(ids) as tf.SymbolicTensor;
    const pool = (t: tf.SymbolicTensor) =>
      new GlobalAveragePooling1D().apply(t) as tf.SymbolicTensor;
    if (kind === 'lstm_sequences') {
      x = pool(
        tf.layers
          .lstm({units: 5, returnSequences: true, recurrentActivation: 'sigmoid'})
          .apply(x) as tf.SymbolicTensor,
      );
    } else if (kind === 'lstm_last') {
      x = tf.layers.lstm({units: 5, recurrentActivation: 'sigmoid'}).apply(x) as tf.SymbolicTensor;
    } else if (kind === 'bidirectional_lstm') {
      const lstm = tf.layers.lstm({units: 4, recurrentActivation: 'sigmoid'}) as unknown as tf.RNN;
      x = tf.layers.bidirectional({layer: lstm}).apply(x) as tf.SymbolicTensor;
    } else {
      const dense = tf.layers.dense({units: 4});
      x = pool(tf.layers.timeDistributed({layer: dense}).apply(x) as tf.SymbolicTensor);
    }
    const y = tf.layers.dense({units: 2}).apply(x) as tf.SymbolicTensor;
    return tf.model({inputs: ids, outputs: y});
  }

  const RECURRENT = IO.recurrent as Record<string, {weights: unknown[]; outputs: number[]}>;
  for (const kind of Object.keys(RECURRENT)) {
    it(`${kind}: tfjs' layer under a mask, then the masked pooling, predicts what Keras does`, () => {
      const model = recurrentModel(kind);
      const {weights, outputs} = RECURRENT[kind];
      model.setWeights(weights.map((w) => tf.tensor(w as number[])));
      const x = tf.tensor2d(IDS, undefined, 'int32');
      const y = model.predict(x) as tf.Tensor;
      expect(maxAbsDiff(y, outputs)).toBeLessThan(TOL);
      tf.dispose([x, y]);
      model.dispose();
    });
  }
});
