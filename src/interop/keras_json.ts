/** The JSON of a Keras topology as the loader's files read it, and the loader's error. */
import type {Json, JsonObject as Obj} from '../layers/engine/contract';

export type {Json, JsonObject as Obj} from '../layers/engine/contract';

export function isObj(x: Json | undefined): x is Obj {
  return x != null && typeof x === 'object' && !Array.isArray(x);
}

/** Throws `loadKerasModel: <message>`. */
export function fail(message: string): never {
  throw new Error(`loadKerasModel: ${message}`);
}
