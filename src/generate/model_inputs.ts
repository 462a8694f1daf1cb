/**
 * The inputs `generate` feeds a causal LM: token ids `[batch, width]`, and, for models with a
 * second input (keras-hub backbones take `padding_mask`), the mask of the positions known so far
 * (prompt and generated tokens), in that input's dtype.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

/**
 * Throws unless the model is a causal language model: it takes ids `[batch, T]` (or ids and a
 * padding mask `[batch, T]`) and returns one tensor of logits `[batch, T, vocab]` (a text
 * classifier's `[batch, classes]` is refused by what it is); returns the vocabulary size (null
 * when the output's last axis is not fixed). `fn` names the public function in the error.
 */
export function checkModelInputs(model: LayersModel, fn = 'generate'): number | null {
  const ins = model.inputs;
  const outs = model.outputs;
  const ids = ins[0];
  const ok =
    ids != null &&
    ids.shape.length === 2 &&
    !['bool', 'string', 'complex64'].includes(ids.dtype) &&
    (ins.length === 1 ||
      (ins.length === 2 && ins[1].shape.length === 2 && ins[1].dtype !== 'float32')) &&
    outs.length === 1 &&
    outs[0].shape.length === 3;
  if (!ok) {
    const describe = (xs: typeof ins) =>
      xs
        .map((i) => `${i.name} [${i.shape.map((d) => d ?? 'null').join(', ')}] ${i.dtype}`)
        .join(', ');
    throw new Error(
      `${fn}: the model is not a causal language model: expected a model taking token ids ` +
        `[batch, length] (and optionally a padding mask [batch, length]) and returning one ` +
        `tensor of logits [batch, length, vocab], received inputs ${describe(ins)} and outputs ` +
        `${describe(outs)}`,
    );
  }
  const vocab = outs[0].shape[2];
  return vocab ?? null;
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
