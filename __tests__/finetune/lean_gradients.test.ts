/**
 * leanVariableGrads (src/finetune/lean_gradients.ts): tfjs' `variableGrads` with the backward
 * pass' saved tensors and intermediate gradients freed as it goes. The same gradients as
 * `tf.variableGrads` (the same tape and gradient functions) on graphs with a shared activation,
 * a multi-output op, a custom gradient that hands back dy itself and a variable off the path; no
 * tensor left behind; and a lower peak than `tf.variableGrads` on a deep chain.
 */
import * as tf from '@tensorflow/tfjs';

import {leanVariableGrads} from '../../src/finetune/lean_gradients';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {lcg} from '../helpers/data';

// a custom op whose gradient is dy itself (the tensor object the backward pass handed it)
const passThrough = tf.customGrad(((x: tf.Tensor) => ({
  value: tf.mul(x, 1),
  gradFunc: (dy: tf.Tensor) => [dy],
})) as unknown as Parameters<typeof tf.customGrad>[0]);

describeBackends('leanVariableGrads', () => {
  it("gives tf.variableGrads' value and gradients, leaving no tensor behind", () => {
    const w1 = tf.variable(tf.tensor(lcg(12, 1), [4, 3]), true, 'lean_w1');
    const w2 = tf.variable(tf.tensor(lcg(6, 2), [3, 2]), true, 'lean_w2');
    const off = tf.variable(tf.tensor(lcg(3, 3), [3]), true, 'lean_off');
    const x = tf.tensor(lcg(20, 4), [5, 4]);
    const f = () =>
      tf.tidy(() => {
        const h = tf.tanh(tf.matMul(x, w1)); // used twice below
        const [a, b] = tf.split(h, [1, 2], 1); // two outputs
        const p = passThrough(tf.matMul(h, w2)) as tf.Tensor;
        return tf.sum(tf.add(tf.mul(p, p), tf.concat([tf.mul(a, 3), tf.exp(b)], 1).sum(1, true)));
      }) as tf.Scalar;
    const ref = tf.variableGrads(f, [w1, w2]);
    const before = tf.memory().numTensors;
    const lean = leanVariableGrads(f, [w1, w2, off]);
    expect(tf.memory().numTensors).toBe(before + 4);
    expectClose(lean.value, ref.value, 1e-6, 1e-6);
    expectClose(lean.grads[0], ref.grads[w1.name], 1e-6, 1e-6);
    expectClose(lean.grads[1], ref.grads[w2.name], 1e-6, 1e-6);
    // a variable f does not read gets zeros
    expect(Array.from(lean.grads[2].dataSync())).toEqual([0, 0, 0]);
    expect(Math.max(...Array.from(lean.grads[0].dataSync(), Math.abs))).toBeGreaterThan(1e-3);
    tf.dispose([lean.value, ...lean.grads]);
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose([ref.value, ...Object.values(ref.grads), w1, w2, off, x]);
  });

  it('refuses a non-scalar f and leaves the tape clean for the next gradient', () => {
    const w = tf.variable(tf.ones([2]), true, 'lean_vec');
    const before = tf.memory().numTensors;
    expect(() => leanVariableGrads(() => tf.mul(w, 2) as unknown as tf.Scalar, [w])).toThrow(
      'leanVariableGrads: f must return a scalar tensor',
    );
    expect(tf.memory().numTensors).toBe(before);
    const g = tf.grad((t: tf.Tensor) => tf.sum(tf.square(t)))(tf.tensor([1, 2]));
    expect(Array.from(g.dataSync())).toEqual([2, 4]);
    tf.dispose([g, w]);
  });

  it('peaks lower than tf.variableGrads when gradients, not saved tensors, dominate', async () => {
    // 12 layers of 3 negations of [512, 256] (0.5 MiB): a negation saves nothing, so after the
    // forward pass only the layers' outputs are alive; tfjs keeps all 36 gradients to the end
    const v = tf.variable(tf.tensor(lcg(512 * 256, 5), [512, 256]), true, 'lean_chain');
    const x = tf.tensor(lcg(512 * 256, 6), [512, 256]);
    const f = () => {
      let h = tf.mul(x, v);
      for (let i = 0; i < 12; i++) {
        const prev = h;
        h = tf.tidy(() => tf.neg(tf.neg(tf.neg(prev))));
      }
      return tf.sum(h) as tf.Scalar;
    };
    const peak = async (run: () => tf.Tensor[]) => {
      const base = tf.memory().numBytes;
      const p = await tf.profile(() => {
        tf.dispose(run());
      });
      return p.peakBytes - base;
    };
    const plain = await peak(() => {
      const {value, grads} = tf.variableGrads(f, [v]);
      return [value, ...Object.values(grads)];
    });
    const lean = await peak(() => {
      const {value, grads} = leanVariableGrads(f, [v]);
      return [value, ...grads];
    });
    const mib = 512 * 256 * 4;
    expect(plain).toBeGreaterThan(36 * mib);
    expect(lean).toBeLessThan(18 * mib);
    tf.dispose([x, v]);
  });
});
