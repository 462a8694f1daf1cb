/** The JSON of a Keras topology as the loader's files read it, and the loader's error. */
export type Json = null | boolean | number | string | Json[] | {[key: string]: Json};
export type Obj = {[key: string]: Json};

export function isObj(x: Json | undefined): x is Obj {
  return x != null && typeof x === 'object' && !Array.isArray(x);
}

/** Throws `loadKerasModel: <message>`. */
export function fail(message: string): never {
  throw new Error(`loadKerasModel: ${message}`);
}
