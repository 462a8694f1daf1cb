/**
 * Constructor options checked as call options are: an option the layer does not have is an
 * error naming it, and a snake_case spelling of one it has (Keras' `use_causal_mask`) names the
 * camelCase option. A class's options are its contract's `configKeys` (the options it
 * serializes), plus tfjs' options of every layer.
 */
import {contractOf} from './contract';
import {camelCase} from './config_objects';

/** Options of every tfjs layer (and what tfjs' deserializer hands each constructor). */
export const LAYER_KEYS = [
  'name',
  'trainable',
  'dtype',
  'batchInputShape',
  'inputShape',
  'batchSize',
  'inputDType',
  'weights',
  'customObjects',
  // Keras 3's int8 / int4 form of a layer or of a composite layer's sublayers (composite_layer.ts)
  'quantizationMode',
  'int4BlockSize',
];

const known = new Map<string, Set<string>>();

/** The options of the layer class serialized as `className`, or null without a contract. */
function optionsOf(className: string): Set<string> | null {
  let keys = known.get(className);
  if (keys == null) {
    const contract = contractOf(className);
    if (contract == null) return null;
    keys = new Set([...contract.configKeys, ...LAYER_KEYS]);
    known.set(className, keys);
  }
  return keys;
}

/**
 * Throws on a constructor option of `cls` (its serialized class name) that the class does not
 * have, when set to anything but null / undefined / false. Call it from the class's own
 * constructor with `new.target === ThisClass`, so a subclass's options are checked against the
 * subclass (once, by its own constructor).
 */
export function checkConstructorArgs(cls: string, args: object | null | undefined): void {
  if (args == null || typeof args !== 'object') return;
  const options = optionsOf(cls);
  if (options == null) return;
  for (const key of Object.keys(args)) {
    const value = (args as Record<string, unknown>)[key];
    if (options.has(key) || value == null || value === false) continue;
    const camel = camelCase(key);
    if (camel !== key && options.has(camel)) {
      throw new Error(
        `${cls}: unknown option '${key}'; did you mean '${camel}'? (options are camelCase)`,
      );
    }
    const listed = [...options].filter((k) => !LAYER_KEYS.includes(k)).sort();
    throw new Error(
      `${cls}: unknown option '${key}' = ${JSON.stringify(value)}; expected one of ` +
        `${listed.join(', ')} (or a tfjs layer option: ${LAYER_KEYS.slice(0, 3).join(', ')}, ...)`,
    );
  }
}
