/**
 * Per-layer rewrites of a Keras topology that move what tfjs-layers cannot read into configs it
 * can: keras-hub's activation functions, Keras 3's GetItem index, a constant `start_index`, and
 * the InputLayer of a nested Sequential.
 */
import {fail, isObj, Json, Obj} from './keras_json';

/** Keras / keras-hub activations that tfjs names differently (`gelu_approximate` is a function). */
const ACTIVATIONS: Record<string, string> = {
  silu: 'swish',
};

/** `activation` as a name tfjs knows: keras-hub's function references become their tfjs name. */
export function rewriteActivation(config: Obj, layer: string): void {
  let a = config.activation;
  if (a == null) return;
  if (isObj(a)) {
    // keras-hub's functions: 'keras_hub>gelu_approximate' (the registered name)
    if (a.class_name === 'function' && typeof a.config === 'string') {
      a = a.config.slice(a.config.indexOf('>') + 1);
    } else
      fail(`layer '${layer}' has an activation this package cannot read: ${JSON.stringify(a)}`);
  }
  if (typeof a === 'string') config.activation = ACTIVATIONS[a] ?? a;
}

/** Keras 3's `GetItem`: the index (slices and integers) moves from the node into the config. */
export function rewriteGetItem(layer: Obj): void {
  const nodes = (layer.inbound_nodes as Json[]) ?? [];
  if (nodes.length !== 1) fail(`layer '${layer.name}' (GetItem) must be called once`);
  const node = nodes[0] as Obj;
  const args = (node.args as Json[]) ?? [];
  const raw = Array.isArray(args[1]) ? args[1] : [args[1]];
  const index = raw.map((it) => {
    if (typeof it === 'number') return it;
    if (isObj(it) && it.class_name === '__slice__' && isObj(it.config)) {
      const {start = null, stop = null, step = null} = it.config;
      return {start, stop, step};
    }
    return fail(
      `layer '${layer.name}' (GetItem) indexes with ${JSON.stringify(it)}; integers and slices are supported`,
    );
  });
  (layer.config as Obj).index = index;
  node.args = [args[0]];
}

/** A constant `start_index` call argument moves into the config (tfjs replays no call options). */
export function recordStartIndex(layer: Obj): void {
  const nodes = ((layer.inbound_nodes as Json[]) ?? []).filter(isObj);
  const starts = new Set(nodes.map((n) => (isObj(n.kwargs) ? (n.kwargs.start_index ?? 0) : 0)));
  if (starts.size > 1) {
    fail(`layer '${layer.name}' is called with different start_index values; it must be one`);
  }
  const start = [...starts][0] ?? 0;
  if (typeof start !== 'number') {
    fail(`layer '${layer.name}' is called with a tensor start_index, which is not supported`);
  }
  if (start !== 0) (layer.config as Obj).start_index = start;
  for (const n of nodes) if (isObj(n.kwargs)) delete n.kwargs.start_index;
}

/**
 * A Keras 3 nested Sequential: its InputLayer becomes the first layer's batch_input_shape, as
 * tfjs (and tf-keras 2) write it.
 */
export function rewriteSequentialLayers(config: Obj): void {
  const layers = config.layers as Obj[];
  const first = layers[0];
  if (first?.class_name === 'InputLayer' && layers.length > 1) {
    const c = first.config as Obj;
    (layers[1].config as Obj).batch_input_shape = c.batch_shape ?? c.batch_input_shape ?? null;
    layers.shift();
  }
  delete config.build_input_shape;
}
