/**
 * Keras 3's weight paths, derived from the layers' contracts: a layer's weights by their HDF5 path
 * (`layers/<layer>/<sublayer>/vars/<i>`), nested models and keras-hub sublayers too. The one
 * derivation the Keras loader, both exporters and the keras-hub families read.
 */
import {layers, LayersModel, LayerVariable} from '@tensorflow/tfjs-layers';

import {CompositeLayer} from './composite_layer';
import {contractOf, snakeCase} from './contract';
import {isLoraWeight} from '../core/lora';

/** Keras 3's folder name of a layer class before numbering: its contract's prefix, or the snake-cased class. */
function keras3PathBase(cls: string): string {
  const keras3 = contractOf(cls)?.keras.keras3;
  return (
    (keras3 != null && 'keys' in keras3 ? keras3.pathPrefix : undefined) ??
    (cls === 'Model' || cls === 'Functional' ? 'functional' : snakeCase(cls))
  );
}

/** Keras 3's path key of a layer inside its model: the snake-cased class, numbered by order. */
export function keras3PathKey(cls: string, counts: Map<string, number>): string {
  const base = keras3PathBase(cls);
  const n = counts.get(base) ?? 0;
  counts.set(base, n + 1);
  return n === 0 ? base : `${base}_${n}`;
}

/**
 * The weights of the layers of one model, in the model's layer order, by Keras 3 path
 * (`layers/<key>/...`, each layer's key numbered by its class in that order).
 */
export function keras3LayerPaths(
  list: readonly layers.Layer[],
  order: Map<string, string[]> = new Map(),
): Map<string, LayerVariable> {
  const out = new Map<string, LayerVariable>();
  const counts = new Map<string, number>();
  for (const l of list) {
    const key = keras3PathKey(l.getClassName(), counts);
    for (const [p, v] of keras3Paths(l, order)) out.set(`layers/${key}/${p}`, v);
  }
  return out;
}

/**
 * Each weight of `layer` by its Keras 3 path below the layer (`query_dense/vars/0`). `order`: the
 * order of each model's layers in its Keras config, by model name (Keras 3 numbers paths in that
 * order, which tfjs' `model.layers`, sorted by depth, may not keep).
 */
export function keras3Paths(
  layer: layers.Layer,
  order: Map<string, string[]> = new Map(),
): Map<string, LayerVariable> {
  const out = new Map<string, LayerVariable>();
  const weights = contractOf(layer.getClassName())?.weights;
  const sub = weights?.sublayers;
  if (layer instanceof LayersModel) {
    // a nested model: `layers/<key>/...` for each of its layers
    const names = order.get(layer.name);
    const rank = (l: layers.Layer) => names?.indexOf(l.name) ?? -1;
    const inOrder =
      names != null && layer.layers.every((l) => rank(l) >= 0)
        ? [...layer.layers].sort((a, b) => rank(a) - rank(b))
        : layer.layers;
    return keras3LayerPaths(inOrder, order);
  } else if (sub != null && layer instanceof CompositeLayer) {
    // Keras 3 keeps each projection's kernel, bias, (int8 / int4) kernel_scale and (int4
    // grouped) kernel_zero and g_idx as vars/0, 1, ... of its folder, numbering only those it has
    const paths = layer.weightPaths();
    for (const {name, keras3} of sub) {
      let i = 0;
      for (const w of ['kernel', 'bias', 'kernel_scale', 'kernel_zero', 'g_idx']) {
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
    // in the order they were made (a frozen kernel moves behind the trainable weights in
    // `layer.weights`); LoRA's A and B are never saved: Keras merges them into the kernel
    const own = layer.weights.filter((w) => !isLoraWeight(layer, w)).sort((a, b) => a.id - b.id);
    const counts = new Map<string, number>();
    for (const w of own) {
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
