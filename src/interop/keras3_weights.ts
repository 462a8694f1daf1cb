/**
 * Keras 3 names weights by their HDF5 path (`layers/<layer>/<sublayer>/vars/<i>`): those paths
 * (derived from the contracts: layers/engine/keras3_paths.ts) renamed to this package's weight
 * names, layer by layer in the config's order.
 */
import * as tf from '@tensorflow/tfjs-core';
import {LayersModel} from '@tensorflow/tfjs-layers';

import {checkTopology} from '../io/topology_guard';
import {declaredElements} from '../io/weight_bytes';
import {buildZeroModel, disposeAllWeights} from './load_in_place';
import type {JsonObject as Obj} from '../layers/engine/contract';
import {isObject} from '../layers/engine/json_object';
import {keras3Paths} from '../layers/engine/keras3_paths';

export {keras3Paths} from '../layers/engine/keras3_paths';

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
