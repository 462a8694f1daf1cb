/**
 * Keras 3's `_flatten_layers(include_self=False)` of a model, as the package holds it: the order
 * keras-hub numbers a backbone's layers in (`enable_lora`, `save_lora_weights`: `lora/<i>` is
 * the i-th layer that has weights). Keras walks a deque: the model's layers in order, each one's
 * sublayers pushed to the front with `extendleft`, which reverses them; so a block's sublayers
 * come last-made first (a MultiHeadAttention's `value` before its `query`).
 */
import {layers, LayersModel} from '@tensorflow/tfjs-layers';

import {CompositeLayer} from './composite_layer';

/** The sublayers of `layer` in the order it made them (none for a plain layer). */
function sublayersOf(layer: layers.Layer): readonly layers.Layer[] {
  if (layer instanceof LayersModel) return layer.layers;
  if (layer instanceof CompositeLayer) return layer.sublayers;
  return [];
}

/** Every layer below `model`, in Keras' `_flatten_layers(include_self=False)` order. */
export function kerasFlattenedLayers(model: layers.Layer): layers.Layer[] {
  const out: layers.Layer[] = [];
  const seen = new Set<layers.Layer>();
  const deque: layers.Layer[] = [...sublayersOf(model)];
  while (deque.length > 0) {
    const layer = deque.shift() as layers.Layer;
    if (seen.has(layer)) continue;
    seen.add(layer);
    out.push(layer);
    // extendleft: each sublayer in turn to the front, so the last one made comes first
    deque.unshift(...[...sublayersOf(layer)].reverse());
  }
  return out;
}

/** The layers keras-hub numbers LoRA's weights by: those of {@link kerasFlattenedLayers} with weights. */
export function kerasWeightedLayers(model: layers.Layer): layers.Layer[] {
  return kerasFlattenedLayers(model).filter((l) => l.weights.length > 0);
}
