/** Whether a JSON value is an object (a config, a serialized object): the one copy of the check. */
import type {JsonObject} from './contract';

/** Whether `value` is a JSON object: not null, not an array. */
export function isObject(value: unknown): value is JsonObject {
  return value != null && typeof value === 'object' && !Array.isArray(value);
}
