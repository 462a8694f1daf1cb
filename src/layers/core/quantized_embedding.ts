import * as tf from '@tensorflow/tfjs-core';
import {initializers, layers, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {idsAsInt32} from '../../kernels/embedding_lookup';
import {INT8_DTYPE} from '../../ops/int8';
import {checkConstructorArgs} from '../engine/constructor_args';
import {defineContract, LayerContract, MASK_ZERO} from '../engine/contract';
import {alwaysPositionWise} from '../engine/decoding_checks';
import {Shape, singleShape} from '../engine/shapes';
import type {Int4Layout} from '../../ops/int4';
import {int4Lookup} from '../../ops/int4_products';
import {
  addInt4Table,
  int4BlockSizeOf,
  int4TensorsOf,
  Int4Weight,
  Int8Layer,
  int8Lookup,
  Int8Weight,
  QuantizationMode,
  quantizationModeOf,
} from './quantization';
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

/** Options of {@link QuantizedEmbedding}. */
export interface QuantizedEmbeddingArgs extends LayerArgs {
  /** Vocabulary size. */
  inputDim: number;
  /** Width of each row. */
  outputDim: number;
  /** Whether the id 0 is padding (a Keras mask). Default false. */
  maskZero?: boolean;
  /** `'int8'` (default) or `'int4'` (Keras' `quantize("int4")`, see the class). */
  quantizationMode?: 'int8' | 'int4';
  /** int4 only: values per group along the row (default 128), or -1 (per row, symmetric). */
  int4BlockSize?: number;
}

/** tfjs `Embedding` config keys kept when `quantize` turns an `Embedding` into this class. */
const KEPT = [
  'name',
  'trainable',
  'inputDim',
  'outputDim',
  'maskZero',
  'batchInputShape',
  'dtype',
  'inputLength',
];

/**
 * Keras 3's `Embedding` in its int8 form (`model.quantize("int8")`): what `quantize(model,
 * 'int8')` puts in place of a tfjs `Embedding`, and what a Keras 3 int8 `Embedding` loads as
 * (Keras sees it as `Embedding` with a `QuantizedDTypePolicy`).
 *
 * `y = embeddings[id] / embeddingsScale[id]`, as Keras' `_int8_call` does.
 *
 * Weights, in Keras' order:
 * - `embeddings` `[inputDim, outputDim]`: the int8 values in [-127, 127], held as bytes (a
 *   tensor of dtype `bool`, one byte per value, `ops/int8.ts`; read them with
 *   `int8ValuesOf(layer.embeddings.read())`); not trainable.
 * - `embeddings_scale` `[inputDim]` float32, one per row: `float row ≈ row / scale`
 *   (`layer.embeddingsScale.read()`); not trainable.
 *
 * LoRA ({@link QuantizedEmbedding.enableLora}, Keras' `enable_lora` on an int8 / int4
 * Embedding): float32 `lora_embeddings_a` `[inputDim, rank]` and `lora_embeddings_b`
 * `[rank, outputDim]`, and `(alpha / rank) · A[ids] @ B` added to the dequantized rows.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {quantize} from 'tfjs-attention';
 *
 * const ids = tf.input({shape: [5], dtype: 'int32'});
 * const rows = tf.layers.embedding({inputDim: 50, outputDim: 8}).apply(ids) as tf.SymbolicTensor;
 * const int8 = quantize(tf.model({inputs: ids, outputs: rows}), 'int8'); // a QuantizedEmbedding
 * const y = int8.predict(tf.zeros([1, 5], 'int32')) as tf.Tensor; // [1, 5, 8]
 * ```
 */
export class QuantizedEmbedding extends layers.Layer implements Int8Layer, LoraLayer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'QuantizedEmbedding';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pathPrefix: 'embedding', // Keras' class is Embedding
        keys: [
          'input_dim',
          'output_dim',
          'embeddings_initializer',
          'embeddings_regularizer',
          'activity_regularizer',
          'embeddings_constraint',
          'mask_zero',
          'input_length',
          'quantization_config',
          'lora_rank',
          'lora_alpha',
          'weights',
        ],
      },
      keras2: {refused: 'tf-keras 2 has no int8 Embedding; export the float model'},
      call: {kind: 'tensor'},
    },
    configKeys: ['inputDim', 'outputDim', 'maskZero', 'quantizationMode', 'int4BlockSize'],
    weights: {
      implied: (c) => ({
        values: (Number(c.inputDim) || 1) * (Number(c.outputDim) || 1),
        option: 'inputDim',
      }),
    },
    decoding: {
      kind: 'positionWise',
      check: alwaysPositionWise,
    },
    makesKerasMask: MASK_ZERO,
    quantization: {
      kind: 'replaces',
      className: 'Embedding',
      fromFloat: (config) => {
        const out: tf.serialization.ConfigDict = {};
        for (const k of KEPT) if (config[k] !== undefined) out[k] = config[k];
        return out;
      },
    },
  });

  /** Vocabulary size. */
  readonly inputDim: number;
  /** Row width. */
  readonly outputDim: number;
  /** Whether the id 0 is padding. */
  readonly maskZero: boolean;
  /** `'int8'` or `'int4'`. */
  quantizationMode: QuantizationMode | null;
  /** int4: values per group along a row, or -1 (per row). */
  int4BlockSize: number;
  /** int4 grouped: the zero point per row and group `[inputDim, groups]` (int8 bytes). */
  embeddingsZero: LayerVariable | null = null;
  /** int4 grouped: the group of each column `[outputDim]`. */
  gIdx: LayerVariable | null = null;
  /** The int8 table `[inputDim, outputDim]` (int8 values held as bytes), at build. */
  embeddings: LayerVariable | null = null;
  /** The per-row scale `[inputDim]` (`float row ≈ row / scale`), at build. */
  embeddingsScale: LayerVariable | null = null;
  /** LoRA's weights while enabled ({@link QuantizedEmbedding.enableLora}), else null. */
  lora: LoraWeights | null = null;

  constructor(args: QuantizedEmbeddingArgs) {
    checkConstructorArgs('QuantizedEmbedding', args);
    super(args);
    for (const key of ['inputDim', 'outputDim'] as const) {
      const v = args?.[key];
      if (!Number.isInteger(v) || (v as number) <= 0) {
        throw new Error(
          `QuantizedEmbedding: expected ${key} to be a positive integer, received ${JSON.stringify(v)}`,
        );
      }
    }
    this.inputDim = args.inputDim;
    this.outputDim = args.outputDim;
    this.maskZero = args.maskZero ?? false;
    this.supportsMasking = true;
    this.quantizationMode = quantizationModeOf(
      args.quantizationMode ?? 'int8',
      'QuantizedEmbedding',
    );
    this.int4BlockSize = int4BlockSizeOf(args.int4BlockSize, 'QuantizedEmbedding');
  }

  /** Keras' int4 table `[inputDim, outputDim]`: packed and grouped along the row. */
  private int4Layout(): Int4Layout {
    return {
      rows: this.inputDim,
      cols: this.outputDim,
      packAxis: 1,
      groupAxis: 1,
      blockSize: this.int4BlockSize,
    };
  }

  override build(): void {
    if (this.quantizationMode === 'int4') {
      // Keras' int4 variables, in its order: embeddings, embeddings_scale, embeddings_zero, g_idx
      const t = addInt4Table(this.addWeight.bind(this), this.int4Layout());
      [this.embeddings, this.embeddingsScale, this.embeddingsZero, this.gIdx] = [
        t.embeddings,
        t.scale,
        t.zero,
        t.gIdx,
      ];
      this.built = true;
      return;
    }
    this.embeddings = this.addWeight(
      'embeddings',
      [this.inputDim, this.outputDim],
      INT8_DTYPE,
      initializers.zeros(),
      undefined,
      false,
    );
    this.embeddingsScale = this.addWeight(
      'embeddings_scale',
      [this.inputDim],
      'float32',
      initializers.ones(),
      undefined,
      false,
    );
    this.built = true;
  }

  /** Its int8 weight: the table, scaled per row (abs-max over axis 1). */
  int8Weights(): Int8Weight[] {
    if (this.quantizationMode !== 'int8' || this.embeddings == null) return [];
    if (this.embeddingsScale == null) return [];
    return [{values: this.embeddings, scale: this.embeddingsScale, axes: [1]}];
  }

  /** Its int4 weight (when int4): the table, grouped along each row or per row. */
  int4Weights(): Int4Weight[] {
    if (this.quantizationMode !== 'int4' || this.embeddings == null) return [];
    if (this.embeddingsScale == null) return [];
    return [
      {
        packed: this.embeddings,
        scale: this.embeddingsScale,
        zero: this.embeddingsZero,
        gIdx: this.gIdx,
        layout: this.int4Layout(),
      },
    ];
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return [...singleShape(inputShape, this.name), this.outputDim];
  }

  private where(): string {
    return `QuantizedEmbedding '${this.name}'`;
  }

  /**
   * Keras' `enable_lora(rank, lora_alpha, a_initializer, b_initializer)` on an int8 / int4
   * Embedding: adds float32 `lora_embeddings_a` `[inputDim, rank]` (heUniform) and
   * `lora_embeddings_b` `[rank, outputDim]` (zeros), both trainable; the call then adds
   * `(alpha / rank) · A[ids] @ B` to the dequantized rows. Refuses a layer not built or already
   * enabled.
   *
   * Args:
   * - `rank`: the rank of A and B (a positive integer).
   * - `options.alpha`: the scale's numerator; default the rank.
   * - `options.aInitializer` / `options.bInitializer`: default `heUniform` / `zeros`.
   */
  enableLora(rank: number, options?: LoraOptions): void {
    const shape = this.embeddings != null ? [this.inputDim, this.outputDim] : null;
    this.lora = addLoraWeights(
      this,
      this.addWeight.bind(this),
      this.embeddings,
      shape,
      rank,
      options,
      false,
      'embeddings',
    );
  }

  /** Removes LoRA's weights, leaving the quantized table as it was. */
  disableLora(): void {
    if (this.lora == null) return;
    removeLoraWeights(this, this.lora);
    this.lora = null;
  }

  /**
   * Refused (the table is quantized): saving the layer merges the update as Keras does
   * ({@link QuantizedEmbedding.mergedWeights}); {@link QuantizedEmbedding.disableLora} removes
   * A and B.
   */
  mergeLora(): void {
    if (this.lora == null) return;
    mergeFloatLora(this, this.lora, this.quantizationMode, this.where());
  }

  /** Refused: the table is quantized (see {@link QuantizedEmbedding.mergedWeights}). */
  mergedKernel(): tf.Tensor {
    return loraMergedFloat(this.lora, this.quantizationMode, this.embeddings, this.where());
  }

  /**
   * The weights Keras saves in place of this layer's own while LoRA is on
   * (`_get_embeddings_with_merged_lora`), as new tensors: the table dequantized, the update
   * added and quantized again per row as Keras quantizes it, with its new scale (int4: and zero
   * points).
   */
  mergedWeights(): Map<LayerVariable, tf.Tensor> {
    return loraSavedWeights(
      this.lora,
      this.quantizationMode,
      this.embeddings,
      this.int8Weights()[0],
      this.int4Weights()[0],
      this.where(),
    );
  }

  /** A tensor in, a tensor out; a symbolic tensor in (functional model), a symbolic tensor out. */
  override apply(inputs: tf.Tensor, kwargs?: Kwargs): tf.Tensor;
  override apply(inputs: SymbolicTensor, kwargs?: Kwargs): SymbolicTensor;
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    return super.apply(inputs, kwargs);
  }

  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      if (this.embeddings == null || this.embeddingsScale == null) {
        throw new Error(
          `QuantizedEmbedding '${this.name}' is not built yet: apply it to an input first`,
        );
      }
      const ids = idsAsInt32(x, `Layer '${this.name}'`);
      const int4 = this.int4Weights()[0];
      const rows =
        int4 != null
          ? int4Lookup(int4TensorsOf(int4), int4.layout, ids)
          : int8Lookup(this.embeddings.read(), this.embeddingsScale.read(), ids);
      // Keras' int8 / int4 call: LoRA's rows added to the dequantized ones
      return this.lora != null ? tf.add(rows, loraRows(ids, this.lora)) : rows;
    });
  }

  override computeMask(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    const x = Array.isArray(inputs) ? inputs[0] : inputs;
    if (!this.maskZero) return null as unknown as tf.Tensor;
    return tf.notEqual(x, 0);
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {
      ...super.getConfig(),
      inputDim: this.inputDim,
      outputDim: this.outputDim,
      maskZero: this.maskZero,
      ...(this.quantizationMode === 'int4'
        ? {quantizationMode: 'int4', int4BlockSize: this.int4BlockSize}
        : {}),
    };
  }
}
