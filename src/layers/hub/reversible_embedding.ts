import * as tf from '@tensorflow/tfjs-core';
import {layers, LayerVariable, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {embeddingLookup, idsAsInt32} from '../../kernels/embedding_lookup';
import {weightProduct} from '../../kernels/matmul';
import {
  getInitializer,
  Initializer,
  InitializerIdentifier,
  serializeObject,
} from '../engine/config_objects';
import {formatShape, Shape, singleShape} from '../engine/shapes';
import {positiveNumber, refuseUnknownOptions} from './layer_options';
import {defineContract, impliedProduct, LayerContract, MASK_ZERO} from '../engine/contract';
import {alwaysPositionWise} from '../engine/decoding_checks';
import {HUB_NEEDS_KERAS3} from './hub_contract';
import {int8Dense} from '../../ops/int8';
import {
  AddWeight,
  int4BlockSizeOf,
  Int4Weight,
  Int8Layer,
  int8Lookup,
  Int8Weight,
  QuantizationMode,
  quantizationModeOf,
} from '../core/quantization';
import {
  addLoraWeights,
  LoraLayer,
  loraMergedFloat,
  LoraOptions,
  loraRows,
  loraSavedWeights,
  loraTransposedOutput,
  LoraWeights,
  mergeFloatLora,
  removeLoraWeights,
} from '../core/lora';
import {
  addInt4Tables,
  addInt8Tables,
  int4Call,
  int4ReverseLayout,
  int4TableLayout,
} from './reversible_embedding_quantized';

/** Options of {@link ReversibleEmbedding}. */
export interface ReversibleEmbeddingArgs extends LayerArgs {
  /** Vocabulary size `V`. */
  inputDim: number;
  /** Embedding width `D`. */
  outputDim: number;
  /** Reverse with the embeddings' transpose (true) or a separate `reverse_embeddings [D, V]`. */
  tieWeights?: boolean;
  /** Default randomUniform (Keras' `uniform`). */
  embeddingsInitializer?: InitializerIdentifier;
  /** Treat id 0 as padding: the output carries the Keras mask `ids != 0`. Default false. */
  maskZero?: boolean;
  /** Reverse logits become `tanh(logits / cap) * cap`. Default none. */
  logitSoftCap?: number | null;
  /** `'int8'` / `'int4'`: Keras 3's int8 / int4 form (see the class). Default null (float). */
  quantizationMode?: QuantizationMode | null;
  /** int4 only: values per group along the hidden axis (default 128), or -1 (per channel). */
  int4BlockSize?: number;
  /**
   * int4 only: whether the reverse call quantizes its hidden states to int8 first (abs-max per
   * token), as Keras' int4 ReversibleEmbedding does when built without a quantization config
   * (loaded from a file: keras-hub's int4 presets), not right after `quantize("int4")`. Default
   * true.
   */
  int4ReverseInputQuantization?: boolean;
}

const KNOWN = [
  'inputDim',
  'outputDim',
  'tieWeights',
  'embeddingsInitializer',
  'maskZero',
  'logitSoftCap',
  'reverseDtype',
  'quantizationMode',
  'int4BlockSize',
  'int4ReverseInputQuantization',
];

/**
 * keras-hub's `ReversibleEmbedding`: an embedding whose reverse call projects hidden states back
 * to the vocabulary, for tied input / output embeddings of language models.
 *
 * - Forward: int32 ids `[...]` -> `[..., D]`, rows of `embeddings [V, D]`. Float32 ids holding
 *   whole numbers go forward with `{reverse: false}` in eager calls (cast to int32, as Keras does).
 * - Reverse (`{reverse: true}`, or any float input): `[..., D]` -> logits `[..., V]`,
 *   `x · embeddingsᵀ` (tied) or `x · reverse_embeddings` (untied), soft-capped if asked.
 *   In functional models (where tfjs replays no call options) a float input means reverse.
 * - Weights: `embeddings`, and `reverse_embeddings` when untied (keras-hub's names and order).
 * - int8 (`quantizationMode: 'int8'`, what `quantize(model, 'int8')` gives; Keras 3.15's
 *   `keras.layers.ReversibleEmbedding` int8 form): `embeddings` holds int8 values (in [-127,
 *   127]) as bytes (dtype `bool`, one byte per value, `ops/int8.ts`) and `embeddingsScale` (weight `embeddings_scale`,
 *   `[inputDim]`) one scale per row; untied, also `reverse_embeddings` (int8 values) and
 *   `reverseEmbeddingsScale` (`reverse_embeddings_scale`, `[inputDim]`, per output column).
 *   Forward: `row / scale`. Reverse: each hidden state is quantized (abs-max per token, round half
 *   to even, clip ±127), multiplied by the int8 table exactly and divided by (input scale ·
 *   table scale). Read them with `layer.embeddings.read()` and `layer.embeddingsScale.read()`.
 * - int4 (`quantizationMode: 'int4'`; Keras 3.15's int4 form, weight-only): `embeddings` holds
 *   int4 values two to a byte along the hidden axis (`[inputDim, ceil(outputDim / 2)]`); grouped
 *   (`int4BlockSize` > 0) with `embeddings_scale` and int8 `embeddings_zero` `[inputDim, groups]`
 *   and `g_idx` `[outputDim]`, a row `(q - zero) · scale`; per channel `embeddings_scale`
 *   `[inputDim]`, a row `q / scale`. Untied, `reverse_embeddings` packed along the hidden axis
 *   (`[ceil(outputDim / 2), inputDim]`), `reverse_embeddings_scale` and float32
 *   `reverse_embeddings_zero` `[groups, inputDim]` (per channel: the scale `[inputDim]`). Reverse:
 *   the hidden states quantized to int8 per token (`int4ReverseInputQuantization`), multiplied by
 *   the dequantized table in float32 (per channel: by the int4 values, then divided by the
 *   table's scale) and divided by their scale (ops/int4_products.ts).
 * - LoRA ({@link ReversibleEmbedding.enableLora}, Keras' `Embedding.enable_lora`, which
 *   keras-hub's class inherits): `lora_embeddings_a` `[inputDim, rank]` and `lora_embeddings_b`
 *   `[rank, outputDim]` adapt the table. Forward, every form adds `(alpha / rank) · A[ids] @ B`
 *   to the rows. Reverse, as Keras: a float tied layer's logits use the updated table
 *   (`x · (embeddings + (alpha / rank) · A @ B)ᵀ`); an untied layer's `reverse_embeddings` and an
 *   int8 / int4 layer's quantized table (Keras reads `_embeddings`) take no update.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {ReversibleEmbedding} from 'tfjs-attention';
 *
 * const emb = new ReversibleEmbedding({inputDim: 100, outputDim: 32});
 * const ids = tf.tensor2d([[1, 2, 3]], [1, 3], 'int32');
 * const h = emb.apply(ids); // [1, 3, 32]
 * const logits = emb.apply(h, {reverse: true}); // [1, 3, 100]
 * ```
 */
export class ReversibleEmbedding extends layers.Layer implements Int8Layer, LoraLayer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'ReversibleEmbedding';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {
        pkg: 'keras_hub',
        keys: [
          'input_dim',
          'output_dim',
          'tie_weights',
          'embeddings_initializer',
          'mask_zero',
        ].concat(
          ['logit_soft_cap', 'embeddings_regularizer', 'embeddings_constraint'],
          ['activity_regularizer'],
        ),
      },
      keras2: {refused: HUB_NEEDS_KERAS3},
      // a float input is the reverse call here (tfjs replays no call options); Keras needs it said
      call: {
        kind: 'tensor',
        kerasKwargs: (d): Record<string, boolean> => (d[0] === 'int32' ? {} : {reverse: true}),
      },
    },
    configKeys: [
      'inputDim',
      'outputDim',
      'tieWeights',
      'embeddingsInitializer',
      'maskZero',
      'logitSoftCap',
      'quantizationMode',
      'int4BlockSize',
      'int4ReverseInputQuantization',
    ],
    weights: {
      implied: impliedProduct('inputDim', 'outputDim'),
    },
    // ids -> [..., D] or, reversed, [..., D] -> [..., V]: each position alone either way
    decoding: {
      kind: 'positionWise',
      check: alwaysPositionWise,
    },
    // the forward lookup of ids carries the mask; the reversed call (float input) does not
    makesKerasMask: (config, node) =>
      MASK_ZERO(config, node) && node.inputTensors[0].dtype !== 'float32',
    quantization: {kind: 'own'},
  });

  /** The `inputDim` option: the vocabulary size. */
  readonly inputDim: number;
  /** The `outputDim` option: the embedding width. */
  readonly outputDim: number;
  /** The `tieWeights` option. */
  readonly tieWeights: boolean;
  /** The `maskZero` option. */
  readonly maskZero: boolean;
  /** The `logitSoftCap` option (null: no cap). */
  readonly logitSoftCap: number | null;
  /** The initializer of the embedding table(s). */
  readonly embeddingsInitializer: Initializer;
  /** The embedding table `[inputDim, outputDim]`, created at build. */
  embeddings: LayerVariable | null = null;
  /** The separate output table `[outputDim, inputDim]` when `tieWeights` is false (null when tied). */
  reverseEmbeddings: LayerVariable | null = null;
  /** `'int8'` (Keras' int8 form) or null (float); set before build. */
  quantizationMode: QuantizationMode | null;
  /** The per-row scale of the int8 `embeddings` `[inputDim]`, at build when int8. */
  embeddingsScale: LayerVariable | null = null;
  /** The per-column scale of the int8 `reverse_embeddings` `[inputDim]` (untied, int8). */
  reverseEmbeddingsScale: LayerVariable | null = null;
  /** int4: values per group along the hidden axis, or -1 (per channel). */
  int4BlockSize: number;
  /** int4: whether the reverse call quantizes its hidden states first. */
  int4ReverseInputQuantization: boolean;
  /** int4 grouped: the table's zero points `[inputDim, groups]` (int8 bytes). */
  embeddingsZero: LayerVariable | null = null;
  /** int4 grouped: the group of each hidden index `[outputDim]`. */
  gIdx: LayerVariable | null = null;
  /** int4 grouped, untied: the reverse table's zero points `[groups, inputDim]` (float32). */
  reverseEmbeddingsZero: LayerVariable | null = null;
  /** LoRA's weights while enabled ({@link ReversibleEmbedding.enableLora}), else null. */
  lora: LoraWeights | null = null;

  constructor(args: ReversibleEmbeddingArgs) {
    super(args);
    const cls = 'ReversibleEmbedding';
    refuseUnknownOptions(args, KNOWN, cls);
    for (const key of ['inputDim', 'outputDim'] as const) {
      if (!(Number.isInteger(args?.[key]) && args[key] > 0)) {
        throw new Error(
          `${cls}: expected ${key} to be a positive integer, received ${JSON.stringify(args?.[key])}`,
        );
      }
    }
    this.inputDim = args.inputDim;
    this.outputDim = args.outputDim;
    this.tieWeights = args.tieWeights ?? true;
    this.maskZero = Boolean(args.maskZero ?? false);
    this.logitSoftCap =
      args.logitSoftCap == null ? null : positiveNumber(args.logitSoftCap, 'logitSoftCap', cls, 1);
    this.embeddingsInitializer = getInitializer(args.embeddingsInitializer, 'randomUniform');
    this.quantizationMode = quantizationModeOf(args.quantizationMode, cls);
    this.int4BlockSize = int4BlockSizeOf(args.int4BlockSize, cls);
    this.int4ReverseInputQuantization = args.int4ReverseInputQuantization ?? true;
    this.supportsMasking = true;
  }

  override build(): void {
    const mode = this.quantizationMode;
    if (mode != null) {
      const add: AddWeight = this.addWeight.bind(this);
      const [V, D, tied] = [this.inputDim, this.outputDim, this.tieWeights];
      const t =
        mode === 'int4'
          ? addInt4Tables(add, V, D, this.int4BlockSize, tied)
          : addInt8Tables(add, V, D, tied);
      [this.embeddings, this.embeddingsScale, this.embeddingsZero, this.gIdx] = [
        t.embeddings,
        t.embeddingsScale,
        t.embeddingsZero,
        t.gIdx,
      ];
      [this.reverseEmbeddings, this.reverseEmbeddingsScale, this.reverseEmbeddingsZero] = [
        t.reverseEmbeddings,
        t.reverseEmbeddingsScale,
        t.reverseEmbeddingsZero,
      ];
      this.built = true;
      return;
    }
    this.embeddings = this.addWeight(
      'embeddings',
      [this.inputDim, this.outputDim],
      'float32',
      this.embeddingsInitializer,
    );
    if (!this.tieWeights) {
      this.reverseEmbeddings = this.addWeight(
        'reverse_embeddings',
        [this.outputDim, this.inputDim],
        'float32',
        this.embeddingsInitializer,
      );
    }
    this.built = true;
  }

  /**
   * Reverse or forward: `reverse` when given, else a float input means reverse. Float ids go
   * forward only with an explicit `{reverse: false}` in an eager call (they are then cast); a
   * functional model replays no call options, so there a float input always means reverse.
   */
  private reverseOf(x: tf.Tensor | SymbolicTensor, kwargs: Kwargs = {}): boolean {
    const dtype = x.dtype as string | undefined;
    const float = dtype === undefined || dtype === 'float32';
    if (kwargs.reverse === true && !float) {
      throw new Error(
        `Layer '${this.name}': the reverse call takes float hidden states, received ${dtype}`,
      );
    }
    if (kwargs.reverse === false && float && x instanceof SymbolicTensor) {
      throw new Error(
        `Layer '${this.name}': the forward call of a functional model takes int32 ids, received ` +
          `${dtype}: tfjs replays no call options at predict time, where a float input means ` +
          'reverse; declare the ids input int32',
      );
    }
    return kwargs.reverse === true || (float && kwargs.reverse !== false);
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    const shape = singleShape(inputShape, this.name);
    // shapes carry no dtype: hidden states are [batch, T, D] (rank >= 3, last axis D); ids are
    // [batch, T]
    const reverse = shape.length >= 3 && shape[shape.length - 1] === this.outputDim;
    return reverse ? [...shape.slice(0, -1), this.inputDim] : [...shape, this.outputDim];
  }

  /**
   * Ids in, embeddings out; `{reverse: true}` (or a float input), hidden states in, logits out.
   * A tensor in gives a tensor, a symbolic tensor a symbolic tensor.
   */
  override apply(inputs: tf.Tensor, kwargs?: Kwargs): tf.Tensor;
  override apply(inputs: SymbolicTensor, kwargs?: Kwargs): SymbolicTensor;
  override apply(
    inputs: tf.Tensor | SymbolicTensor | Array<tf.Tensor | SymbolicTensor>,
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: tf.Tensor | SymbolicTensor | Array<tf.Tensor | SymbolicTensor>,
    kwargs: Kwargs = {},
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    const x = Array.isArray(inputs) ? inputs[0] : inputs;
    const reverse = this.reverseOf(x, kwargs);
    if (reverse && x.shape[x.shape.length - 1] !== this.outputDim) {
      throw new Error(
        `Layer '${this.name}': the reverse call expects hidden states [..., ${this.outputDim}], ` +
          `received ${formatShape(x.shape)}`,
      );
    }
    const rest = {...kwargs};
    delete rest.reverse;
    if (!reverse && x instanceof tf.Tensor && x.dtype !== 'int32') {
      // float ids, forward: cast as Keras' Embedding does (whole numbers only)
      const ids = idsAsInt32(x, `Layer '${this.name}'`);
      try {
        return super.apply(ids, rest);
      } finally {
        ids.dispose();
      }
    }
    return super.apply(inputs as tf.Tensor, rest);
  }

  override call(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const int4 = this.int4Weights();
      if (int4.length > 0) return this.int4Call(x, int4);
      const table = (this.embeddings as LayerVariable).read(); // [V, D]
      const scale = this.embeddingsScale?.read() ?? null; // [V] when int8
      if (x.dtype !== 'float32') {
        const rows = scale != null ? int8Lookup(table, scale, x) : embeddingLookup(table, x); // [..., D]
        return this.withLoraRows(rows, x);
      }
      const rows = tf.reshape(x, [-1, this.outputDim]); // [N, D]
      if (scale != null) {
        const int8Logits = this.tieWeights
          ? int8Dense(rows as tf.Tensor2D, table as tf.Tensor2D, scale as tf.Tensor1D, true)
          : int8Dense(
              rows as tf.Tensor2D,
              (this.reverseEmbeddings as LayerVariable).read() as tf.Tensor2D,
              (this.reverseEmbeddingsScale as LayerVariable).read() as tf.Tensor1D,
            );
        return this.softCap(tf.reshape(int8Logits, [...x.shape.slice(0, -1), this.inputDim]));
      }
      // tied: x · tableᵀ as a product with a transposed operand, never a transposed copy of the
      // table (which every decoding step would make again)
      let product = this.tieWeights
        ? weightProduct(rows, table, true)
        : weightProduct(rows, (this.reverseEmbeddings as LayerVariable).read()); // [N, V]
      // Keras' tied reverse call reads the table with LoRA's update: x · (table + ΔW)ᵀ
      if (this.lora != null && this.tieWeights) {
        product = tf.add(product, loraTransposedOutput(rows as tf.Tensor2D, this.lora));
      }
      return this.softCap(tf.reshape(product, [...x.shape.slice(0, -1), this.inputDim])); // [..., V]
    });
  }

  /** Keras' int4 call (reversible_embedding_quantized.ts), LoRA's rows forward, the soft cap reverse. */
  private int4Call(x: tf.Tensor, int4: Int4Weight[]): tf.Tensor {
    const [D, V] = [this.outputDim, this.inputDim];
    const out = int4Call(x, int4, D, V, this.int4ReverseInputQuantization);
    return x.dtype !== 'float32' ? this.withLoraRows(out, x) : this.softCap(out);
  }

  /** Forward rows plus LoRA's `(alpha / rank) · A[ids] @ B`, or the rows without LoRA. */
  private withLoraRows(rows: tf.Tensor, ids: tf.Tensor): tf.Tensor {
    return this.lora == null ? rows : tf.add(rows, loraRows(ids, this.lora));
  }

  private where(): string {
    return `ReversibleEmbedding '${this.name}'`;
  }

  /**
   * Keras' `enable_lora(rank, lora_alpha, a_initializer, b_initializer)` (Embedding's, which
   * keras-hub's ReversibleEmbedding inherits): adds float32 `lora_embeddings_a` `[inputDim, rank]`
   * (heUniform) and `lora_embeddings_b` `[rank, outputDim]` (zeros), both trainable, and freezes
   * the table (an untied `reverse_embeddings` keeps training). Forward rows then take
   * `(alpha / rank) · A[ids] @ B`; a float tied layer's logits use the updated table; an untied
   * or int8 / int4 layer's logits take no update (as in Keras). Refuses a layer not built or
   * already enabled.
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

  /** Removes LoRA's weights, leaving the table as it was (and training as it did before). */
  disableLora(): void {
    if (this.lora == null) return;
    removeLoraWeights(this, this.lora);
    this.lora = null;
  }

  /**
   * Adds `(alpha / rank) · A @ B` into a float table, then removes A and B; refused for an int8 /
   * int4 table (saving it merges the update as Keras does: {@link ReversibleEmbedding.mergedWeights}).
   */
  mergeLora(): void {
    if (this.lora == null) return;
    mergeFloatLora(this, this.lora, this.quantizationMode, this.where());
    this.lora = null;
  }

  /** The float table with LoRA's update merged in (what Keras saves), as a new tensor. */
  mergedKernel(): tf.Tensor {
    return loraMergedFloat(this.lora, this.quantizationMode, this.embeddings, this.where());
  }

  /**
   * The weights Keras saves in place of this layer's own while LoRA is on
   * (`_get_embeddings_with_merged_lora`), as new tensors: float, the table with the update
   * merged in; int8 / int4, the table dequantized, the update added and quantized again, with
   * its new scale (int4: and zero points). An untied `reverse_embeddings` is saved as it is.
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

  /** Its int4 weights (when int4): the table; untied, the reverse table (sharing its g_idx). */
  int4Weights(): Int4Weight[] {
    if (this.quantizationMode !== 'int4' || this.embeddings == null) return [];
    if (this.embeddingsScale == null) return [];
    const out: Int4Weight[] = [
      {
        packed: this.embeddings,
        scale: this.embeddingsScale,
        zero: this.embeddingsZero,
        gIdx: this.gIdx,
        layout: int4TableLayout(this.inputDim, this.outputDim, this.int4BlockSize),
      },
    ];
    if (this.reverseEmbeddings != null && this.reverseEmbeddingsScale != null) {
      out.push({
        packed: this.reverseEmbeddings,
        scale: this.reverseEmbeddingsScale,
        zero: this.reverseEmbeddingsZero,
        gIdx: this.gIdx,
        layout: int4ReverseLayout(this.inputDim, this.outputDim, this.int4BlockSize),
      });
    }
    return out;
  }

  private softCap(logits: tf.Tensor): tf.Tensor {
    const cap = this.logitSoftCap;
    return cap == null ? logits : tf.mul(tf.tanh(tf.div(logits, cap)), cap);
  }

  /** Its int8 weights (when int8): the table per row; untied, the reverse table per column. */
  int8Weights(): Int8Weight[] {
    const out: Int8Weight[] = [];
    if (this.quantizationMode !== 'int8') return out;
    if (this.embeddings != null && this.embeddingsScale != null) {
      out.push({values: this.embeddings, scale: this.embeddingsScale, axes: [1]});
    }
    if (this.reverseEmbeddings != null && this.reverseEmbeddingsScale != null) {
      out.push({values: this.reverseEmbeddings, scale: this.reverseEmbeddingsScale, axes: [0]});
    }
    return out;
  }

  override computeMask(inputs: tf.Tensor | tf.Tensor[]): tf.Tensor {
    const x = Array.isArray(inputs) ? inputs[0] : inputs;
    if (!this.maskZero || x.dtype === 'float32') return null as unknown as tf.Tensor;
    return tf.notEqual(x, 0);
  }

  override getConfig(): tf.serialization.ConfigDict {
    const config: tf.serialization.ConfigDict = {
      ...super.getConfig(),
      inputDim: this.inputDim,
      outputDim: this.outputDim,
      tieWeights: this.tieWeights,
      embeddingsInitializer: serializeObject(this.embeddingsInitializer),
      maskZero: this.maskZero,
    };
    if (this.logitSoftCap != null) config.logitSoftCap = this.logitSoftCap;
    if (this.quantizationMode != null) config.quantizationMode = this.quantizationMode;
    if (this.quantizationMode === 'int4') {
      config.int4BlockSize = this.int4BlockSize;
      config.int4ReverseInputQuantization = this.int4ReverseInputQuantization;
    }
    return config;
  }
}
