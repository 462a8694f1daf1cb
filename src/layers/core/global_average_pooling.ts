/**
 * `GlobalAveragePooling1D` as Keras 3 computes it: with a Keras mask (an `Embedding` with
 * `maskZero`, keras-hub's `TokenAndPositionEmbedding`, a layer passing one on), the average over
 * the unmasked positions only. tfjs 4.22's class of the same name takes the plain mean and ignores
 * the mask, so a Keras text classifier predicted padded rows wrong; this class is registered
 * under that name (`layers/register.ts`), so loaded models use it, and is exported for models
 * built in code.
 */
import * as tf from '@tensorflow/tfjs-core';
import {InputSpec, layers} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {formatShape, Shape, singleShape} from '../engine/shapes';

/** The options of {@link GlobalAveragePooling1D}: tfjs' layer options and Keras 3's two of its own. */
export interface GlobalAveragePooling1DArgs extends LayerArgs {
  /**
   * `'channelsLast'` (default: `[batch, steps, features]`) or `'channelsFirst'` (`[batch,
   * features, steps]`); Keras' `data_format`.
   */
  dataFormat?: 'channelsLast' | 'channelsFirst';
  /** Keep the pooled axis as 1 (Keras' `keepdims`). Default false. */
  keepdims?: boolean;
}

/**
 * Keras 3's `GlobalAveragePooling1D`: the mean over the steps axis; with a mask `[batch, steps]`,
 * `sum(where(mask, x, 0)) / count(mask)` per row (a row with no unmasked step gives NaN, as in
 * Keras). The output carries no mask.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {GlobalAveragePooling1D} from 'tfjs-attention';
 *
 * const ids = tf.input({shape: [4], dtype: 'int32'});
 * const x = tf.layers.embedding({inputDim: 10, outputDim: 3, maskZero: true}).apply(ids);
 * const pooled = new GlobalAveragePooling1D().apply(x) as tf.SymbolicTensor;
 * const model = tf.model({inputs: ids, outputs: pooled});
 * // the mean over ids 4 and 7 only
 * model.predict(tf.tensor2d([[4, 7, 0, 0]], [1, 4], 'int32'));
 * ```
 */
export class GlobalAveragePooling1D extends layers.Layer {
  /**
   * The name of tfjs' class, which this one replaces in deserialization.
   * @nocollapse
   */
  static readonly className = 'GlobalAveragePooling1D';
  /** The `dataFormat` option. */
  readonly dataFormat: 'channelsLast' | 'channelsFirst';
  /** The `keepdims` option. */
  readonly keepdims: boolean;

  constructor(args: GlobalAveragePooling1DArgs = {}) {
    super(args);
    // Keras' snake_case value, or tfjs' camelCase of it
    const format = String(args.dataFormat ?? 'channelsLast').replace(/_l|_f/g, (s) =>
      s[1].toUpperCase(),
    );
    if (format !== 'channelsLast' && format !== 'channelsFirst') {
      throw new Error(
        `GlobalAveragePooling1D: expected dataFormat 'channelsLast' or 'channelsFirst', ` +
          `received ${JSON.stringify(args.dataFormat)}`,
      );
    }
    this.dataFormat = format;
    this.keepdims = Boolean(args.keepdims ?? false);
    this.inputSpec = [new InputSpec({ndim: 3})];
    this.supportsMasking = true;
  }

  private get stepsAxis(): number {
    return this.dataFormat === 'channelsLast' ? 1 : 2;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    const shape = singleShape(inputShape, this.name);
    const axis = this.stepsAxis;
    return this.keepdims
      ? shape.map((d, i) => (i === axis ? 1 : d))
      : shape.filter((_, i) => i !== axis);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor {
    const x = Array.isArray(inputs) ? inputs[0] : inputs;
    const given = kwargs?.mask as tf.Tensor | Array<tf.Tensor | null> | null | undefined;
    const mask = Array.isArray(given) ? (given[0] ?? null) : (given ?? null);
    const axis = this.stepsAxis;
    if (mask == null) return tf.tidy(() => tf.mean(x, axis, this.keepdims));
    const [batch, steps] = [x.shape[0], x.shape[axis]];
    if (mask.rank !== 2 || mask.shape[0] !== batch || mask.shape[1] !== steps) {
      throw new Error(
        `Layer '${this.name}' (GlobalAveragePooling1D): expected a mask of shape [${batch}, ` +
          `${steps}] ([batch, steps]) for the input ${formatShape(x.shape)}, received ` +
          `${formatShape(mask.shape)}`,
      );
    }
    return tf.tidy(() => {
      // Keras: where(mask, x, 0) summed over the steps, divided by the number of unmasked steps
      const m = tf.expandDims(tf.cast(mask, 'bool'), this.dataFormat === 'channelsLast' ? 2 : 1);
      const kept = tf.where(tf.broadcastTo(m, x.shape), x, tf.zerosLike(x));
      const count = tf.sum(tf.cast(m, x.dtype), axis, this.keepdims);
      return tf.div(tf.sum(kept, axis, this.keepdims), count);
    });
  }

  /** The output carries no mask (Keras' `compute_mask` returns None). */
  override computeMask(): tf.Tensor {
    return null as unknown as tf.Tensor;
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {...super.getConfig()};
    // written when set, so a default layer's config stays tfjs' own
    if (this.dataFormat !== 'channelsLast') config.dataFormat = this.dataFormat;
    if (this.keepdims) config.keepdims = true;
    return config;
  }
}
