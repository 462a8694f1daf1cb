/**
 * The Softmax layer with a Keras mask (src/layers/core/softmax_layer.ts), against plain loops of
 * Keras 3.15's `Softmax.call(inputs, mask)`: masked logits -1e9, softmax, masked outputs 0 (a row
 * masked entirely: zeros). Tolerance 1e-6 absolute.
 */
import * as tf from '@tensorflow/tfjs';

import '../../../src';
import {describeBackends} from '../../helpers/backends';
import {maxAbsDiff} from '../../helpers/close';

/** Keras' masked softmax of each row of `x` over its last axis. */
function kerasSoftmax(x: number[][], keep: boolean[][]): number[][] {
  return x.map((row, i) => {
    const logits = row.map((v, j) => (keep[i][j] ? v : -1e9));
    const m = Math.max(...logits);
    const e = logits.map((v) => Math.exp(v - m));
    const s = e.reduce((a, b) => a + b, 0);
    return e.map((v, j) => (keep[i][j] ? v / s : 0));
  });
}

describeBackends('Softmax layer with a Keras mask', () => {
  it("is Keras' masked softmax for loaded models (rows masked entirely give zeros)", () => {
    const Cls = tf.serialization.SerializationMap.getMap().classNameMap
      .Softmax[0] as unknown as new (args: {name: string; axis: number}) => tf.layers.Layer;
    const layer = new Cls({name: 'sm', axis: -1});
    const x = [
      [0.5, -1, 2, 0.25],
      [1, 2, 3, 4],
      [3, 1, -2, 0],
    ];
    const keep = [
      [true, false, true, true],
      [false, false, false, false],
      [true, true, true, true],
    ];
    const xt = tf.tensor2d(x);
    const mt = tf.tensor2d(keep, undefined, 'bool');
    const before = tf.memory().numTensors;
    const y = layer.call(xt, {mask: mt}) as tf.Tensor;
    expect(maxAbsDiff(y, kerasSoftmax(x, keep))).toBeLessThan(1e-6);
    // over axis 0: the transposed problem
    const layer0 = new Cls({name: 'sm0', axis: 0});
    const y0 = layer0.call(tf.transpose(xt), {mask: tf.transpose(mt)}) as tf.Tensor;
    expect(maxAbsDiff(tf.transpose(y0), kerasSoftmax(x, keep))).toBeLessThan(1e-6);
    // the mask is passed on, as Keras' supports_masking does
    expect(layer.computeMask(xt, mt)).toBe(mt);
    expect(() => layer.call(xt, {mask: tf.ones([3, 3], 'bool')})).toThrow(
      "Layer 'sm' (Softmax): the mask must be broadcastable to the inputs (each mask dimension " +
        "1 or the input's, aligned on the right), as Keras requires; received inputs [3, 4] and " +
        'mask [3, 3]',
    );
    tf.dispose([y, y0]);
    expect(tf.memory().numTensors).toBe(before + 4); // the two transposes and the ones mask
    tf.dispose([xt, mt]);
  });
});
