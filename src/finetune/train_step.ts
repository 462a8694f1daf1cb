/**
 * One fine-tuning step of a causal LM: the loss of one batch (causal_lm_loss.ts), its gradients
 * with respect to the model's trainable weights (after `enableLora`: A, B and the targets'
 * biases), and one optimizer update (keras_adam.ts), as keras-hub's `CausalLM.fit` runs it.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel, LayerVariable} from '@tensorflow/tfjs-layers';

import {useFastTileGradient} from '../kernels/tile_gradient';
import {causalLmLoss} from './causal_lm_loss';
import type {KerasAdam} from './keras_adam';

/** One batch as keras-hub's `CausalLMPreprocessor` makes it (x, y, sample_weight). */
export interface CausalLmBatch {
  /** `[batch, length]` ids, the start token first. */
  tokenIds: number[][];
  /** `[batch, length]` 1 for a token, 0 for padding. */
  paddingMask: number[][];
  /** `[batch, length]` the next id at each position. */
  y: number[][];
  /** `[batch, length]` the weight of each position's loss (the shifted padding mask). */
  sampleWeight: number[][];
}

/** The loss and the gradient of each trainable weight (in `model.trainableWeights`' order). */
export interface LossAndGradients {
  loss: number;
  variables: LayerVariable[];
  /** One per variable; the caller disposes them. */
  grads: tf.Tensor[];
}

/** The loss as a scalar tensor (the caller reads and disposes it) and the gradients. */
function lossTensorAndGradients(
  model: LayersModel,
  batch: CausalLmBatch,
): {loss: tf.Scalar; variables: LayerVariable[]; grads: tf.Tensor[]} {
  const variables = model.trainableWeights;
  if (variables.length === 0) {
    throw new Error(
      `fine-tuning: model '${model.name}' has no trainable weights (call enableLora(model, rank) first)`,
    );
  }
  const values = variables.map((v) => v.read() as tf.Variable);
  const ids = tf.tensor2d(batch.tokenIds, undefined, 'int32');
  const mask = tf.tensor2d(batch.paddingMask, undefined, 'int32');
  const y = tf.tensor2d(batch.y, undefined, 'int32');
  const sw = tf.tensor2d(batch.sampleWeight, undefined, 'float32');
  // tfjs' Tile gradient is a kernel per repetition (LayerNormalization tiles its mean and
  // variance over the width: 768 slices and adds per norm at GPT-2 small's width)
  const restoreTileGradient = useFastTileGradient();
  try {
    const {value, grads} = tf.variableGrads(() => {
      const logits = model.apply([ids, mask], {training: true}) as tf.Tensor;
      return causalLmLoss(logits, y, sw);
    }, values);
    return {loss: value, variables, grads: values.map((v) => grads[v.name])};
  } finally {
    restoreTileGradient();
    tf.dispose([ids, mask, y, sw]);
  }
}

/** The batch's loss and the gradients of `model`'s trainable weights (training mode). */
export function lossAndGradients(model: LayersModel, batch: CausalLmBatch): LossAndGradients {
  const {loss, variables, grads} = lossTensorAndGradients(model, batch);
  const value = loss.dataSync()[0];
  loss.dispose();
  return {loss: value, variables, grads};
}

/** One step: the loss before the update (as Keras' `train_on_batch` returns it). */
export function trainStep(model: LayersModel, batch: CausalLmBatch, optimizer: KerasAdam): number {
  const {loss, variables, grads} = lossAndGradients(model, batch);
  try {
    optimizer.apply(variables, grads);
  } finally {
    tf.dispose(grads);
  }
  return loss;
}

/**
 * {@link trainStep} with the loss read asynchronously (`data()`, after the update is queued):
 * tfjs-backend-webgpu's synchronous read loses the device in a page (SwiftShader's WebGPU).
 */
export async function trainStepAsync(
  model: LayersModel,
  batch: CausalLmBatch,
  optimizer: KerasAdam,
): Promise<number> {
  const {loss, variables, grads} = lossTensorAndGradients(model, batch);
  try {
    try {
      optimizer.apply(variables, grads);
    } finally {
      tf.dispose(grads);
    }
    return (await loss.data())[0];
  } finally {
    loss.dispose();
  }
}
