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
    if (r != null) (t.config as Obj).keras_history = r as unknown as Json;
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

/** Inlines, in place, every nested functional model of `config` (recursively). */
export function inlineNestedModels(config: Obj): void {
  const layers = config.layers as Obj[];
  for (let i = 0; i < layers.length; i++) {
    const nested = layers[i];
    if (!isFunctional(nested)) continue;
    const nodes = ((nested.inbound_nodes as Json[]) ?? []).filter(isObj);
    if (nodes.length === 0 || !('args' in nodes[0])) continue; // tf-keras 2: tfjs runs it as is
    const name = nested.name as string;
    if (nodes.length > 1) {
      fail(`the nested model '${name}' is called ${nodes.length} times; once is supported`);
    }
    const inner = nested.config as Obj;
    inlineNestedModels(inner);
    const innerLayers = inner.layers as Obj[];
    // the call's tensors, in the order of the nested model's inputs
    const callInputs = tensors(nodes[0].args as Json).map(history);
    const inputNames = refList(inner.input_layers as Json).map((r) => r[0]);
    if (callInputs.length !== inputNames.length) {
      fail(
        `the nested model '${name}' has ${inputNames.length} inputs but is called with ${callInputs.length}`,
      );
    }
    const byInput = new Map(inputNames.map((n, k) => [n, callInputs[k]]));
    const outputs = refList(inner.output_layers as Json);
    const outer = new Set(layers.map((l) => l.name as string));
    const moved = innerLayers.filter((l) => l.class_name !== 'InputLayer');
    for (const l of moved) {
      if (outer.has(l.name as string)) {
        fail(
          `the nested model '${name}' has a layer '${l.name}' and so does the model around it; ` +
            'rename one of them in Keras',
        );
      }
      remap(l.inbound_nodes ?? [], (r) => byInput.get(r[0]) ?? null);
    }
    // references to the nested model's outputs now point at the inner layers producing them
    const toOutput = (r: Ref): Ref | null => {
      if (r[0] !== name) return null;
      const out = outputs[r[2]];
      if (out == null) fail(`a layer reads output ${r[2]} of the nested model '${name}'`);
      return byInput.get(out[0]) ?? [out[0], out[1], out[2]];
    };
    for (const l of layers) if (l !== nested) remap(l.inbound_nodes ?? [], toOutput);
    for (const key of ['output_layers', 'input_layers']) {
      if (config[key] == null) continue;
      const list = refList(config[key] as Json).map((r) => toOutput(r) ?? r);
      config[key] = list as unknown as Json;
    }
    layers.splice(i, 1, ...moved);
    i += moved.length - 1;
  }
}
