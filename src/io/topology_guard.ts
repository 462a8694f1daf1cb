/**
 * Checks a layers-model topology before tfjs sees it, so a model file cannot make loading hang or
 * allocate far beyond what its weights declare:
 * - every inbound node names a layer of its model, and a node that layer has (tfjs' loader loops
 *   forever on a dangling one);
 * - no layer implies, from its config, more weight values than the whole manifest declares (a
 *   2 KB model.json with `num_heads: 1e7` would otherwise allocate gigabytes before any check).
 * Pure and synchronous: works on tfjs (snake_case) and Keras 3 topologies, nested models too.
 */
import {contractOf, impliedProduct} from '../layers/engine/contract';
import type {Json, JsonObject as Obj, WeightContract} from '../layers/engine/contract';

const isObj = (x: Json | undefined): x is Obj =>
  x != null && typeof x === 'object' && !Array.isArray(x);

const MODEL_CLASSES = ['Functional', 'Model', 'Sequential'];

function fail(message: string): never {
  throw new Error(`loading a model: ${message}`);
}

/** `[name, nodeIndex]` of every tensor an inbound node reads (tfjs / tf-keras and Keras 3). */
function references(node: Json): Array<[string, number]> {
  const out: Array<[string, number]> = [];
  const visit = (x: Json) => {
    if (isObj(x)) {
      if (x.class_name === '__keras_tensor__' && isObj(x.config)) {
        const h = x.config.keras_history;
        if (Array.isArray(h)) out.push([h[0] as string, h[1] as number]);
        return;
      }
      Object.values(x).forEach(visit);
    } else if (Array.isArray(x)) {
      if (x.length >= 3 && typeof x[0] === 'string' && typeof x[1] === 'number') {
        out.push([x[0], x[1]]);
        if (isObj(x[3] as Json)) visit(x[3] as Json);
        return;
      }
      x.forEach(visit);
    }
  };
  if (isObj(node)) {
    visit(node.args as Json);
    visit(node.kwargs as Json);
  } else {
    visit(node);
  }
  return out;
}

function checkGraph(config: Obj, where: string): void {
  const layers = Array.isArray(config.layers) ? (config.layers as Json[]) : [];
  const nodeCount = new Map<string, number>();
  for (const l of layers) {
    if (!isObj(l)) fail(`${where} has a layer that is not an object`);
    const name = (l.name ?? (isObj(l.config) ? l.config.name : null)) as string;
    const nodes = Array.isArray(l.inbound_nodes) ? l.inbound_nodes.length : 0;
    // a nested model also has its own node 0 (its inputs to its outputs), which tf-keras 2
    // counts: its calls in the outer graph are nodes 1, 2, ...
    const own = MODEL_CLASSES.includes(l.class_name as string) ? 1 : 0;
    nodeCount.set(name, Math.max(1, nodes + own));
  }
  for (const l of layers as Obj[]) {
    const name = (l.name ?? (isObj(l.config) ? l.config.name : '?')) as string;
    for (const node of (Array.isArray(l.inbound_nodes) ? l.inbound_nodes : []) as Json[]) {
      for (const [ref, index] of references(node)) {
        const count = nodeCount.get(ref);
        if (count === undefined) {
          fail(
            `layer '${name}' of ${where} reads from '${ref}', which is not a layer of that model`,
          );
        }
        if (!(Number.isInteger(index) && index >= 0 && index < count)) {
          fail(
            `layer '${name}' of ${where} reads node ${JSON.stringify(index)} of '${ref}', which has ${count}`,
          );
        }
      }
    }
    if (MODEL_CLASSES.includes(l.class_name as string) && isObj(l.config)) {
      checkGraph(l.config, `the nested model '${name}'`);
    }
  }
  for (const key of ['input_layers', 'output_layers']) {
    for (const [ref] of references(config[key] ?? [])) {
      if (!nodeCount.has(ref))
        fail(`${where}'s ${key} name '${ref}', which is not one of its layers`);
    }
  }
}

/** tfjs' built-in layers with weights the config sizes (the package's classes say it on the class). */
const BUILT_IN: Record<string, WeightContract['implied']> = {
  Dense: impliedProduct('units'),
  Embedding: impliedProduct('input_dim', 'output_dim'),
};

/** A lower bound of the weight values a layer's config implies, and the option that sets it. */
function impliedValues(cls: string, c: Obj): {values: number; option: string} {
  const implied = contractOf(cls)?.weights.implied ?? BUILT_IN[cls];
  return implied == null ? {values: 0, option: ''} : implied(c);
}

function checkSizes(config: Obj, declared: number): void {
  for (const l of (Array.isArray(config.layers) ? config.layers : []) as Obj[]) {
    if (!isObj(l) || !isObj(l.config)) continue;
    const cls = l.class_name as string;
    if (MODEL_CLASSES.includes(cls)) {
      checkSizes(l.config, declared);
      continue;
    }
    const {values, option} = impliedValues(cls, l.config);
    if (values > declared) {
      fail(
        `layer '${l.config.name ?? l.name}' (${cls}) implies at least ${values} weight values ` +
          `(${option} = ${JSON.stringify(l.config[option])}), but the weights manifest declares ` +
          `${declared} in all`,
      );
    }
  }
}

/**
 * @param topology the model.json's `modelTopology` (tfjs or Keras format).
 * @param declaredValues weight values the manifest declares, or null when loading no weights.
 */
export function checkTopology(topology: unknown, declaredValues: number | null): void {
  if (!isObj(topology as Json)) fail('expected the model topology to be a JSON object');
  const t = topology as Obj;
  const model = (isObj(t.model_config) ? t.model_config : t) as Obj;
  if (!isObj(model.config)) return; // not a layers model: tfjs reports it
  checkGraph(model.config, 'the model');
  if (declaredValues != null) checkSizes(model.config, declaredValues);
}
