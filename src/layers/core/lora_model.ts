/**
 * LoRA on a whole model, as keras-hub's `Backbone.enable_lora(rank, target_layer_names)` does it:
 * every weight frozen, then each layer named as a target (default keras-hub's
 * `default_lora_layer_names()`: `query_dense`, `value_dense`, `query`, `value`) trains again (its
 * bias included) and gets A and B; its kernel stays frozen. Undone by {@link disableLora} and
 * {@link mergeLora}.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {layers, LayersModel, LayerVariable} from '@tensorflow/tfjs-layers';

import {kerasWeightedLayers} from '../engine/keras_layer_order';
import {isLoraLayer, LoraLayer, LoraOptions, loraScale, LoraWeights} from './lora';
import {kerasFlattenedLayers} from '../engine/keras_layer_order';

/** keras-hub 0.32's `Backbone.default_lora_layer_names()`. */
export const DEFAULT_LORA_TARGETS: readonly string[] = [
  'query_dense',
  'value_dense',
  'query',
  'value',
];

/** Options of {@link enableLora}. */
export interface EnableLoraOptions extends LoraOptions {
  /** The names of the layers to adapt (keras-hub's `target_layer_names`); default keras-hub's. */
  targets?: string[];
}

/** What {@link enableLora} did to a model: what to undo, and keras-hub's numbering. */
interface ModelLora {
  rank: number;
  /** The adapted layers, each with its index among the model's layers with weights (Keras' order). */
  layers: {index: number; layer: LoraLayer}[];
  /** Each weight's `trainable` before: restored by disableLora / mergeLora. */
  trainable: Map<LayerVariable, boolean>;
}

const enabled = new WeakMap<layers.Layer, ModelLora>();

/** The layers LoRA was enabled on in `model` by {@link enableLora}, with keras-hub's indices. */
export function loraLayersOf(model: layers.Layer): {index: number; layer: LoraLayer}[] {
  return enabled.get(model)?.layers ?? [];
}

/** The rank {@link enableLora} used on `model`, or null when it is not enabled. */
export function loraRankOf(model: layers.Layer): number | null {
  return enabled.get(model)?.rank ?? null;
}

/**
 * Enables LoRA: on a layer (EinsumDense, ...), Keras' `layer.enable_lora(rank, ...)`; on a model
 * (or a layer made of sublayers), keras-hub's `backbone.enable_lora(rank, targets)`: every weight
 * frozen, then each layer whose name is in `targets` (default `query_dense`, `value_dense`,
 * `query`, `value`) trains (its bias too) with A and B added, its kernel frozen. keras-hub's
 * own call takes no alpha (alpha = rank); `alpha` here is Keras' layer option. Returns the
 * adapted layers.
 *
 * @example
 * ```ts
 * const {model} = await loadKerasHubPreset('./gpt2_preset');
 * enableLora(model, 4); // model.trainableWeights: each query / value's bias, A and B
 * ```
 */
export function enableLora(
  target: layers.Layer,
  rank: number,
  options: EnableLoraOptions = {},
): LoraLayer[] {
  const {targets, ...layerOptions} = options ?? {};
  loraScale(rank, layerOptions, `enableLora`);
  // a model, or a layer made of sublayers: keras-hub's backbone.enable_lora over its layers
  const weighted = kerasWeightedLayers(target);
  if (weighted.length === 0) {
    if (!isLoraLayer(target)) {
      throw new Error(
        `enableLora: expected a model or a layer that takes LoRA (EinsumDense, Dense, ` +
          `Embedding, ...), received ${target?.getClassName?.() ?? typeof target} ` +
          `'${target?.name}'${tfjsOwnHint(target)}`,
      );
    }
    target.enableLora(rank, layerOptions);
    return [target];
  }
  if (enabled.has(target)) {
    throw new Error(
      `enableLora: LoRA is already enabled on '${target.name}' (rank ${enabled.get(target)?.rank});` +
        ' call disableLora or mergeLora first',
    );
  }
  const names = targets ?? DEFAULT_LORA_TARGETS;
  if (!Array.isArray(names) || names.some((n) => typeof n !== 'string')) {
    throw new Error(
      `enableLora: expected targets as an array of layer names, received ${String(names)}`,
    );
  }
  const chosen = weighted
    .map((layer, index) => ({index, layer}))
    .filter((e) => names.includes(e.layer.name) && isLoraLayer(e.layer)) as {
    index: number;
    layer: LoraLayer;
  }[];
  if (chosen.length === 0) {
    const seen = [...new Set(weighted.map((l) => l.name))].slice(0, 20);
    const named = weighted.find((l) => names.includes(l.name));
    throw new Error(
      `enableLora: no layer of '${target.name}' named ${names.join(', ')} takes LoRA; its ` +
        `layers with weights are named ${seen.join(', ')}${named ? tfjsOwnHint(named) : ''}`,
    );
  }
  const trainable = new Map<LayerVariable, boolean>();
  for (const w of target.weights) {
    trainable.set(w, w.trainable);
    w.trainable = false;
  }
  for (const {layer} of chosen) {
    for (const w of layer.weights) w.trainable = true;
    layer.enableLora(rank, layerOptions);
  }
  enabled.set(target, {rank, layers: chosen, trainable});
  return chosen.map((c) => c.layer);
}

/**
 * The hint for tfjs' own Dense / Embedding (made by `tf.layers.dense` / `tf.layers.embedding`),
 * which have no LoRA: the package's classes of those names do, and loaded models have them.
 */
function tfjsOwnHint(layer: layers.Layer): string {
  const cls = layer?.getClassName?.();
  if ((cls !== 'Dense' && cls !== 'Embedding') || isLoraLayer(layer)) return '';
  return (
    ` ('${layer.name}' is tfjs' own ${cls}, made by tf.layers.${cls.toLowerCase()}: make it ` +
    `with this package's ${cls}, new ${cls}({...}), which loaded models have)`
  );
}

/** Undoes {@link enableLora} on a model or layer: A and B removed, every weight trains as before. */
export function disableLora(target: layers.Layer): void {
  undo(target, (l) => l.disableLora());
}

/**
 * Merges each adapted layer's `(alpha / rank) · A @ B` into its kernel (float layers), then
 * undoes {@link enableLora} as {@link disableLora} does.
 */
export function mergeLora(target: layers.Layer): void {
  undo(target, (l) => l.mergeLora());
}

function undo(target: layers.Layer, each: (l: LoraLayer) => void): void {
  const state = enabled.get(target);
  if (state == null) {
    if (isLoraLayer(target)) each(target);
    return;
  }
  for (const {layer} of state.layers) each(layer);
  for (const [w, t] of state.trainable) w.trainable = t;
  enabled.delete(target);
}

/** Every LoRA layer with adapters under `model` (whatever enabled them). */
export function adaptedLayers(model: layers.Layer): LoraLayer[] {
  return kerasFlattenedLayers(model).filter(
    (l): l is LoraLayer => isLoraLayer(l) && l.lora != null,
  );
}

/**
 * `model`'s weights by name as Keras saves them: each adapted layer's kernel with its update
 * merged in, A and B left out (Keras' `save_own_variables`); null when no layer has adapters.
 * `dispose` frees the merged kernels.
 */
export function mergedNamedWeights(
  model: LayersModel,
): {named: {name: string; tensor: tf.Tensor}[]; dispose: () => void} | null {
  const adapted = adaptedLayers(model);
  if (adapted.length === 0) return null;
  const skip = new Set<LayerVariable>();
  const merged = new Map<LayerVariable, tf.Tensor>();
  try {
    for (const layer of adapted) {
      const w = layer.lora as LoraWeights;
      skip.add(w.a);
      skip.add(w.b);
      for (const [v, t] of layer.mergedWeights()) merged.set(v, t);
    }
  } catch (e) {
    tf.dispose([...merged.values()]);
    throw e;
  }
  const named = model.weights
    .filter((w) => !skip.has(w))
    .map((w) => ({name: w.originalName, tensor: merged.get(w) ?? w.read()}));
  return {named, dispose: () => tf.dispose([...merged.values()])};
}
