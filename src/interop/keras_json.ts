/** The JSON of a Keras topology as the loader's files read it, and the loader's error. */

export type {Json, JsonObject as Obj} from '../layers/engine/contract';

/** Whether a JSON value is an object (layers/engine/json_object.ts). */
export {isObject as isObj} from '../layers/engine/json_object';

/** Throws `loadKerasModel: <message>`. */
export function fail(message: string): never {
  throw new Error(`loadKerasModel: ${message}`);
}
