/**
 * Keras 3 names weights by their HDF5 path (`layers/<layer>/<sublayer>/vars/<i>`): the mapping
 * from those paths to this package's weight names, layer by layer in model order.
 */
import * as tf from '@tensorflow/tfjs-core';
import {models} from '@tensorflow/tfjs-layers';

import {CompositeLayer} from '../layers/composite_layer';
import {GQA_SUBLAYERS} from '../layers/group_query_attention';
import {MHA_SUBLAYERS} from '../layers/multi_head_attention_sublayers';
import {snake} from './keras_options';

type Json = null | boolean | number | string | Json[] | {[key: string]: Json};
type Obj = {[key: string]: Json};

/** Classes whose Keras 3 weights sit in sublayer folders, the folders, and the path prefix. */
const KERAS3_SUBLAYERS: Record<
  string,
  {prefix?: string; table: ReadonlyArray<{name: string; keras3: string}>}
> = {
  MultiHeadAttention: {table: MHA_SUBLAYERS},
  CachedMultiHeadAttention: {table: MHA_SUBLAYERS},
  // the Python class is GroupedQueryAttention, which names its weight folder
  GroupQueryAttention: {prefix: 'grouped_query_attention', table: GQA_SUBLAYERS},
};

/** Renames Keras 3 HDF5-path weight names (`layers/<layer>/vars/0`) to tfjs weight names. */
export async function renameKeras3Weights(
  topology: Obj,
  specs: tf.io.WeightsManifestEntry[],
): Promise<tf.io.WeightsManifestEntry[]> {
  if (!specs.some((s) => s.name.startsWith('layers/'))) return specs;
  const model = await models.modelFromJSON({
    modelTopology: topology as unknown as tf.io.ModelJSON['modelTopology'],
  } as never);
  const counts = new Map<string, number>();
  const names = new Map<string, string>();
  for (const layer of model.layers) {
    const sub = KERAS3_SUBLAYERS[layer.getClassName()];
    const base = sub?.prefix ?? snake(layer.getClassName());
    const n = counts.get(base) ?? 0;
    counts.set(base, n + 1);
    const key = n === 0 ? base : `${base}_${n}`;
    if (sub != null && layer instanceof CompositeLayer) {
      // Keras 3 keeps each projection's kernel and bias as vars/0 and vars/1 of its folder
      const paths = layer.weightPaths();
      for (const {name, keras3} of sub.table) {
        ['kernel', 'bias'].forEach((w, i) => {
          const v = paths.get(`${name}/${w}`);
          if (v != null) names.set(`layers/${key}/${keras3}/vars/${i}`, v.originalName);
        });
      }
    } else {
      layer.weights.forEach((w, i) => names.set(`layers/${key}/vars/${i}`, w.originalName));
    }
  }
  model.dispose();
  return specs.map((s) => {
    if (s.name.startsWith('optimizer/')) return s;
    const name = names.get(s.name);
    if (name === undefined) {
      throw new Error(`loadKerasModel: no layer of the model owns the Keras 3 weight '${s.name}'`);
    }
    return {...s, name};
  });
}
