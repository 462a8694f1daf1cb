/**
 * Checks a layers-model topology before tfjs sees it, so a model file cannot make loading hang or
 * allocate far beyond what its weights declare:
 * - models nest at most {@link MAX_NESTING} deep (checked before anything recurses);
 * - no layer is named like a property of every JavaScript object (`constructor`, `__proto__`):
 *   tfjs-layers keeps layers in plain objects and fails with a TypeError on those names;
 * - every inbound node names a layer of its model, and a node that layer has (tfjs' loader loops
 *   forever on a dangling one);
 * - the graph of (layer, node) pairs is acyclic, in every model, nested ones included (tfjs'
 *   loader loops forever on a cycle);
 * - no layer implies, from its config, more weight values than the whole manifest declares, nor
 *   do all layers together (a 2 KB model.json with `num_heads: 1e7` would otherwise allocate
 *   gigabytes before any check); with no manifest, at most {@link MAX_UNDECLARED_VALUES}.
 * Pure, synchronous, iterative and linear in the size of the topology: works on tfjs
 * (snake_case) and Keras 3 topologies.
 */
import {camelConfig, configNumber, contractOf, savedKey} from '../layers/engine/contract';
import type {Json, JsonObject as Obj} from '../layers/engine/contract';
import {isObject as isObj} from '../layers/engine/json_object';

const MODEL_CLASSES = ['Functional', 'Model', 'Sequential'];

/** The deepest nesting of models in models the loaders accept (the outer model is depth 0). */
export const MAX_NESTING = 64;

/**
 * The most weight values a topology may imply when no weights manifest is loaded
 * (`fileSystem(dir, {topologyOnly: true})`): 100 million, 400 MB of float32.
 */
export const MAX_UNDECLARED_VALUES = 100_000_000;

function fail(message: string): never {
  throw new Error(`loading a model: ${message}`);
}

/** `[name, nodeIndex]` of every tensor an inbound node reads (tfjs / tf-keras and Keras 3). */
function references(node: Json): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  const stack: Json[] = [];
  const push = (x: Json) => stack.push(x);
  if (isObj(node)) {
    if (node.kwargs !== undefined) push(node.kwargs);
    if (node.args !== undefined) push(node.args);
  } else {
    push(node);
  }
  // depth first, in order: children pushed in reverse
  while (stack.length > 0) {
    const x = stack.pop() as Json;
    if (isObj(x)) {
      if (x.class_name === '__keras_tensor__' && isObj(x.config)) {
        const h = x.config.keras_history;
        if (Array.isArray(h)) out.push([h[0] as string, h[1] as number]);
        continue;
      }
      Object.values(x).reverse().forEach(push);
    } else if (Array.isArray(x)) {
      if (x.length >= 3 && typeof x[0] === 'string' && typeof x[1] === 'number') {
        out.push([x[0], x[1]]);
        if (isObj(x[3] as Json)) push(x[3] as Json);
        continue;
      }
      x.slice().reverse().forEach(push);
    }
  }
  return out;
}

const layerName = (l: Obj): string =>
  (l.name ?? (isObj(l.config) ? l.config.name : null) ?? '?') as string;

interface ModelAt {
  config: Obj;
  where: string;
  /** A Sequential model: each layer reads the one before it. */
  sequential: boolean;
}

/** Every model config of the topology, outer first, refusing nesting deeper than MAX_NESTING. */
function modelsOf(config: Obj, sequential: boolean): ModelAt[] {
  const out: ModelAt[] = [];
  const stack: Array<ModelAt & {depth: number}> = [
    {config, where: 'the model', depth: 0, sequential},
  ];
  while (stack.length > 0) {
    const m = stack.pop() as ModelAt & {depth: number};
    out.push(m);
    for (const l of Array.isArray(m.config.layers) ? (m.config.layers as Json[]) : []) {
      if (!isObj(l)) fail(`${m.where} has a layer that is not an object`);
      if (!MODEL_CLASSES.includes(l.class_name as string) || !isObj(l.config)) continue;
      if (m.depth + 1 > MAX_NESTING) {
        fail(
          `the nested model '${layerName(l)}' is nested ${m.depth + 1} models deep; at most ` +
            `${MAX_NESTING} are supported`,
        );
      }
      stack.push({
        config: l.config,
        where: `the nested model '${layerName(l)}'`,
        depth: m.depth + 1,
        sequential: l.class_name === 'Sequential',
      });
    }
  }
  return out;
}

/**
 * Which entry of `layer.inbound_nodes` the node `index` of a layer is, or -1 for a nested
 * model's own node (its inputs to its outputs, which reads nothing of the outer graph).
 */
function inboundIndex(layer: Obj, index: number): number {
  if (!MODEL_CLASSES.includes(layer.class_name as string)) return index;
  const nodes = Array.isArray(layer.inbound_nodes) ? layer.inbound_nodes : [];
  if (nodes.some((n) => isObj(n) && 'args' in n)) {
    // Keras 3 numbers a nested model's calls from 0 (or writes 1 for a single call)
    return nodes.length <= 1 ? 0 : Math.min(index, nodes.length - 1);
  }
  // tfjs / tf-keras 2: the nested model's own node is 0, its calls 1, 2, ...
  return index - 1;
}

function checkGraph(config: Obj, where: string): void {
  const layers = (Array.isArray(config.layers) ? config.layers : []) as Obj[];
  const byName = new Map<string, number>();
  const nodeCount: number[] = [];
  layers.forEach((l, i) => {
    const name = layerName(l);
    if (typeof name === 'string' && name in Object.prototype) {
      fail(
        `${where} has a layer named '${name}', a property name of every JavaScript object, ` +
          'which tfjs-layers cannot load; rename the layer',
      );
    }
    const nodes = Array.isArray(l.inbound_nodes) ? l.inbound_nodes.length : 0;
    // a nested model also has its own node 0 (its inputs to its outputs), which tf-keras 2
    // counts: its calls in the outer graph are nodes 1, 2, ...
    const ownNode = MODEL_CLASSES.includes(l.class_name as string) ? 1 : 0;
    byName.set(name, i);
    nodeCount[i] = Math.max(1, nodes + ownNode);
  });
  // the graph's edges: node k of layer i reads the nodes `edges[i][k]` ([layer, inbound entry])
  const edges: Array<Array<Array<[number, number]>>> = layers.map(() => []);
  layers.forEach((l, i) => {
    const name = layerName(l);
    ((Array.isArray(l.inbound_nodes) ? l.inbound_nodes : []) as Json[]).forEach((node, k) => {
      const reads: Array<[number, number]> = [];
      for (const [ref, index] of references(node)) {
        const j = typeof ref === 'string' ? byName.get(ref) : undefined;
        if (j === undefined) {
          fail(
            `layer '${name}' of ${where} reads from '${ref}', which is not a layer of that model`,
          );
        }
        const count = nodeCount[j];
        if (!(Number.isInteger(index) && index >= 0 && index < count)) {
          fail(
            `layer '${name}' of ${where} reads node ${JSON.stringify(index)} of '${ref}', which has ${count}`,
          );
        }
        const entry = inboundIndex(layers[j], index);
        if (entry >= 0) reads.push([j, entry]);
      }
      edges[i][k] = reads;
    });
  });
  checkAcyclic(layers, edges, where);
  for (const key of ['input_layers', 'output_layers']) {
    for (const [ref] of references(config[key] ?? [])) {
      if (typeof ref !== 'string' || !byName.has(ref))
        fail(`${where}'s ${key} name '${ref}', which is not one of its layers`);
    }
  }
}

/** Depth-first search with an explicit stack over (layer, inbound entry) pairs: one visit each. */
function checkAcyclic(
  layers: Obj[],
  edges: Array<Array<Array<[number, number]>>>,
  where: string,
): void {
  const DONE = 2;
  const ON_PATH = 1;
  const state = edges.map((e) => new Uint8Array(e.length));
  for (let i0 = 0; i0 < edges.length; i0++) {
    for (let k0 = 0; k0 < edges[i0].length; k0++) {
      if (state[i0][k0] === DONE) continue;
      // each frame: the node and the next of its edges to follow
      const path: Array<[number, number, number]> = [[i0, k0, 0]];
      state[i0][k0] = ON_PATH;
      while (path.length > 0) {
        const top = path[path.length - 1];
        const [i, k, e] = top;
        const reads = edges[i][k] ?? [];
        if (e === reads.length) {
          state[i][k] = DONE;
          path.pop();
          continue;
        }
        top[2] = e + 1;
        const [j, m] = reads[e];
        if (state[j][m] === DONE) continue;
        if (state[j][m] === ON_PATH) {
          const from = path.findIndex(([a, b]) => a === j && b === m);
          const cycle = [...path.slice(from), [j, m]]
            .reverse()
            .map(([a, b]) => `'${layerName(layers[a])}' (inbound node ${b})`);
          fail(
            `the graph of ${where} has a cycle: ${cycle.join(' feeds ')}; a graph must be acyclic`,
          );
        }
        state[j][m] = ON_PATH;
        path.push([j, m, 0]);
      }
    }
  }
}

/** The last dimension of a saved shape, when it is a known number. */
function lastDim(shape: Json | undefined): number | null {
  if (!Array.isArray(shape) || shape.length === 0) return null;
  const d = shape[shape.length - 1];
  return typeof d === 'number' && Number.isFinite(d) && d >= 0 ? d : null;
}

/** The width of a layer's output, for the classes whose config says it. */
function outputWidth(l: Obj): number | null {
  const c = isObj(l.config) ? l.config : {};
  switch (typeof l.class_name === 'string' ? l.class_name : '') {
    case 'InputLayer':
      return lastDim(c.batch_input_shape ?? c.batch_shape);
    case 'Dense':
      return typeof c.units === 'number' ? c.units : null;
    case 'Embedding':
      return typeof c.output_dim === 'number' ? c.output_dim : null;
    default:
      return null;
  }
}

/**
 * The width of a Dense layer's input, where the topology says it: the layer's own
 * `batch_input_shape` / `batch_shape`, Keras 3's `build_config.input_shape`, and the layer it
 * reads (the previous layer of a Sequential model) when that is an InputLayer, Dense or
 * Embedding. Where these disagree, the largest: tfjs builds from the layer read, which a
 * file can set apart from the rest.
 */
function inputWidth(l: Obj, previous: Obj | null, byName: Map<string, Obj>): number | null {
  const c = isObj(l.config) ? l.config : {};
  const widths: Array<number | null> = [lastDim(c.batch_input_shape ?? c.batch_shape)];
  const built = isObj(l.build_config) ? l.build_config.input_shape : undefined;
  if (Array.isArray(built) && built.every((d) => d === null || typeof d === 'number')) {
    widths.push(lastDim(built));
  }
  const nodes = Array.isArray(l.inbound_nodes) ? (l.inbound_nodes as Json[]) : [];
  if (nodes.length > 0) {
    const refs = references(nodes[0]);
    const source = refs.length === 1 ? byName.get(refs[0][0]) : undefined;
    if (source != null) widths.push(outputWidth(source));
  } else if (previous != null) {
    widths.push(outputWidth(previous));
  }
  const known = widths.filter((w): w is number => w != null);
  return known.length === 0 ? null : Math.max(...known);
}

interface Implied {
  values: number;
  why: string;
}

/** A lower bound of the weight values a layer's config implies, and the options that set it. */
function impliedValues(l: Obj, previous: Obj | null, byName: Map<string, Obj>): Implied {
  const cls = l.class_name as string;
  const c = l.config as Obj;
  const contract = contractOf(cls);
  if (contract != null) {
    const {values, option} = contract.weights.implied(camelConfig(c));
    const key = savedKey(c, option); // the option as the file spells it
    return {values, why: `${key} = ${JSON.stringify(c[key])}`};
  }
  if (cls === 'Dense') {
    const units = configNumber(c, 'units');
    const width = inputWidth(l, previous, byName);
    const bias = c.use_bias === false ? 0 : units;
    if (width == null) return {values: Math.max(units, bias), why: `units = ${units}`};
    return {values: width * units + bias, why: `units = ${units}, input width ${width}`};
  }
  if (cls === 'Embedding') {
    const values = configNumber(c, 'input_dim') * configNumber(c, 'output_dim');
    return {
      values,
      why: `input_dim = ${JSON.stringify(c.input_dim)}, output_dim = ${JSON.stringify(c.output_dim)}`,
    };
  }
  return {values: 0, why: ''};
}

function checkSizes(models: ModelAt[], declared: number | null): void {
  const limit = declared ?? MAX_UNDECLARED_VALUES;
  const against =
    declared == null
      ? `no weights manifest is loaded, and the most allowed then is ${MAX_UNDECLARED_VALUES}`
      : `the weights manifest declares ${declared} in all`;
  let total = 0;
  for (const {config, sequential} of models) {
    const layers = (Array.isArray(config.layers) ? config.layers : []) as Obj[];
    const byName = new Map<string, Obj>();
    for (const l of layers) byName.set(layerName(l), l);
    let previous: Obj | null = null;
    for (const l of layers) {
      const cls = l.class_name as string;
      const before = previous;
      previous = l;
      if (!isObj(l.config) || MODEL_CLASSES.includes(cls)) continue;
      const {values, why} = impliedValues(l, sequential ? before : null, byName);
      if (!(values <= limit)) {
        fail(
          `layer '${layerName(l)}' (${cls}) implies at least ${values} weight values (${why}), ` +
            `but ${against}`,
        );
      }
      total += values;
    }
  }
  if (!(total <= limit)) {
    fail(`the model's layers imply at least ${total} weight values in all, but ${against}`);
  }
}

/**
 * @param topology the model.json's `modelTopology` (tfjs or Keras format).
 * @param declaredValues weight values the manifest declares, or null when loading no weights
 *   (then the layers may imply at most {@link MAX_UNDECLARED_VALUES}).
 */
export function checkTopology(topology: unknown, declaredValues: number | null): void {
  if (!isObj(topology as Json)) fail('expected the model topology to be a JSON object');
  const t = topology as Obj;
  const model = (isObj(t.model_config) ? t.model_config : t) as Obj;
  if (!isObj(model.config)) return; // not a layers model: tfjs reports it
  const models = modelsOf(model.config, model.class_name === 'Sequential');
  for (const {config, where} of models) checkGraph(config, where);
  checkSizes(models, declaredValues);
}
