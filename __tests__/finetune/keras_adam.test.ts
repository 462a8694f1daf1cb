/**
 * KerasAdam (src/finetune/keras_adam.ts) against a plain-loop Keras 3 Adam written from
 * `keras/src/optimizers/adam.py` and the base optimizer (float64 loops): per step t (from 1),
 * gradients clipped (`clipnorm`: g · c / max(|g|, c) per tensor; `global_clipnorm`: every g ·
 * c · min(1 / norm, 1 / c), NaN when the norm is not finite), AdamW's `w -= w · wd · lr`, then
 * `alpha = lr · sqrt(1 - β2^t) / (1 - β1^t)`, `m += (g - m)(1 - β1)`, `v += (g² - v)(1 - β2)`,
 * `w -= m · alpha / (sqrt(v) + ε)`, lr taken at the step count before it. Three steps on two small
 * variables; tolerance 1e-6 absolute (weights of magnitude ~1, float32 rounding ~1e-7).
 */
import * as tf from '@tensorflow/tfjs';
import {LayerVariable} from '@tensorflow/tfjs-layers';

import {KerasAdam, type KerasAdamOptions} from '../../src';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {lcg} from '../helpers/data';

const SHAPES = [[3, 2], [4]];
const STEPS = 3;

interface RefOptions {
  lr: number | ((step: number) => number);
  beta1?: number;
  beta2?: number;
  epsilon?: number;
  weightDecay?: number;
  clipnorm?: number;
  globalClipnorm?: number;
}

const norm = (g: number[]) => Math.sqrt(g.reduce((s, v) => s + v * v, 0));

/** Keras' Adam in float64 loops: the weights after each step's gradients. */
function kerasAdamReference(w0: number[][], grads: number[][][], o: RefOptions): number[][] {
  const b1 = o.beta1 ?? 0.9;
  const b2 = o.beta2 ?? 0.999;
  const eps = o.epsilon ?? 1e-7;
  const w = w0.map((x) => [...x]);
  const m = w0.map((x) => x.map(() => 0));
  const v = w0.map((x) => x.map(() => 0));
  grads.forEach((stepGrads, step) => {
    const t = step + 1;
    const lr = typeof o.lr === 'function' ? o.lr(step) : o.lr;
    let g = stepGrads.map((x) => [...x]);
    if (o.clipnorm != null) {
      const c = o.clipnorm;
      g = g.map((x) => x.map((e) => (e * c) / Math.max(norm(x), c)));
    } else if (o.globalClipnorm != null) {
      const c = o.globalClipnorm;
      const n = Math.sqrt(g.reduce((s, x) => s + norm(x) ** 2, 0));
      const scale = Number.isFinite(n) ? c * Math.min(1 / n, 1 / c) : NaN;
      g = g.map((x) => x.map((e) => e * scale));
    }
    for (let i = 0; i < w.length; i++) {
      if (o.weightDecay != null) w[i] = w[i].map((e) => e - e * o.weightDecay! * lr);
      const alpha = (lr * Math.sqrt(1 - b2 ** t)) / (1 - b1 ** t);
      for (let j = 0; j < w[i].length; j++) {
        m[i][j] += (g[i][j] - m[i][j]) * (1 - b1);
        v[i][j] += (g[i][j] ** 2 - v[i][j]) * (1 - b2);
        w[i][j] -= (m[i][j] * alpha) / (Math.sqrt(v[i][j]) + eps);
      }
    }
  });
  return w;
}

const size = (s: number[]) => s.reduce((p, d) => p * d, 1);

/** Seeded weights and per-step gradients (gradients scaled by `gradScale`). */
function problem(gradScale = 1): {w0: number[][]; grads: number[][][]} {
  const w0 = SHAPES.map((s, i) => Array.from(lcg(size(s), 7 + i)));
  const grads = Array.from({length: STEPS}, (_, t) =>
    SHAPES.map((s, i) => Array.from(lcg(size(s), 100 + 10 * t + i, gradScale))),
  );
  return {w0, grads};
}

/** Runs KerasAdam on the problem; the weights after the last step. */
function runKerasAdam(
  options: KerasAdamOptions,
  w0: number[][],
  grads: number[][][],
): {weights: number[][]; optimizer: KerasAdam; vars: LayerVariable[]} {
  const vars = SHAPES.map(
    (s, i) => new LayerVariable(tf.tensor(w0[i], s), 'float32', `w${i}`, true),
  );
  const optimizer = new KerasAdam(options);
  for (const stepGrads of grads) {
    const g = stepGrads.map((x, i) => tf.tensor(x, SHAPES[i]));
    optimizer.apply(vars, g);
    tf.dispose(g);
  }
  const weights = vars.map((v) => Array.from(v.read().dataSync()));
  return {weights, optimizer, vars};
}

function expectKerasAdam(options: KerasAdamOptions, ref: RefOptions, gradScale = 1): void {
  const {w0, grads} = problem(gradScale);
  const {weights, optimizer, vars} = runKerasAdam(options, w0, grads);
  const expected = kerasAdamReference(w0, grads, ref);
  weights.forEach((w, i) => expectClose(w, expected[i], 1e-6, 0));
  // the weights moved by more than the tolerance
  expect(Math.max(...weights[0].map((v, j) => Math.abs(v - w0[0][j])))).toBeGreaterThan(1e-3);
  expect(optimizer.iterations).toBe(STEPS);
  optimizer.dispose();
  vars.forEach((v) => v.dispose());
}

describeBackends('KerasAdam', () => {
  it("follows Keras' Adam over 3 steps (defaults but the learning rate; 1e-6)", () => {
    expectKerasAdam({learningRate: 0.01}, {lr: 0.01});
  });

  it('adds epsilon to sqrt(v), not to the corrected sqrt(v̂) (small gradients, epsilon 1e-3)', () => {
    // gradients ~1e-3: epsilon is as large as sqrt(v), so where it is added shows
    const o = {learningRate: 0.05, beta1: 0.8, beta2: 0.99, epsilon: 1e-3};
    expectKerasAdam(o, {lr: 0.05, beta1: 0.8, beta2: 0.99, epsilon: 1e-3}, 1e-3);
  });

  it('decays the weights as AdamW (w -= w · wd · lr, before the update; 1e-6)', () => {
    expectKerasAdam({learningRate: 0.01, weightDecay: 0.1}, {lr: 0.01, weightDecay: 0.1});
  });

  it('takes a learning rate function of the step (0 first), decay included (1e-6)', () => {
    const lr = (step: number) => 0.02 / (step + 1);
    const seen: number[] = [];
    const logged = (step: number) => {
      seen.push(step);
      return lr(step);
    };
    expectKerasAdam({learningRate: logged, weightDecay: 0.2}, {lr, weightDecay: 0.2});
    expect(seen).toEqual([0, 1, 2]);
  });

  it('clips each gradient to clipnorm (one clipped, one not; 1e-6)', () => {
    const {grads} = problem();
    // the clip between the two gradients' norms, so one is clipped and the other is not
    const [n0, n1] = grads[0].map(norm);
    const c = (n0 + n1) / 2;
    expect(Math.abs(n0 - n1)).toBeGreaterThan(0.1);
    expectKerasAdam({learningRate: 0.01, clipnorm: c}, {lr: 0.01, clipnorm: c});
  });

  it('scales all gradients to globalClipnorm together (1e-6), and not when under it', () => {
    expectKerasAdam({learningRate: 0.01, globalClipnorm: 0.5}, {lr: 0.01, globalClipnorm: 0.5});
    expectKerasAdam({learningRate: 0.01, globalClipnorm: 100}, {lr: 0.01});
  });

  it('makes every weight NaN when the global norm is not finite (as Keras)', () => {
    const vars = SHAPES.map((s, i) => new LayerVariable(tf.ones(s), 'float32', `w${i}`, true));
    const optimizer = new KerasAdam({learningRate: 0.01, globalClipnorm: 1});
    const g = [tf.fill(SHAPES[0], Infinity), tf.ones(SHAPES[1])];
    optimizer.apply(vars, g);
    // Keras: scale = c · min(1 / norm, 1 / c) + (norm - norm) = NaN; the finite gradient's
    // weight is not left to move by a scale of 0
    expect(Array.from(vars[1].read().dataSync()).every(Number.isNaN)).toBe(true);
    expect(Array.from(vars[0].read().dataSync()).every(Number.isNaN)).toBe(true);
    tf.dispose(g);
    optimizer.dispose();
    vars.forEach((v) => v.dispose());
  });

  it("differs from tfjs' tf.train.adam on the same input (epsilon on the corrected sqrt there)", () => {
    // one step, gradients 1e-6: Keras divides m·alpha by sqrt(v) + ε = 3.2e-8 + 1e-7; tfjs divides
    // m̂ by sqrt(v̂) + ε = 1e-6 + 1e-7; the steps differ by a factor ~3.8
    const lr = 0.01;
    const g = [1e-6, -2e-6, 1.5e-6];
    const keras = kerasAdamReference([[0, 0, 0]], [[g]], {lr});
    const kv = new LayerVariable(tf.zeros([3]), 'float32', 'k', true);
    const mine = new KerasAdam({learningRate: lr});
    const gt = tf.tensor(g);
    mine.apply([kv], [gt]);
    const tv = tf.variable(tf.zeros([3]), true, 'tfjs_adam_w');
    const theirs = tf.train.adam(lr, 0.9, 0.999, 1e-7);
    theirs.applyGradients([{name: tv.name, tensor: gt}]);
    const k = Array.from(kv.read().dataSync());
    const t = Array.from(tv.dataSync());
    expectClose(k, keras[0], 1e-9, 1e-5);
    for (let i = 0; i < 3; i++) {
      const rel = Math.abs(k[i] - t[i]) / Math.abs(t[i]);
      expect(rel).toBeGreaterThan(0.5);
    }
    tf.dispose([gt, tv]);
    theirs.dispose();
    mine.dispose();
    kv.dispose();
  });

  it('keeps two moments per variable and frees them on dispose (no tensor per step)', () => {
    const vars = SHAPES.map((s, i) => new LayerVariable(tf.ones(s), 'float32', `w${i}`, true));
    const g = SHAPES.map((s) => tf.ones(s));
    const before = tf.memory().numTensors;
    const optimizer = new KerasAdam({learningRate: 0.01, globalClipnorm: 1, weightDecay: 0.1});
    optimizer.apply(vars, g);
    expect(tf.memory().numTensors - before).toBe(2 * vars.length);
    optimizer.apply(vars, g);
    optimizer.apply(vars, g);
    expect(tf.memory().numTensors - before).toBe(2 * vars.length);
    optimizer.dispose();
    expect(tf.memory().numTensors).toBe(before);
    tf.dispose(g);
    vars.forEach((v) => v.dispose());
  });

  describe('refusals', () => {
    it.each<[KerasAdamOptions, string]>([
      [
        {lr: 0.1} as never,
        'KerasAdam: unknown option(s) lr; expected learningRate, beta1, beta2, epsilon, ' +
          'weightDecay, clipnorm, globalClipnorm',
      ],
      [{learningRate: -1}, 'KerasAdam: expected learningRate to be a positive number, received -1'],
      [{learningRate: 0}, 'KerasAdam: expected learningRate to be a positive number, received 0'],
      [{beta1: 1}, 'KerasAdam: expected beta1 and beta2 below 1, received 1 and 0.999'],
      [{beta2: 1.5}, 'KerasAdam: expected beta1 and beta2 below 1, received 0.9 and 1.5'],
      [{beta1: -0.1}, 'KerasAdam: expected beta1 to be a positive number, received -0.1'],
      [{epsilon: -1e-7}, 'KerasAdam: expected epsilon to be a non-negative number, received -1e-7'],
      [
        {weightDecay: NaN},
        'KerasAdam: expected weightDecay to be a non-negative number, received NaN',
      ],
      [{clipnorm: 0}, 'KerasAdam: expected clipnorm to be a positive number, received 0'],
      [
        {globalClipnorm: Infinity},
        'KerasAdam: expected globalClipnorm to be a positive number, received Infinity',
      ],
      [
        {clipnorm: 1, globalClipnorm: 2},
        'KerasAdam: only one of clipnorm and globalClipnorm can be set (as in Keras), received ' +
          'clipnorm 1 and globalClipnorm 2',
      ],
    ])('%p', (options, message) => {
      expect(() => new KerasAdam(options)).toThrow(message);
    });

    it('a learning rate function giving a negative rate, gradients that do not fit', () => {
      const v = new LayerVariable(tf.ones([3]), 'float32', 'w', true);
      const before = tf.memory().numTensors;
      const g = tf.ones([2]);
      const bad = new KerasAdam({learningRate: (s) => -s - 1});
      expect(() => bad.apply([v], [])).toThrow(
        'KerasAdam: expected one gradient per variable, received 0 for 1 variables',
      );
      expect(() => bad.apply([v], [g])).toThrow(
        /^KerasAdam: the gradient of 'w(_\d+)?' has shape \[2\], expected \[3\]$/,
      );
      const g3 = tf.ones([3]);
      expect(() => bad.apply([v], [g3])).toThrow(
        'KerasAdam: expected learningRate to be a non-negative number, received -1',
      );
      expect(bad.iterations).toBe(0);
      expect(Array.from(v.read().dataSync())).toEqual([1, 1, 1]);
      tf.dispose([g, g3]);
      bad.dispose();
      expect(tf.memory().numTensors).toBe(before);
      v.dispose();
    });
  });
});
