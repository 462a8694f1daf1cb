/**
 * Runs a planned functional causal LM (graph_plan.ts) a few positions at a time: each node is
 * called eagerly with `layer.apply` on the new positions, position-aware layers with
 * `startIndex`, cached attention with its key / value cache `[batch, 2, maxLength, ...]` and
 * `cacheUpdateIndex`. The caches stay on the backend between steps; a step reads back nothing.
 * tfjs' LayerNormalization nodes run in fewer kernels with the same values (layer_norm in
 * layers/core/fused_ops.ts), and a one-position step's logits are not sliced: on webgl / webgpu,
 * where this stepper runs, every kernel but a reshape is a shader program.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {layerNormLastAxis} from '../layers/core/fused_ops';
import type {PlannedNode, StepPlan} from './graph_plan';

/** `[B, t, D]` fed as rows `[B * t, D]` and the output shaped back `[B, t, ...]`. */
function applyToRows(layer: PlannedNode['layer'], x: tf.Tensor, kwargs: Kwargs): tf.Tensor {
  const [B, t, D] = x.shape;
  const y = layer.apply(tf.reshape(x, [B * t, D]), kwargs) as tf.Tensor; // [B * t, units]
  return tf.reshape(y, [B, t, ...y.shape.slice(1)]);
}

export class GraphStepper {
  private readonly caches = new Map<PlannedNode, tf.Tensor>();
  /**
   * With `masksZeroIds` and `zeroKeysExact`: per batch row and cache position, 1 for a kept key and 0 for a
   * position holding the id 0 (a mask_zero key), as Keras' padding mask of the whole sequence
   * would have it; positions not written yet are 1 (the causal mask hides them).
   */
  private readonly keyMask: Uint8Array | null;
  /** Positions written so far (the next step starts there). */
  position = 0;

  constructor(
    private readonly plan: StepPlan,
    readonly batch: number,
    readonly maxLength: number,
  ) {
    for (const p of plan.nodes) {
      if (p.cache == null) continue;
      const shape = p.cache.entry.cacheShape(
        p.cache.config,
        p.node.inputTensors[0].shape,
        batch,
        maxLength,
      );
      this.caches.set(p, tf.zeros(shape));
    }
    this.keyMask =
      plan.masksZeroIds && plan.zeroKeysExact ? new Uint8Array(batch * maxLength).fill(1) : null;
  }

  /** The key mask `[batch, t, maxLength]` of a step of t positions (see `keyMask`). */
  private keyMaskOf(t: number): tf.Tensor | null {
    if (this.keyMask == null) return null;
    const rows = tf.tensor3d(this.keyMask, [this.batch, 1, this.maxLength], 'float32');
    return t === 1 ? rows : tf.tile(rows, [1, t, 1]);
  }

  /**
   * Feeds ids `[batch, t]` at positions `position .. position + t - 1` and returns the logits of
   * the last of them, `[batch, vocab]`; the caches then hold those positions. `rows`: the same
   * ids as numbers, which a model that masks the id 0 (`masksZeroIds`) needs for its key mask.
   */
  step(ids: tf.Tensor2D, rows: readonly (readonly number[])[] | null = null): tf.Tensor2D {
    const start = this.position;
    const t = ids.shape[1];
    if (start + t > this.maxLength) {
      throw new Error(
        `generate: positions ${start} to ${start + t - 1} exceed maxLength ${this.maxLength}`,
      );
    }
    if (this.keyMask != null) {
      if (rows == null) {
        throw new Error('generate: a model that masks the id 0 needs the ids of each step as rows');
      }
      for (let b = 0; b < this.batch; b++) {
        for (let i = 0; i < t; i++) {
          this.keyMask[b * this.maxLength + start + i] = rows[b][i] === 0 ? 0 : 1;
        }
      }
    }
    const {logits, caches} = tf.tidy(() => {
      const keyMask = this.keyMaskOf(t);
      const values = new Map<number, tf.Tensor>([[this.plan.input.id, ids]]);
      const newCaches: tf.Tensor[] = [];
      for (const p of this.plan.nodes) {
        const inputs = p.node.inputTensors
          .filter((x) => x !== this.plan.padding)
          .map((x) => values.get(x.id) as tf.Tensor);
        const arg = inputs.length === 1 ? inputs[0] : inputs;
        let kwargs: Kwargs = p.kwargs;
        if (p.kind === 'positionAware') {
          // a converted model may fix a start_index in the layer's config: positions shift by it
          const offset = (p.layer as {startIndex?: number}).startIndex ?? 0;
          kwargs = {...kwargs, startIndex: start + offset};
        }
        const cache = this.caches.get(p);
        if (cache != null) {
          const masks = p.cache?.entry.readsKerasMasks === true ? keyMask : null;
          kwargs = {...kwargs, ...(p.cache?.entry.cacheKwargs(cache, start, masks) ?? {})};
        }
        const plain = !Array.isArray(arg) && arg.kerasMask == null;
        const result = ((plain ? layerNormLastAxis(p.layer, arg) : null) ??
          (p.flattenRows === true && plain
            ? applyToRows(p.layer, arg, kwargs)
            : p.layer.apply(arg, kwargs))) as tf.Tensor | tf.Tensor[];
        let outputs = Array.isArray(result) ? result : [result];
        if (cache != null) {
          newCaches.push(outputs[outputs.length - 1]);
          outputs = outputs.slice(0, -1);
        }
        // with masksZeroIds the chunk's Keras masks name its new positions alone: they must not
        // reach attention as the only keys (the key mask over the whole cache replaces them)
        if (this.plan.masksZeroIds) for (const o of outputs) o.kerasMask = undefined;
        p.node.outputTensors.forEach((x, i) => values.set(x.id, outputs[i]));
      }
      const out = values.get(this.plan.output.id) as tf.Tensor; // [batch, t, vocab]
      const V = out.shape[2] as number;
      // one position: its logits are the output as they are (no Slice program)
      const lastRow = t === 1 ? out : tf.slice(out, [0, t - 1, 0], [this.batch, 1, V]);
      const last = tf.reshape(lastRow, [this.batch, V]);
      return {logits: last as tf.Tensor2D, caches: newCaches};
    });
    let i = 0;
    for (const [p, old] of this.caches) {
      old.dispose();
      this.caches.set(p, caches[i++]);
    }
    this.position = start + t;
    return logits;
  }

  dispose(): void {
    for (const c of this.caches.values()) c.dispose();
    this.caches.clear();
  }
}
