/**
 * The config keys the Keras loader accepts for a layer class of this package (or a user's class
 * with a contract): the keys the layer's own `getConfig` writes (its contract's `configKeys`,
 * snake_cased as Keras and the converter write them), the Keras 3 class's keys, and the
 * keys only Keras writes. An option added to a layer's config is accepted without another list.
 */
import {contractOf, snakeCase} from '../layers/engine/contract';

/** Keys every Keras layer config may have. */
const KERAS_COMMON = [
  'name',
  'trainable',
  'dtype',
  'batch_input_shape',
  'batch_shape',
  // set by the loader on int8 layers and composite layers with int8 sublayers (keras_int8.ts)
  'quantization_mode',
];

const cache = new Map<string, Set<string>>();

/** The snake_case config keys accepted for layer class `cls`, or null for a class without a contract. */
export function kerasConfigKeys(cls: string): Set<string> | null {
  let keys = cache.get(cls);
  if (keys == null) {
    const contract = contractOf(cls);
    if (contract == null) return null;
    const keras3 = contract.keras.keras3;
    keys = new Set([
      ...contract.configKeys.map(snakeCase),
      ...('keys' in keras3 ? keras3.keys : []),
      ...contract.keras.kerasOnlyKeys,
      ...KERAS_COMMON,
    ]);
    cache.set(cls, keys);
  }
  return keys;
}
