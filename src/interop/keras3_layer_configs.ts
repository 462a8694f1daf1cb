/**
 * What the Keras 3 export rewrites in a layer's config so that Keras 3.15 reads it: the inverse
 * of keras_layer_configs.ts. keras-hub's activation functions become the function references
 * Keras writes, and keys only tfjs-layers writes (which Keras 3's constructors refuse with
 * "Unrecognized keyword arguments") are left out.
 */
import type {Obj} from './keras_json';

/**
 * Activations Keras 3 knows by a function reference, not by a string (`keras.activations.get`
 * refuses the name): keras-hub's `gelu_approximate`, registered as `keras_hub>gelu_approximate`,
 * serialized by Keras 3.15 as this object (GPT-2's and BERT's blocks).
 */
const FUNCTION_ACTIVATIONS: Record<string, string> = {
  gelu_approximate: 'keras_hub>gelu_approximate',
  geluApproximate: 'keras_hub>gelu_approximate',
};

/** `activation` as Keras 3 serializes it. */
export function keras3Activation(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  const fn = FUNCTION_ACTIVATIONS[value];
  return fn == null
    ? value
    : {module: 'builtins', class_name: 'function', config: fn, registered_name: 'function'};
}

/**
 * Drops the keys tfjs-layers writes that Keras 3's layer constructors do not take:
 * `batch_input_shape` (tfjs writes it on a layer built with `inputShape`; a functional Keras 3
 * model keeps the shape on its InputLayer, and `keras.layers.Layer` refuses the key), and tfjs'
 * Embedding's `input_length` (which Keras 3.15 pops with a deprecation warning); tfjs' Embedding
 * `mask_zero: null` becomes Keras' default `false`.
 */
export function dropTfjsOnlyKeys(cls: string, config: Obj): void {
  if (cls === 'InputLayer') return;
  delete config.batch_input_shape;
  if (cls === 'Embedding') {
    delete config.input_length;
    if (config.mask_zero == null) config.mask_zero = false;
  }
}
