/**
 * Keras 3 names weights by their HDF5 path (`layers/<layer>/<sublayer>/vars/<i>`): the mapping
 * from those paths to this package's weight names, layer by layer in model order.
 */
import * as tf from '@tensorflow/tfjs-core';
import {layers, LayersModel, LayerVariable, models} from '@tensorflow/tfjs-layers';

import {checkTopology} from '../io/topology_guard';
import {declaredElements} from '../io/weight_bytes';
import {CompositeLayer} from '../layers/engine/composite_layer';
import {contractOf, snakeCase} from '../layers/engine/contract';
import type {JsonObject as Obj} from '../layers/engine/contract';

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

/** Each weight of `layer` by its Keras 3 path below the layer (`query_dense/vars/0`). */
export function keras3Paths(layer: layers.Layer): Map<string, LayerVariable> {
  const out = new Map<string, LayerVariable>();
  const weights = contractOf(layer.getClassName())?.weights;
  const sub = weights?.sublayers;
  if (layer instanceof LayersModel) {
    // a nested model: `layers/<key>/...` for each of its layers
    const counts = new Map<string, number>();
    for (const l of layer.layers) {
      const key = pathKey(l, counts);
      for (const [p, v] of keras3Paths(l)) out.set(`layers/${key}/${p}`, v);
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
      for (const [p, v] of keras3Paths(s)) out.set(`${folder}/${p}`, v);
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
 * Disposes every weight of a model once, shared layers included (`model.dispose()` keeps the
 * weights of a layer called twice, e.g. a tied embedding, because its count of uses stays above 0).
 */
function disposeAllWeights(model: LayersModel): void {
  const seen = new Set<LayerVariable>();
  const visit = (layer: layers.Layer) => {
    for (const w of layer.weights) seen.add(w);
    if (layer instanceof LayersModel) layer.layers.forEach(visit);
  };
  visit(model);
  for (const w of seen) w.dispose();
}

/**
 * Renames Keras 3 HDF5-path weight names (`layers/<layer>/vars/0`) to tfjs weight names. The
 * names come from a throwaway build of the model, made only after the topology guard has checked
 * the graph and the weight sizes its config implies against the sizes `specs` declare, and
 * disposed weight by weight after.
 */
export async function renameKeras3Weights(
  topology: Obj,
  specs: tf.io.WeightsManifestEntry[],
): Promise<tf.io.WeightsManifestEntry[]> {
  if (!specs.some((s) => s.name.startsWith('layers/'))) return specs;
  checkTopology(topology, declaredElements(specs));
  const model = await models.modelFromJSON({
    modelTopology: topology as unknown as tf.io.ModelJSON['modelTopology'],
  } as never);
  const names = new Map<string, string>();
  try {
    for (const [p, v] of keras3Paths(model)) names.set(p, v.originalName);
  } finally {
    disposeAllWeights(model);
  }
  return specs.map((s) => {
    if (s.name.startsWith('optimizer/')) return s;
    const name = names.get(s.name);
    if (name === undefined) {
      throw new Error(`loadKerasModel: no layer of the model owns the Keras 3 weight '${s.name}'`);
    }
    return {...s, name};
  });
}
