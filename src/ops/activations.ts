/**
 * Activations keras-hub uses that tfjs-layers lacks under a name its config loader can reach:
 * `geluApproximate`, the tanh form of GELU (keras-hub's `gelu_approximate`; tfjs' own
 * `gelu_new` is unreachable from a config, whose snake_case values tfjs camel-cases).
 */
import * as tf from '@tensorflow/tfjs-core';

/** `0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))`. */
export function geluApproximate(x: tf.Tensor): tf.Tensor {
  return tf.tidy(() => {
    const inner = tf.mul(Math.sqrt(2 / Math.PI), tf.add(x, tf.mul(0.044715, tf.pow(x, 3))));
    return tf.mul(tf.mul(0.5, x), tf.add(1, tf.tanh(inner)));
  });
}

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
