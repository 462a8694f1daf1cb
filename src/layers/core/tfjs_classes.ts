/**
 * tfjs-layers' own classes by name, as registered when it is imported, for the classes that
 * extend them and are registered under the same name in their place (layers/register.ts).
 */
import * as tf from '@tensorflow/tfjs-core';
// tfjs-layers registers its classes on import
import '@tensorflow/tfjs-layers';
import type {layers} from '@tensorflow/tfjs-layers';

/**
 * tfjs' class registered as `name`; read at import, before the package's class of that name is
 * registered over it.
 */
export function tfjsClass<T extends layers.Layer = layers.Layer>(
  name: string,
): new (args?: object) => T {
  const map = tf.serialization.SerializationMap.getMap().classNameMap as unknown as Record<
    string,
    [new (args?: object) => T]
  >;
  return map[name][0];
}
