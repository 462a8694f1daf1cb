/**
 * Keras 3's Adam and AdamW (`keras/src/optimizers/adam.py`, `adamw.py`, the base optimizer's
 * clipping and weight decay), step for step: tfjs' `tf.train.adam` adds epsilon to the corrected
 * `sqrt(v̂)` where Keras adds it to the uncorrected `sqrt(v)`, which moves a fine-tuned LoRA
 * measurably after a few steps. One step (`apply`), in Keras' order:
 * 1. clip the gradients (`clipnorm` per tensor, or `globalClipnorm` over all of them: one of the two,
 *    as Keras refuses both);
 * 2. weight decay (AdamW): `w -= w · weightDecay · lr`;
 * 3. `alpha = lr · sqrt(1 - β2^t) / (1 - β1^t)`, `m += (g - m)(1 - β1)`, `v += (g² - v)(1 - β2)`,
 *    `w -= m · alpha / (sqrt(v) + ε)`, t the step counted from 1.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayerVariable} from '@tensorflow/tfjs-layers';

/** A learning rate: a number, or a function of the step (0 first), as a Keras schedule. */
export type LearningRate = number | ((step: number) => number);

/** Options of {@link KerasAdam}. */
export interface KerasAdamOptions {
  /** Default 0.001 (Keras'); keras-hub's `CausalLM.compile` uses 2e-5. */
  learningRate?: LearningRate;
  /** Default 0.9. */
  beta1?: number;
  /** Default 0.999. */
  beta2?: number;
  /** Added to `sqrt(v)` (not to the corrected one). Default 1e-7 (Keras'). */
  epsilon?: number;
  /** AdamW's decoupled weight decay (Keras' AdamW default 0.004); default none (Adam). */
  weightDecay?: number;
  /** Each gradient clipped to this L2 norm (Keras' `clipnorm`). */
  clipnorm?: number;
  /** All gradients scaled together to at most this global L2 norm (Keras' `global_clipnorm`). */
  globalClipnorm?: number;
}

function positive(name: string, value: unknown, orZero = false): number {
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value < 0 ||
    (!orZero && value === 0)
  ) {
    throw new Error(
      `KerasAdam: expected ${name} to be a ${orZero ? 'non-negative' : 'positive'} number, ` +
        `received ${String(value)}`,
    );
  }
  return value;
}

/**
 * Keras 3's Adam (AdamW with `weightDecay`), applied to tfjs-layers variables.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {KerasAdam} from 'tfjs-attention';
 *
 * const dense = tf.layers.dense({units: 2});
 * dense.apply(tf.ones([1, 3]));
 * const optimizer = new KerasAdam({learningRate: 2e-5}); // keras-hub's CausalLM.compile default
 * const grads = dense.trainableWeights.map((w) => tf.onesLike(w.read()));
 * optimizer.apply(dense.trainableWeights, grads); // one step of Keras' update rule
 * console.log(optimizer.iterations); // 1
 * optimizer.dispose();
 * ```
 */
export class KerasAdam {
  /** The first moment's decay. */
  readonly beta1: number;
  /** The second moment's decay. */
  readonly beta2: number;
  /** Added to `sqrt(v)`. */
  readonly epsilon: number;
  /** AdamW's weight decay, or null (Adam). */
  readonly weightDecay: number | null;
  /** The per-gradient clip norm, or null. */
  readonly clipnorm: number | null;
  /** The global clip norm, or null. */
  readonly globalClipnorm: number | null;
  private readonly rate: LearningRate;
  /** Steps applied (Keras' `iterations`). */
  iterations = 0;
  private readonly slots = new Map<LayerVariable, {m: tf.Variable; v: tf.Variable}>();

  constructor(options: KerasAdamOptions = {}) {
    const known = [
      'learningRate',
      'beta1',
      'beta2',
      'epsilon',
      'weightDecay',
      'clipnorm',
      'globalClipnorm',
    ];
    const unknown = Object.keys(options).filter((k) => !known.includes(k));
    if (unknown.length > 0) {
      throw new Error(
        `KerasAdam: unknown option(s) ${unknown.join(', ')}; expected ${known.join(', ')}`,
      );
    }
    const rate = options.learningRate ?? 0.001;
    if (typeof rate !== 'function') positive('learningRate', rate);
    this.rate = rate;
    this.beta1 = positive('beta1', options.beta1 ?? 0.9);
    this.beta2 = positive('beta2', options.beta2 ?? 0.999);
    if (this.beta1 >= 1 || this.beta2 >= 1) {
      throw new Error(
        `KerasAdam: expected beta1 and beta2 below 1, received ${this.beta1} and ${this.beta2}`,
      );
    }
    this.epsilon = positive('epsilon', options.epsilon ?? 1e-7, true);
    this.weightDecay =
      options.weightDecay == null ? null : positive('weightDecay', options.weightDecay, true);
    this.clipnorm = options.clipnorm == null ? null : positive('clipnorm', options.clipnorm);
    this.globalClipnorm =
      options.globalClipnorm == null ? null : positive('globalClipnorm', options.globalClipnorm);
    if (this.clipnorm != null && this.globalClipnorm != null) {
      throw new Error(
        'KerasAdam: only one of clipnorm and globalClipnorm can be set (as in Keras), received ' +
          `clipnorm ${this.clipnorm} and globalClipnorm ${this.globalClipnorm}`,
      );
    }
  }

  /** The learning rate of the next step. */
  learningRate(): number {
    const lr = typeof this.rate === 'function' ? this.rate(this.iterations) : this.rate;
    return positive('learningRate', lr, true);
  }

  /** One step: `grads[i]` updates `variables[i]` (the gradients are not disposed). */
  apply(variables: LayerVariable[], grads: tf.Tensor[]): void {
    if (variables.length !== grads.length) {
      throw new Error(
        `KerasAdam: expected one gradient per variable, received ${grads.length} for ` +
          `${variables.length} variables`,
      );
    }
    variables.forEach((v, i) => {
      if (grads[i].shape.join() !== v.shape.join()) {
        throw new Error(
          `KerasAdam: the gradient of '${v.name}' has shape [${grads[i].shape}], expected [${v.shape}]`,
        );
      }
    });
    const lr = this.learningRate();
    const t = this.iterations + 1;
    // float32 as Keras computes it: lr · sqrt(1 - β2^t) / (1 - β1^t)
    const f = Math.fround;
    const alpha = f(
      f(f(lr) * f(Math.sqrt(f(1 - f(f(this.beta2) ** t))))) / f(1 - f(f(this.beta1) ** t)),
    );
    tf.tidy(() => {
      const clipped = this.clip(grads);
      variables.forEach((variable, i) => {
        const g = clipped[i];
        const slot = this.slot(variable);
        let w = variable.read() as tf.Tensor;
        if (this.weightDecay != null && this.weightDecay > 0) {
          w = tf.sub(w, tf.mul(tf.mul(w, this.weightDecay), lr));
        }
        const m = tf.add(slot.m, tf.mul(tf.sub(g, slot.m), 1 - this.beta1));
        const v = tf.add(slot.v, tf.mul(tf.sub(tf.square(g), slot.v), 1 - this.beta2));
        slot.m.assign(m);
        slot.v.assign(v);
        variable.write(tf.sub(w, tf.div(tf.mul(m, alpha), tf.add(tf.sqrt(v), this.epsilon))));
      });
    });
    this.iterations = t;
  }

  /** Keras' `_clip_gradients`: clipnorm per tensor first, else the global norm. */
  private clip(grads: tf.Tensor[]): tf.Tensor[] {
    const c = this.clipnorm;
    if (c != null) {
      return grads.map((g) => {
        const norm = tf.sqrt(tf.sum(tf.square(g)));
        return tf.div(tf.mul(g, c), tf.maximum(norm, c));
      });
    }
    const gc = this.globalClipnorm;
    if (gc != null) {
      const norm = tf.sqrt(tf.addN(grads.map((g) => tf.sum(tf.square(g)))));
      // clip_norm · min(1 / norm, 1 / clip_norm), NaN where the norm is not finite
      const scale = tf.add(tf.mul(gc, tf.minimum(tf.div(1, norm), 1 / gc)), tf.sub(norm, norm));
      return grads.map((g) => tf.mul(g, scale));
    }
    return grads;
  }

  private slot(variable: LayerVariable): {m: tf.Variable; v: tf.Variable} {
    let s = this.slots.get(variable);
    if (s == null) {
      const zeros = () => tf.tidy(() => tf.variable(tf.zerosLike(variable.read()), false));
      s = {m: zeros(), v: zeros()};
      this.slots.set(variable, s);
    }
    return s;
  }

  /** Frees the moments. */
  dispose(): void {
    for (const s of this.slots.values()) {
      s.m.dispose();
      s.v.dispose();
    }
    this.slots.clear();
  }
}
