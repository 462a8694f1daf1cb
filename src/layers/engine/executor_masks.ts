/**
 * Keras masks in tfjs' predict: tfjs 4.22's executor (`execute`, used by `predict` and
 * `evaluate`) hands one `kwargs` object to every layer of a run and sets its `mask` only for a
 * layer whose inputs carry one, never clearing it: an earlier layer's mask reached later layers
 * whose inputs have none (after a merge whose output mask is none, or a `Conv1D` / `Permute`, which
 * Keras gives no mask), and a masked average or softmax there used it, silently. Each layer's
 * `apply` here takes the mask off that object once it returns, so the next layer gets a mask only
 * when the executor sets one for it. A mask passed to `apply` by a caller is used as before.
 */
import {layers} from '@tensorflow/tfjs-layers';

type Apply = layers.Layer['apply'];
const original: Apply = layers.Layer.prototype.apply;

layers.Layer.prototype.apply = function (
  this: layers.Layer,
  inputs: Parameters<Apply>[0],
  kwargs?: Parameters<Apply>[1],
): ReturnType<Apply> {
  try {
    return original.call(this, inputs, kwargs);
  } finally {
    if (kwargs != null && 'mask' in kwargs) delete kwargs.mask;
  }
};
