/**
 * Activations keras-hub uses that tfjs-layers lacks under a name its config loader can reach:
 * `geluApproximate`, the tanh form of GELU (keras-hub's `gelu_approximate`; tfjs' own
 * `gelu_new` is unreachable from a config, whose snake_case values tfjs camel-cases).
 */
import * as tf from '@tensorflow/tfjs-core';

const SQRT_2_PI = Math.sqrt(2 / Math.PI);

function geluTanhOf(x: tf.Tensor): tf.Tensor {
  return tf.tanh(tf.mul(SQRT_2_PI, tf.add(x, tf.mul(0.044715, tf.pow(x, 3)))));
}

/**
 * `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`, with its derivative in closed form:
 * `0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2 / pi) (1 + 3 · 0.044715 x^2)`, `t` the tanh. A gradient
 * tape keeps only `x` (tfjs' own gradients of the seven ops would keep about six tensors of x's
 * size: GPT-2 small's feed-forward, `[rows, 3072]` per block).
 */
export const geluApproximate = tf.customGrad(((x: tf.Tensor, save: tf.GradSaveFunc) => {
  save([x]);
  return {
    value: tf.mul(tf.mul(0.5, x), tf.add(1, geluTanhOf(x))),
    // in a tidy: tfjs' backward pass would keep a custom gradient's intermediates to its end
    gradFunc: (dy: tf.Tensor, [input]: tf.Tensor[]) =>
      tf.tidy(() => {
        const t = geluTanhOf(input);
        const slope = tf.mul(SQRT_2_PI, tf.add(1, tf.mul(3 * 0.044715, tf.square(input))));
        const dx = tf.add(
          tf.mul(0.5, tf.add(1, t)),
          tf.mul(tf.mul(0.5, input), tf.mul(tf.sub(1, tf.square(t)), slope)),
        );
        return [tf.mul(dy, dx)];
      }),
  };
}) as unknown as Parameters<typeof tf.customGrad>[0]) as unknown as (x: tf.Tensor) => tf.Tensor;

/** The activation object tfjs-layers' Dense resolves `'geluApproximate'` to (its `apply`). */
export class GeluApproximate extends tf.serialization.Serializable {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'geluApproximate';

  apply(x: tf.Tensor): tf.Tensor {
    return geluApproximate(x);
  }

  getConfig(): tf.serialization.ConfigDict {
    return {};
  }
}

tf.serialization.registerClass(GeluApproximate);
