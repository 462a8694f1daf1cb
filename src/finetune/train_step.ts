/**
 * One fine-tuning step of a causal LM: the loss of one batch (causal_lm_loss.ts), its gradients
 * with respect to the model's trainable weights (after `enableLora`: A, B and the targets'
 * biases), and one optimizer update (keras_adam.ts), as keras-hub's `CausalLM.fit` runs it.
 */
import * as tf from '@tensorflow/tfjs-core';
import * as tfl from '@tensorflow/tfjs-layers';
import type {LayersModel, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';

import {useSharedIdentity} from '../kernels/shared_identity';
import {useFastTileGradient} from '../kernels/tile_gradient';
import {ReversibleEmbedding} from '../layers/hub/reversible_embedding';
import {causalLmLoss, type FrozenHead, headLoss} from './causal_lm_loss';
import {leanVariableGrads} from './lean_gradients';
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

/** A causal LM split before its frozen float head: the backbone's model and the head's layer. */
interface SplitModel {
  backbone: LayersModel;
  head: ReversibleEmbedding;
}

const splits = new WeakMap<LayersModel, SplitModel | null>();

/**
 * The model up to the final hidden states and its head, where the head is a frozen float
 * `ReversibleEmbedding` (keras-hub's causal LM head: tied or untied, soft-capped or not) that the
 * loss can apply chunk by chunk (causal_lm_loss.ts' `headLoss`); null where it is not (int8 or
 * int4 heads, a trainable head, another output layer): the full logits then. The backbone's
 * model shares the model's layers (never disposed itself: that would dispose their weights).
 */
function splitAtHead(model: LayersModel): SplitModel | null {
  if (splits.has(model)) return splits.get(model) as SplitModel | null;
  let split: SplitModel | null = null;
  const out = model.outputs.length === 1 ? model.outputs[0] : null;
  const layer = out?.sourceLayer;
  if (
    out != null &&
    layer instanceof ReversibleEmbedding &&
    layer.constructor === ReversibleEmbedding &&
    layer.quantizationMode == null &&
    out.inputs.length === 1 &&
    out.inputs[0].dtype === 'float32'
  ) {
    split = {
      backbone: tfl.model({inputs: model.inputs, outputs: out.inputs[0] as SymbolicTensor}),
      head: layer,
    };
  }
  splits.set(model, split);
  return split;
}

/**
 * The head's table as the chunked loss reads it, or null while the head has trainable weights or
 * any weight besides its table(s) (an adapter, say, that its reverse call would add).
 */
function frozenHead(head: ReversibleEmbedding): FrozenHead | null {
  if (head.trainableWeights.length > 0) return null;
  if (!head.weights.every((w) => w === head.embeddings || w === head.reverseEmbeddings)) {
    return null;
  }
  const table = head.tieWeights ? head.embeddings : head.reverseEmbeddings;
  if (table == null) return null;
  return {
    table: table.read() as tf.Tensor2D,
    transposed: head.tieWeights,
    softCap: head.logitSoftCap,
  };
}

/**
 * The loss as a scalar tensor (the caller reads and disposes it) and the gradients: see
 * {@link lossAndGradients}.
 */
function lossTensorAndGradients(
  model: LayersModel,
  batch: CausalLmBatch,
  chunkRows?: number,
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
  // the tape's saved tensors shared rather than copied on wasm (kernels/shared_identity.ts)
  const restoreIdentity = useSharedIdentity();
  try {
    const split = splitAtHead(model);
    const head = split == null ? null : frozenHead(split.head);
    // the backward pass' saved tensors and gradients freed as it goes (lean_gradients.ts)
    const {value, grads} = leanVariableGrads(() => {
      if (split != null && head != null) {
        const hidden = split.backbone.apply([ids, mask], {training: true}) as tf.Tensor;
        return headLoss(hidden, head, y, sw, chunkRows);
      }
      const logits = model.apply([ids, mask], {training: true}) as tf.Tensor;
      return causalLmLoss(logits, y, sw);
    }, values);
    return {loss: value, variables, grads};
  } finally {
    restoreIdentity();
    restoreTileGradient();
    tf.dispose([ids, mask, y, sw]);
  }
}

/**
 * The batch's loss and the gradients of `model`'s trainable weights (training mode). A causal LM
 * whose head is a frozen float `ReversibleEmbedding` (GPT-2's tied embedding under LoRA) never
 * makes its whole logits `[batch · length, vocab]`: the head and the loss run `chunkRows`
 * positions at a time (default: about 32 MiB of logits a chunk; causal_lm_loss.ts' `headLoss`).
 */
export function lossAndGradients(
  model: LayersModel,
  batch: CausalLmBatch,
  chunkRows?: number,
): LossAndGradients {
  const {loss, variables, grads} = lossTensorAndGradients(model, batch, chunkRows);
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
