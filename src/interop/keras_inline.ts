/**
 * Inlines the nested functional models of a Keras 3 topology into the outer graph. tfjs-layers
 * runs a nested model as one layer and loses the Keras masks of its inputs there (it passes only
 * the first input's mask, and disposes masks it computed), while Keras carries them in: the
 * keras.io translation example's cross-attention depends on the encoder's padding mask reaching
 * the nested decoder. Inlined, every layer sees its inputs' masks as in a flat model.
 *
 * Works on the raw Keras 3 JSON (nodes `{args, kwargs}` with `__keras_tensor__` references),
 * before the rest of the conversion. Weights keep their names: layers keep theirs.
 */
import {MAX_NESTING} from '../io/topology_guard';
import {fail, isObj, Json, Obj} from './keras_json';

type Ref = [string, number, number];

/** Every `__keras_tensor__` in `x`, in order (the positional inputs of a call). */
function tensors(x: Json, out: Obj[] = []): Obj[] {
  if (isObj(x)) {
    if (x.class_name === '__keras_tensor__') out.push(x);
    else Object.values(x).forEach((v) => tensors(v, out));
  } else if (Array.isArray(x)) {
    x.forEach((v) => tensors(v, out));
  }
  return out;
}

function history(t: Obj): Ref {
  return (t.config as Obj).keras_history as unknown as Ref;
}

function refList(x: Json): Ref[] {
  if (Array.isArray(x) && x.length === 3 && typeof x[0] === 'string') return [x as unknown as Ref];
  return (x ?? []) as unknown as Ref[];
}

/** Rewrites every tensor reference in `x` through `map` (name, node, index) -> ref. */
function remap(x: Json, map: (r: Ref) => Ref | null): void {
  for (const t of tensors(x)) {
    const r = map(history(t));
    if (r != null) (t.config as Obj).keras_history = [r[0], r[1], r[2]];
  }
}

const isFunctional = (l: Obj) => l.class_name === 'Functional' || l.class_name === 'Model';

/** Whether the topology has a Keras 3 nested functional model to inline. */
export function hasNestedFunctional(config: Obj): boolean {
  return ((config.layers as Obj[]) ?? []).some(
    (l) =>
      isFunctional(l) && ((l.inbound_nodes as Json[]) ?? []).some((n) => isObj(n) && 'args' in n),
  );
}

/** The deepest nesting of models inlined (the same limit as the topology guard's). */
export const MAX_INLINED_NESTING = MAX_NESTING;

interface Inlined {
  /** The call's tensor for each input layer of the nested model, by the input layer's name. */
  byInput: Map<string, Ref>;
  /** The nested model's outputs, in its own graph. */
  outputs: Ref[];
}

/**
 * Inlines, in place, every nested functional model of `config` (recursively, at most
 * {@link MAX_INLINED_NESTING} deep). Linear in the size of the topology: each layer's nodes are
 * rewritten once, references to a chain of nested models resolved once each.
 */
export function inlineNestedModels(config: Obj, depth = 0): void {
  const layers = config.layers as Obj[];
  const nested = new Map<string, Inlined>();
  const names = new Set(layers.map((l) => l.name as string));
  const flat: Obj[] = [];
  for (const layer of layers) {
    const nodes = isFunctional(layer) ? ((layer.inbound_nodes as Json[]) ?? []).filter(isObj) : [];
    if (nodes.length === 0 || !('args' in nodes[0])) {
      flat.push(layer); // not a model, or tf-keras 2: tfjs runs it as is
      continue;
    }
    const name = layer.name as string;
    if (nodes.length > 1) {
      fail(`the nested model '${name}' is called ${nodes.length} times; once is supported`);
    }
    if (depth + 1 > MAX_INLINED_NESTING) {
      fail(
        `the nested model '${name}' is nested ${depth + 1} models deep; at most ` +
          `${MAX_INLINED_NESTING} are supported`,
      );
    }
    const inner = layer.config as Obj;
    inlineNestedModels(inner, depth + 1);
    // the call's tensors, in the order of the nested model's inputs
    const callInputs = tensors(nodes[0].args as Json).map(history);
    const inputNames = refList(inner.input_layers as Json).map((r) => r[0]);
    if (callInputs.length !== inputNames.length) {
      fail(
        `the nested model '${name}' has ${inputNames.length} inputs but is called with ${callInputs.length}`,
      );
    }
    const byInput = new Map(inputNames.map((n, k) => [n, callInputs[k]]));
    for (const l of (inner.layers as Obj[]).filter((l) => l.class_name !== 'InputLayer')) {
      if (names.has(l.name as string)) {
        fail(
          `the nested model '${name}' has a layer '${l.name}' and so does the model around it; ` +
            'rename one of them in Keras',
        );
      }
      names.add(l.name as string);
      remap(l.inbound_nodes ?? [], (r) => byInput.get(r[0]) ?? null);
      flat.push(l);
    }
    nested.set(name, {byInput, outputs: refList(inner.output_layers as Json)});
  }
  if (nested.size === 0) return;
  // references to a nested model's outputs now point at the inner layers producing them (or,
  // for an output that is one of its inputs, at what the call was given, maybe another nested
  // model's output: followed to its end, each step once)
  const resolved = new Map<string, Ref>();
  const toOutput = (r: Ref): Ref | null => {
    if (!nested.has(r[0])) return null;
    const chain: string[] = [];
    let at: Ref = r;
    while (nested.has(at[0])) {
      const key = `${at[0]}\u0000${at[2]}`;
      const known = resolved.get(key);
      if (known != null) {
        at = known;
        break;
      }
      if (chain.includes(key)) fail(`the nested model '${at[0]}' is fed by its own output`);
      chain.push(key);
      const out = (nested.get(at[0]) as Inlined).outputs[at[2]];
      if (out == null) fail(`a layer reads output ${at[2]} of the nested model '${at[0]}'`);
      at = (nested.get(at[0]) as Inlined).byInput.get(out[0]) ?? [out[0], out[1], out[2]];
    }
    for (const key of chain) resolved.set(key, at);
    return at;
  };
  for (const l of flat) remap(l.inbound_nodes ?? [], toOutput);
  for (const key of ['output_layers', 'input_layers']) {
    if (config[key] == null) continue;
    const list = refList(config[key] as Json).map((r) => toOutput(r) ?? r);
    config[key] = list as unknown as Json;
  }
  config.layers = flat;
}
