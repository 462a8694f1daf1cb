/**
 * The inputs `generate` feeds a causal LM: token ids `[batch, width]`, and, for models with a
 * second input (keras-hub backbones take `padding_mask`), the mask of the positions known so far
 * (prompt and generated tokens), in that input's dtype.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

/** Throws unless the model takes ids, or ids and a padding mask. */
export function checkModelInputs(model: LayersModel): void {
  const ins = model.inputs;
  const ok =
    ins.length === 1 ||
    (ins.length === 2 && ins[1].shape.length === 2 && ins[1].dtype !== 'float32');
  if (!ok) {
    throw new Error(
      `generate: expected a model taking token ids [batch, length] (and optionally a padding mask ` +
        `[batch, length]), received inputs ${ins.map((i) => `${i.name} [${i.shape.join(', ')}] ${i.dtype}`).join(', ')}`,
    );
  }
}

/**
 * `ids` rows cut to `width`; `known[b]`: how many leading positions of row b hold tokens.
 */
export function modelInputs(
  model: LayersModel,
  ids: number[][],
  width: number,
  known: number[],
): tf.Tensor | tf.Tensor[] {
  const B = ids.length;
  const tokens = tf.tensor2d(
    ids.map((r) => r.slice(0, width)),
    [B, width],
    'int32',
  );
  if (model.inputs.length === 1) return tokens;
  const mask = tf.tensor2d(
    known.map((n) => Array.from({length: width}, (_, j) => (j < n ? 1 : 0))),
    [B, width],
    model.inputs[1].dtype === 'bool' ? 'bool' : 'int32',
  );
  return [tokens, mask];
}
