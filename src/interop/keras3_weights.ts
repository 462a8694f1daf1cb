/**
 * Keras 3 names weights by their HDF5 path (`layers/<layer>/<sublayer>/vars/<i>`): the mapping
 * from those paths to this package's weight names, layer by layer in model order.
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, LayersModel, LayerVariable} from '@tensorflow/tfjs-layers';

import {checkTopology} from '../io/topology_guard';
import {declaredElements} from '../io/weight_bytes';
import {buildZeroModel, disposeAllWeights} from './load_in_place';
import {CompositeLayer} from '../layers/engine/composite_layer';
import {contractOf, snakeCase} from '../layers/engine/contract';
import type {JsonObject as Obj} from '../layers/engine/contract';
import {isObject} from '../layers/engine/json_object';

/** Keras 3's path key of a layer inside its model: the snake-cased class, numbered by order. */
function pathKey(layer: layers.Layer, counts: Map<string, number>): string {
  const cls = layer.getClassName();
  const keras3 = contractOf(cls)?.keras.keras3;
  const base =
    (keras3 != null && 'keys' in keras3 ? keras3.pathPrefix : undefined) ??
    (cls === 'Model' || cls === 'Functional' ? 'functional' : snakeCase(cls));
  const n = counts.get(base) ?? 0;
  counts.set(base, n + 1);
  return n === 0 ? base : `${base}_${n}`;
}

/**
 * The order of each model's layers in a Keras config, by model name (nested models too): Keras 3
 * numbers weight paths in that order, which tfjs' `model.layers` (sorted by depth) may not keep.
 */
export function configOrder(topology: Obj): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const stack: Obj[] = [
    (isObject(topology.model_config) ? topology.model_config : topology) as Obj,
  ];
  while (stack.length > 0) {
    const model = stack.pop() as Obj;
    const config = isObject(model.config) ? model.config : null;
    if (config == null || !Array.isArray(config.layers)) continue;
    const names = (config.layers as Obj[]).map((l) => String(l.name ?? (l.config as Obj)?.name));
    for (const key of [model.name, config.name]) if (typeof key === 'string') out.set(key, names);
    for (const l of config.layers as Obj[]) if (isObject(l)) stack.push(l);
  }
  return out;
}

/** Each weight of `layer` by its Keras 3 path below the layer (`query_dense/vars/0`). */
export function keras3Paths(
  layer: layers.Layer,
  order: Map<string, string[]> = new Map(),
): Map<string, LayerVariable> {
  const out = new Map<string, LayerVariable>();
  const weights = contractOf(layer.getClassName())?.weights;
  const sub = weights?.sublayers;
  if (layer instanceof LayersModel) {
    // a nested model: `layers/<key>/...` for each of its layers
    const counts = new Map<string, number>();
    const names = order.get(layer.name);
    const rank = (l: layers.Layer) => names?.indexOf(l.name) ?? -1;
    const inOrder =
      names != null && layer.layers.every((l) => rank(l) >= 0)
        ? [...layer.layers].sort((a, b) => rank(a) - rank(b))
        : layer.layers;
    for (const l of inOrder) {
      const key = pathKey(l, counts);
      for (const [p, v] of keras3Paths(l, order)) out.set(`layers/${key}/${p}`, v);
    }
  } else if (sub != null && layer instanceof CompositeLayer) {
    // Keras 3 keeps each projection's kernel, bias and (int8) kernel_scale as vars/0, 1, 2 of
    // its folder, numbering only those it has
    const paths = layer.weightPaths();
    for (const {name, keras3} of sub) {
      let i = 0;
      for (const w of ['kernel', 'bias', 'kernel_scale']) {
        const v = paths.get(`${name}/${w}`);
        if (v != null) out.set(`${keras3}/vars/${i++}`, v);
      }
    }
  } else if (layer instanceof CompositeLayer && layer.sublayers.length > 0) {
    // keras-hub blocks: each sublayer in the folder of its Python attribute (`_<name>`)
    for (const s of layer.sublayers) {
      const folder = weights?.keras3Folders[s.name] ?? `_${s.name}`;
      for (const [p, v] of keras3Paths(s, order)) out.set(`${folder}/${p}`, v);
    }
  } else {
    // own weights, numbered within their folder: `vars/0`, or `token_embedding/vars/0` for a
    // weight named `token_embedding/embeddings` (keras-hub's TokenAndPositionEmbedding)
    const counts = new Map<string, number>();
    for (const w of layer.weights) {
      // the segments between this layer's name and the weight's (a sublayer's weight is named
      // `<parent>/<sublayer>/<weight>`, a top-level layer's `<layer>/<folder>/<weight>`)
      const parts = w.originalName.split('/');
      const at = parts.lastIndexOf(layer.name, parts.length - 2);
      const local = parts.slice(at + 1, -1).join('/');
      const n = counts.get(local) ?? 0;
      counts.set(local, n + 1);
      out.set(local === '' ? `vars/${n}` : `${local}/vars/${n}`, w);
    }
  }
  return out;
}

/**
 * Renames Keras 3 HDF5-path weight names (`layers/<layer>/vars/0`) to tfjs weight names. The
 * names come from a throwaway build of the model with every weight zeros (no initializer runs),
 * made only after the topology guard has checked the graph and the weight sizes its config
 * implies against the sizes `specs` declare, and disposed weight by weight after. A loader that
 * builds the model anyway takes the names from its build instead ({@link renameByModel}).
 */
export async function renameKeras3Weights(
  topology: Obj,
  specs: tf.io.WeightsManifestEntry[],
): Promise<tf.io.WeightsManifestEntry[]> {
  if (!hasKeras3Names(specs)) return specs;
  checkTopology(topology, declaredElements(specs));
  // every weight zero-initialized: no random values are drawn for weights never used
  const model = await buildZeroModel(topology);
  try {
    return renameByModel(model, specs, configOrder(topology));
  } finally {
    disposeAllWeights(model);
  }
}

/** Whether a manifest names its weights by Keras 3 paths (`layers/<layer>/vars/0`). */
export function hasKeras3Names(specs: tf.io.WeightsManifestEntry[]): boolean {
  return specs.some((s) => s.name.startsWith('layers/'));
}

/** Keras 3 path names of `specs` renamed to the names of `model`'s weights. */
export function renameByModel(
  model: LayersModel,
  specs: tf.io.WeightsManifestEntry[],
  order: Map<string, string[]> = new Map(),
): tf.io.WeightsManifestEntry[] {
  if (!hasKeras3Names(specs)) return specs;
  const names = new Map<string, string>();
  for (const [p, v] of keras3Paths(model, order)) names.set(p, v.originalName);
  return specs.map((s) => {
    if (s.name.startsWith('optimizer/')) return s;
    const name = names.get(s.name);
    if (name === undefined) {
      throw new Error(`loadKerasModel: no layer of the model owns the Keras 3 weight '${s.name}'`);
    }
    return {...s, name};
  });
}
