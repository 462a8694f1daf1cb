/**
 * geluApproximate (src/ops/activations.ts), keras-hub's `gelu_approximate`: its values against
 * the formula in float64, its gradient against float64 central differences of that formula (not
 * its closed form), and its peak memory through a gradient against the same formula in plain
 * tfjs ops (whose tape keeps every intermediate: the custom gradient keeps x alone).
 */
import * as tf from '@tensorflow/tfjs';

import {geluApproximate} from '../../src/ops/activations';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';

const gelu64 = (x: number) =>
  0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
const XS = [-6, -3, -1.5, -0.7, -0.1, 0, 0.05, 0.4, 1, 2.2, 4, 8];

describeBackends('geluApproximate', () => {
  it('is the tanh form of GELU (float64 formula, 1e-6)', () => {
    const x = tf.tensor(XS);
    const y = geluApproximate(x);
    expectClose(y, XS.map(gelu64), 1e-6, 1e-6);
    tf.dispose([x, y]);
  });

  it("has the formula's derivative (float64 central differences, 1e-5)", () => {
    const x = tf.tensor(XS);
    const before = tf.memory().numTensors;
    const dy = XS.map((_, i) => 1 + 0.25 * i); // an upstream gradient that is not all ones
    const g = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(geluApproximate(t), tf.tensor(dy))))(x);
    const h = 1e-5;
    const expected = XS.map((v, i) => (dy[i] * (gelu64(v + h) - gelu64(v - h))) / (2 * h));
    expectClose(g, expected, 1e-5, 1e-5);
    g.dispose();
    expect(tf.memory().numTensors).toBe(before);
    x.dispose();
  });

  it('peaks under half what the same GELU of plain tfjs ops peaks at, gradient included', async () => {
    const n = 4096; // 16 KiB a tensor
    const x = tf.tensor(Array.from({length: n}, (_, i) => (i % 97) / 10 - 4.8));
    // the formula as seven plain ops, each with tfjs' own gradient and saved tensors
    const plain = (t: tf.Tensor) => {
      const inner = tf.mul(Math.sqrt(2 / Math.PI), tf.add(t, tf.mul(0.044715, tf.pow(t, 3))));
      return tf.mul(tf.mul(0.5, t), tf.add(1, tf.tanh(inner)));
    };
    const peak = async (f: (t: tf.Tensor) => tf.Tensor) => {
      const base = tf.memory().numBytes;
      const p = await tf.profile(() => {
        const chain = (t: tf.Tensor) => {
          let h = t;
          for (let i = 0; i < 16; i++) h = f(h);
          return tf.sum(h);
        };
        tf.dispose(tf.grad(chain)(x));
      });
      return p.peakBytes - base;
    };
    const ours = await peak(geluApproximate);
    const theirs = await peak(plain);
    expect(ours).toBeLessThan(theirs / 2);
    x.dispose();
  });
});
