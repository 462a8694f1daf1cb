/**
 * tfjs' `Embedding` with Keras 3's LoRA (`enable_lora`), registered under tfjs' name
 * (`layers/register.ts`) so that loaded models (Keras 3 files, keras-hub presets, tfjs models)
 * get it. Without LoRA it is tfjs' class as it is.
 */
import * as tf from '@tensorflow/tfjs-core';
// tfjs-layers registers its Embedding on import; this module extends it
import '@tensorflow/tfjs-layers';
import type {layers, LayerVariable} from '@tensorflow/tfjs-layers';
import type {EmbeddingLayerArgs} from '@tensorflow/tfjs-layers/dist/layers/embeddings';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {
  addLoraWeights,
  LoraLayer,
  loraMergedFloat,
  LoraOptions,
  loraRows,
  loraSavedWeights,
  LoraWeights,
  mergeFloatLora,
  removeLoraWeights,
} from './lora';
import {tfjsClass} from './tfjs_classes';

/** What this module reads of tfjs' Embedding. */
type EmbeddingLike = layers.Layer & {
  /** Vocabulary size. */
  inputDim: number;
  /** Row width. */
  outputDim: number;
  /** The table `[inputDim, outputDim]`, at build. */
  embeddings: LayerVariable | null;
  /** tfjs' `embeddingsConstraint` (LoRA refuses a constrained table, as Keras does). */
  embeddingsConstraint?: unknown;
};

/** tfjs' class, taking tfjs' arguments. */
const TfjsEmbedding = tfjsClass<EmbeddingLike>('Embedding') as new (
  args: EmbeddingLayerArgs,
) => EmbeddingLike;

/**
 * tfjs' `Embedding` (rows of `embeddings [inputDim, outputDim]` at the ids), with Keras 3's LoRA:
 * {@link Embedding.enableLora} adds `lora_embeddings_a` `[inputDim, rank]` and
 * `lora_embeddings_b` `[rank, outputDim]`, and the layer then looks its rows up in
 * `embeddings + (alpha / rank) · A @ B`, as Keras' float `Embedding` does (computed as the rows
 * plus `(alpha / rank) · A[ids] @ B`, never the whole update). Construct it with tfjs' Embedding
 * arguments; a model loaded from a file has it in place of tfjs' Embedding. The int8 / int4 forms
 * are {@link QuantizedEmbedding}.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {Embedding} from 'tfjs-attention';
 *
 * const emb = new Embedding({inputDim: 100, outputDim: 16});
 * emb.apply(tf.zeros([1, 4], 'int32'));
 * emb.enableLora(4); // emb.trainableWeights: lora_embeddings_a [100, 4], lora_embeddings_b [4, 16]
 * ```
 */
export class Embedding extends TfjsEmbedding implements LoraLayer {
  /**
   * The name of tfjs' class, which this one replaces in deserialization.
   * @nocollapse
   */
  static readonly className = 'Embedding';

  /** LoRA's weights while enabled ({@link Embedding.enableLora}), else null. */
  lora: LoraWeights | null = null;

  private where(): string {
    return `Embedding '${this.name}'`;
  }

  /**
   * Keras' `enable_lora(rank, lora_alpha, a_initializer, b_initializer)`: adds
   * `lora_embeddings_a` `[inputDim, rank]` (heUniform) and `lora_embeddings_b`
   * `[rank, outputDim]` (zeros), both trainable float32, and freezes the table. Refuses a layer
   * not built, one already enabled, and an `embeddingsConstraint`, as Keras does.
   *
   * Args:
   * - `rank`: the rank of A and B (a positive integer).
   * - `options.alpha`: the scale's numerator, `(alpha / rank) · A @ B`; default the rank.
   * - `options.aInitializer` / `options.bInitializer`: default `heUniform` / `zeros`.
   */
  enableLora(rank: number, options?: LoraOptions): void {
    this.lora = addLoraWeights(
      this,
      this.addWeight.bind(this),
      this.embeddings,
      (this.embeddings?.shape as number[] | undefined) ?? null,
      rank,
      options,
      this.embeddingsConstraint != null,
      'embeddings',
    );
  }

  /** Removes LoRA's weights, leaving the table as it was (and training as it did before). */
  disableLora(): void {
    if (this.lora == null) return;
    removeLoraWeights(this, this.lora);
    this.lora = null;
  }

  /** Adds `(alpha / rank) · A @ B` into the table, then removes A and B. */
  mergeLora(): void {
    if (this.lora == null) return;
    mergeFloatLora(this, this.lora, null, this.where());
    this.lora = null;
  }

  /** The table with LoRA's update merged in (what Keras saves), as a new tensor. */
  mergedKernel(): tf.Tensor {
    return loraMergedFloat(this.lora, null, this.embeddings, this.where());
  }

  /** The weights Keras saves in place of this layer's own while LoRA is on: the merged table. */
  mergedWeights(): Map<LayerVariable, tf.Tensor> {
    return loraSavedWeights(this.lora, null, this.embeddings, undefined, undefined, this.where());
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    const lora = this.lora;
    if (lora == null) return super.call(inputs, kwargs);
    return tf.tidy(() => {
      const ids = Array.isArray(inputs) ? inputs[0] : inputs;
      const rows = super.call(inputs, kwargs) as tf.Tensor;
      return tf.add(rows, tf.reshape(loraRows(ids, lora), rows.shape));
    });
  }
}
