/**
 * Reading the inbound nodes of a converted Keras topology: tf-keras 2's `[name, node, index,
 * kwargs]` entries and Keras 3's `{args, kwargs}` with `__keras_tensor__` references, as
 * positional tensors, tensor keyword arguments and other keyword arguments.
 */
import type {Entry} from './keras_keyword_calls';
import {fail, isObj, Json, Obj} from './keras_json';

/** Keras 3 `__keras_tensor__` reference → legacy entry. */
export function kerasTensor(x: Json): Entry | null {
  if (
    isObj(x) &&
    x.class_name === '__keras_tensor__' &&
    isObj(x.config) &&
    Array.isArray(x.config.keras_history)
  ) {
    const [name, node, index] = x.config.keras_history as [string, number, number];
    return [name, node, index, {}];
  }
  return null;
}

/** tf-keras 2 tensor reference `[name, node, index]` inside kwargs → legacy entry. */
function legacyRef(x: Json): Entry | null {
  if (
    Array.isArray(x) &&
    x.length === 3 &&
    typeof x[0] === 'string' &&
    typeof x[1] === 'number' &&
    typeof x[2] === 'number'
  ) {
    return [x[0], x[1], x[2], {}];
  }
  return kerasTensor(x);
}

/** Every Keras 3 tensor in `args`, depth first, in order. */
function collectTensors(x: Json, out: Entry[]): void {
  const t = kerasTensor(x);
  if (t) {
    out.push(t);
  } else if (Array.isArray(x)) {
    x.forEach((v) => collectTensors(v, out));
  }
}

/** DTypePolicy objects → their name, recursively. */
export function plainDtypes(x: Json): Json {
  if (Array.isArray(x)) return x.map(plainDtypes);
  if (!isObj(x)) return x;
  if (x.class_name === 'DTypePolicy' || x.class_name === 'Policy') {
    return (isObj(x.config) ? x.config.name : 'float32') ?? 'float32';
  }
  const out: Obj = {};
  // defined, not assigned: an own `__proto__` key (JSON.parse makes one) stays an own key, for
  // the loader to refuse, instead of replacing the copy's prototype or vanishing
  for (const [k, v] of Object.entries(x)) {
    Object.defineProperty(out, k, {
      value: plainDtypes(v),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

export interface NodeParts {
  positional: Entry[];
  kwargs: Obj;
  tensorKwargs: Record<string, Entry>;
}

export function nodeParts(node: Json, layer: string): NodeParts {
  if (isObj(node) && 'args' in node) {
    // Keras 3
    const positional: Entry[] = [];
    collectTensors(node.args as Json, positional);
    const kwargs: Obj = {};
    const tensorKwargs: Record<string, Entry> = {};
    for (const [k, v] of Object.entries((node.kwargs as Obj) ?? {})) {
      const t = kerasTensor(v);
      if (t) tensorKwargs[k] = t;
      else if (Array.isArray(v) && v.some((e) => kerasTensor(e) != null))
        fail(`layer '${layer}' passes a list of tensors as '${k}', which is not supported`);
      else kwargs[k] = v;
    }
    return {positional, kwargs, tensorKwargs};
  }
  if (!Array.isArray(node))
    fail(
      `layer '${layer}' has an inbound node of an unknown form: ${JSON.stringify(node).slice(0, 200)}`,
    );
  const positional: Entry[] = [];
  const kwargs: Obj = {};
  const tensorKwargs: Record<string, Entry> = {};
  for (const e of node as Json[]) {
    if (!Array.isArray(e) || typeof e[0] !== 'string')
      fail(`layer '${layer}' has a malformed inbound entry ${JSON.stringify(e)}`);
    positional.push([e[0] as string, e[1] as number, e[2] as number, {}]);
    for (const [k, v] of Object.entries((e[3] as Obj) ?? {})) {
      const t = legacyRef(v);
      if (
        t &&
        [
          'value',
          'key',
          'attention_mask',
          'query_mask',
          'value_mask',
          'key_mask',
          'mask',
          'initial_state',
        ].includes(k)
      )
        tensorKwargs[k] = t;
      else kwargs[k] = v;
    }
  }
  return {positional, kwargs, tensorKwargs};
}
