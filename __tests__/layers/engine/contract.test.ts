/**
 * Layer contracts (src/layers/engine/contract.ts): a layer class defined here, outside the
 * package, opts into cached decoding, the Keras loader's option check, the size guard and the
 * Keras 3 export by declaring `static readonly contract` — without touching the package. And
 * every class the package registers declares its own contract, which the package's readers use.
 */
import * as tf from '@tensorflow/tfjs';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {
  cachedDecodingRefusal,
  contractOf,
  convertKerasArtifacts,
  defineContract,
  generate,
  toKeras3Artifacts,
  toKerasArtifacts,
} from '../../../src';
import type {CachedDecoding, ContractSpec, LayerContract} from '../../../src';
import * as src from '../../../src';
import {FAMILY_LAYER_CLASSES} from '../../../src/hub_models/register_layers';
import {camelConfig, savedKey} from '../../../src/layers/engine/contract';
import {LAYER_CLASSES as GENERIC_LAYER_CLASSES} from '../../../src/layers/register';
import {LAYER_CASES} from '../../helpers/layer_harness';

/** The package's layer classes: the generic ones and the built-in families' own. */
const LAYER_CLASSES = [...GENERIC_LAYER_CLASSES, ...FAMILY_LAYER_CLASSES];

/**
 * A user's layer: the running mean over the sequence, `y[t] = mean(x[0..t])` (causal). With a
 * cache `[batch, maxLength, features]` of the inputs so far, a call on positions
 * `index .. index + t - 1` returns `[y, cache]`, as the package's cached attention layers do.
 */
class RunningMean extends tf.layers.Layer {
  static readonly className: string = 'UserRunningMean';
  // the parts with defaults (Keras-only keys, refused configs, weight folders, Keras masks) left out
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {pkg: 'my_layers', keys: ['scale']},
      keras2: {refused: 'tf-keras 2 has no such layer (a test layer)'},
      call: {kind: 'tensor'},
    },
    configKeys: ['scale'],
    weights: {implied: (c) => ({values: Number(c.scale ?? 0), option: 'scale'})},
    decoding: {
      kind: 'cached',
      refuse: (_c, node) => (node.inputTensors[0].rank === 3 ? null : 'not [batch, T, features]'),
      cacheShape: (_c, input, batch, maxLength) => [batch, maxLength, input[2] as number],
      cacheKwargs: (cache, index) => ({cache, cacheIndex: index}),
      readsKerasMasks: false,
      paddingMaskRole: null,
    },
  });
  readonly scale: number;
  calls = 0;
  cachedCalls = 0;

  constructor(args: {scale?: number; name?: string} = {}) {
    super(args);
    this.scale = args.scale ?? 1;
  }

  override call(inputs: tf.Tensor | tf.Tensor[], kwargs: Kwargs): tf.Tensor | tf.Tensor[] {
    const x = (Array.isArray(inputs) ? inputs[0] : inputs) as tf.Tensor3D; // [B, t, D]
    this.calls += 1;
    const cache = kwargs.cache as tf.Tensor3D | undefined;
    return tf.tidy(() => {
      const [B, t, D] = x.shape;
      if (cache == null) {
        const pos = tf.range(1, t + 1).reshape([1, t, 1]);
        return tf.cumsum(x, 1).div(pos).mul(this.scale);
      }
      this.cachedCalls += 1;
      const index = kwargs.cacheIndex as number;
      const M = cache.shape[1];
      const updated = tf.concat(
        [
          tf.slice(cache, [0, 0, 0], [B, index, D]),
          x,
          tf.slice(cache, [0, index + t, 0], [B, M - index - t, D]),
        ],
        1,
      ); // [B, maxLength, D]
      const pos = tf.range(index + 1, index + t + 1).reshape([1, t, 1]);
      const y = tf.slice(tf.cumsum(updated, 1), [0, index, 0], [B, t, D]).div(pos);
      return [y.mul(this.scale), updated];
    });
  }

  override computeOutputShape(shape: tf.Shape | tf.Shape[]): tf.Shape | tf.Shape[] {
    return shape;
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...super.getConfig(), scale: this.scale};
  }
}
tf.serialization.registerClass(RunningMean);

/** The same layer without a contract of its own (a subclass does not take its parent's). */
class NoContract extends RunningMean {
  static override readonly className = 'UserRunningMeanNoContract';
}
tf.serialization.registerClass(NoContract);

const V = 11;
const D = 8;

function lm(mean: tf.layers.Layer): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const e = tf.layers
    .embedding({
      inputDim: V,
      outputDim: D,
      embeddingsInitializer: tf.initializers.randomNormal({seed: 1}),
    })
    .apply(ids) as tf.SymbolicTensor;
  const h = mean.apply(e) as tf.SymbolicTensor;
  const logits = tf.layers
    .dense({units: V, kernelInitializer: tf.initializers.randomNormal({seed: 2})})
    .apply(h) as tf.SymbolicTensor;
  return tf.model({inputs: ids, outputs: logits});
}

async function saved(model: tf.LayersModel): Promise<tf.io.ModelArtifacts> {
  let out: tf.io.ModelArtifacts | null = null;
  await model.save(
    tf.io.withSaveHandler(async (a) => {
      out = a;
      return {modelArtifactsInfo: {dateSaved: new Date(), modelTopologyType: 'JSON'}};
    }),
  );
  return out as unknown as tf.io.ModelArtifacts;
}

describe('a user-defined layer with a contract', () => {
  it('decodes with its cache: the tokens of recomputing, the cache really used', async () => {
    const mean = new RunningMean({scale: 1.5});
    const model = lm(mean);
    expect(cachedDecodingRefusal(model)).toBeNull();
    const prompts = [
      [3, 1, 4, 0, 0, 0],
      [2, 7, 1, 8, 2, 0],
    ];
    const opts = {maxLength: 10, promptLengths: [3, 5]};
    const before = tf.memory().numTensors;
    const cached = await generate(model, prompts, {...opts, useCache: true});
    const cachedCalls = mean.cachedCalls;
    const plain = await generate(model, prompts, {...opts, useCache: false});
    const [a, b] = [await cached.array(), await plain.array()];
    tf.dispose([cached, plain]);
    expect(tf.memory().numTensors).toBe(before);
    expect(a).toEqual(b);
    expect(cachedCalls).toBeGreaterThan(3); // prefill, then one call per new position
    model.dispose();
  });

  it('is refused for the cache by a subclass that does not declare its own', () => {
    const model = lm(new NoContract());
    expect(contractOf('UserRunningMeanNoContract')).toBeNull();
    expect(cachedDecodingRefusal(model)).toMatch(
      /\(UserRunningMeanNoContract\): not known to compute each position alone/,
    );
    model.dispose();
  });

  it('exports to Keras 3 under its package, and is refused for tf-keras 2 with its message', async () => {
    const model = lm(new RunningMean({scale: 2, name: 'mean'}));
    const a = await saved(model);
    const k3 = await toKeras3Artifacts(a);
    const layers = (k3.modelTopology as {config: {layers: Array<Record<string, unknown>>}}).config
      .layers;
    const mine = layers.find((l) => l.name === 'mean') as Record<string, unknown>;
    expect(mine.module).toBe('my_layers');
    expect(mine.registered_name).toBe('my_layers>UserRunningMean');
    expect(mine.config).toEqual({name: 'mean', trainable: true, scale: 2});
    expect(() => toKerasArtifacts(a)).toThrow(
      "layer 'mean' is a UserRunningMean, which tf-keras 2 has no such layer (a test layer)",
    );
    model.dispose();
  });

  it('has its Keras options checked by the loader and its implied size by the guard', async () => {
    const model = lm(new RunningMean({scale: 2, name: 'mean'}));
    const a = await saved(model);
    const topology = a.modelTopology as {
      config: {layers: Array<{name: string; config: Record<string, unknown>}>};
    };
    const layer = topology.config.layers.find((l) => l.name === 'mean') as {
      config: Record<string, unknown>;
    };
    layer.config.window = 3;
    await expect(convertKerasArtifacts(a)).rejects.toThrow(
      "layer 'mean' (UserRunningMean) has the option 'window' = 3, which this package does not implement",
    );
    delete layer.config.window;
    layer.config.scale = 1e9; // implies 1e9 weight values (the contract says so)
    await expect(convertKerasArtifacts(a)).rejects.toThrow(
      /layer 'mean' \(UserRunningMean\) implies at least 1000000000 weight values \(scale = 1000000000\)/,
    );
    model.dispose();
  });
});

describe("the package's contracts", () => {
  it('every registered class declares its own contract, found by its serialized name', () => {
    const names = LAYER_CLASSES.map((c) => c.className);
    expect(names).toEqual([
      'MultiHeadAttention',
      'CachedMultiHeadAttention',
      'GroupQueryAttention',
      'DotProductAttention',
      'Attention',
      'AdditiveAttention',
      'EinsumDense',
      'TokenAndPositionEmbedding',
      'PositionEmbedding',
      'SinePositionEncoding',
      'RotaryEmbedding',
      'ReversibleEmbedding',
      'TransformerEncoder',
      'TransformerDecoder',
      'GetItem',
      'QuantizedDense',
      'QuantizedEmbedding',
      'LlamaLayerNorm',
      'LlamaAttention',
      'LlamaTransformerDecoder',
      'QwenLayerNorm',
      'QwenAttention',
      'QwenTransformerDecoder',
      'Qwen3LayerNorm',
      'Qwen3Attention',
      'Qwen3TransformerDecoder',
      'MistralLayerNormalization',
      'CachedMistralAttention',
      'MistralTransformerDecoder',
      'RMSNormalization',
      'SmolLM3RotaryEmbedding',
      'SmolLM3Attention',
      'SmolLM3DecoderLayer',
      'Gemma3RMSNormalization',
      'CachedGemma3Attention',
      'Gemma3DecoderBlock',
      'Gemma3EmbeddingScale',
      'Gemma3MeanPooling',
      'UnitNormalization',
    ]);
    for (const cls of LAYER_CLASSES) {
      expect(Object.prototype.hasOwnProperty.call(cls, 'contract')).toBe(true);
      expect(contractOf(cls.className)).toBe(cls.contract);
    }
  });

  it('say how each class decodes (written out here, not read from the contracts)', () => {
    const kinds = Object.fromEntries(
      LAYER_CLASSES.map((c) => [c.className, c.contract.decoding.kind]),
    );
    expect(kinds).toEqual({
      MultiHeadAttention: 'cached',
      CachedMultiHeadAttention: 'cached',
      GroupQueryAttention: 'cached',
      DotProductAttention: 'refused',
      Attention: 'refused',
      AdditiveAttention: 'refused',
      EinsumDense: 'positionWise',
      TokenAndPositionEmbedding: 'positionAware',
      PositionEmbedding: 'positionAware',
      SinePositionEncoding: 'positionAware',
      RotaryEmbedding: 'positionAware',
      ReversibleEmbedding: 'positionWise',
      TransformerEncoder: 'refused',
      TransformerDecoder: 'cached',
      MistralLayerNormalization: 'positionWise',
      CachedMistralAttention: 'refused',
      MistralTransformerDecoder: 'cached',
      RMSNormalization: 'positionWise',
      SmolLM3RotaryEmbedding: 'refused',
      SmolLM3Attention: 'refused',
      SmolLM3DecoderLayer: 'cached',
      Gemma3RMSNormalization: 'positionWise',
      CachedGemma3Attention: 'refused',
      Gemma3DecoderBlock: 'cached',
      Gemma3EmbeddingScale: 'positionWise',
      Gemma3MeanPooling: 'refused',
      UnitNormalization: 'positionWise',
      GetItem: 'refused',
      QuantizedDense: 'positionWise',
      QuantizedEmbedding: 'positionWise',
      LlamaLayerNorm: 'positionWise',
      LlamaAttention: 'refused',
      LlamaTransformerDecoder: 'cached',
      QwenLayerNorm: 'positionWise',
      QwenAttention: 'refused',
      QwenTransformerDecoder: 'cached',
      Qwen3LayerNorm: 'positionWise',
      Qwen3Attention: 'refused',
      Qwen3TransformerDecoder: 'cached',
    });
  });

  it('say what each class is in Keras 3 and tf-keras 2 (written out here)', () => {
    const keras = Object.fromEntries(
      LAYER_CLASSES.map((c) => {
        const k3 = c.contract.keras.keras3;
        const where = 'refused' in k3 ? 'refused' : (k3.pkg ?? k3.module ?? 'keras.layers');
        return [
          c.className,
          [where, 'refused' in c.contract.keras.keras2 ? 'refused' : 'tf-keras'],
        ];
      }),
    );
    expect(keras).toEqual({
      MultiHeadAttention: ['keras.layers', 'tf-keras'],
      CachedMultiHeadAttention: ['keras_hub', 'refused'],
      GroupQueryAttention: ['keras.layers', 'refused'],
      DotProductAttention: ['refused', 'refused'],
      Attention: ['keras.layers', 'tf-keras'],
      AdditiveAttention: ['keras.layers', 'tf-keras'],
      EinsumDense: ['keras.layers', 'tf-keras'],
      TokenAndPositionEmbedding: ['keras_hub', 'refused'],
      MistralLayerNormalization: ['keras_hub', 'refused'],
      CachedMistralAttention: ['keras_hub', 'refused'],
      MistralTransformerDecoder: ['keras_hub', 'refused'],
      RMSNormalization: ['keras.layers', 'refused'],
      SmolLM3RotaryEmbedding: ['keras_hub', 'refused'],
      SmolLM3Attention: ['keras_hub', 'refused'],
      SmolLM3DecoderLayer: ['keras_hub', 'refused'],
      Gemma3RMSNormalization: ['keras_hub', 'refused'],
      CachedGemma3Attention: ['keras_hub', 'refused'],
      Gemma3DecoderBlock: ['keras_hub', 'refused'],
      Gemma3EmbeddingScale: ['refused', 'refused'],
      Gemma3MeanPooling: ['keras_hub', 'refused'],
      UnitNormalization: ['keras.layers', 'tf-keras'],
      PositionEmbedding: ['keras_hub', 'refused'],
      SinePositionEncoding: ['keras_hub', 'refused'],
      RotaryEmbedding: ['keras_hub', 'refused'],
      ReversibleEmbedding: ['keras_hub', 'refused'],
      TransformerEncoder: ['keras_hub', 'refused'],
      TransformerDecoder: ['keras_hub', 'refused'],
      GetItem: ['keras.src.ops.numpy', 'refused'],
      QuantizedDense: ['keras.layers', 'refused'],
      QuantizedEmbedding: ['keras.layers', 'refused'],
      LlamaLayerNorm: ['keras_hub', 'refused'],
      LlamaAttention: ['keras_hub', 'refused'],
      LlamaTransformerDecoder: ['keras_hub', 'refused'],
      QwenLayerNorm: ['keras_hub', 'refused'],
      QwenAttention: ['keras_hub', 'refused'],
      QwenTransformerDecoder: ['keras_hub', 'refused'],
      Qwen3LayerNorm: ['keras_hub', 'refused'],
      Qwen3Attention: ['keras_hub', 'refused'],
      Qwen3TransformerDecoder: ['keras_hub', 'refused'],
    });
  });

  it('imply weight sizes from Keras configs (independent arithmetic)', () => {
    // a saved config camelCased once, as the guard does
    const implied = (cls: string, c: Record<string, number | number[]>) =>
      (contractOf(cls) as LayerContract).weights.implied(camelConfig(c)).values;
    // 2 heads x (2 x key 4 + 2 x value 3): query, key, value, output kernels at least
    expect(implied('MultiHeadAttention', {num_heads: 2, key_dim: 4, value_dim: 3})).toBe(28);
    expect(
      implied('GroupQueryAttention', {head_dim: 4, num_query_heads: 4, num_key_value_heads: 2}),
    ).toBe(48);
    expect(
      implied('TokenAndPositionEmbedding', {
        vocabulary_size: 10,
        sequence_length: 6,
        embedding_dim: 3,
      }),
    ).toBe(48);
    expect(implied('ReversibleEmbedding', {input_dim: 7, output_dim: 5})).toBe(35);
    expect(implied('EinsumDense', {output_shape: [3, 4]})).toBe(12);
    expect(implied('Attention', {})).toBe(0);
  });
});

/** The keys tfjs' own Layer.getConfig writes (dtype and batchInputShape when set). */
const TFJS_KEYS = ['name', 'trainable', 'dtype', 'batchInputShape'];

/** The call settings every attention layer writes only when set. */
const CALL_SETTINGS = {
  useCausalMask: true,
  returnAttentionScores: true,
  inputRoles: ['query'],
  zeroFullyMaskedRows: true,
};
const ROPE_31 = {
  ropeFrequencyAdjustmentFactor: 8,
  ropeLowFreqFactor: 1,
  ropeHighFreqFactor: 4,
  ropePretrainingSequenceLength: 8192,
};

/** SmolLM3's attention options, every one set. */
const SMOLLM3_OPTIONS = {
  hiddenSize: 8,
  numAttentionHeads: 2,
  numKeyValueHeads: 1,
  attentionBias: false,
  attentionDropout: 0.1,
  ropeLayerEnabledList: [true, false],
  layerTypes: ['full_attention', 'full_attention'],
  layerIdx: 1,
  maxPositionEmbeddings: 64,
  ropeTheta: 500000,
  partialRotaryFactor: 1,
};

/** Each registered class with every option set (written out here, not read from the contracts). */
const EVERY_OPTION: Record<string, () => tf.layers.Layer> = {
  MultiHeadAttention: () =>
    new src.MultiHeadAttention({
      ...CALL_SETTINGS,
      numHeads: 1,
      keyDim: 1,
      useGate: true,
      slidingWindow: 1,
      softmaxRobustMasking: true,
      chunkSize: 1,
    } as never),
  CachedMultiHeadAttention: () =>
    new src.CachedMultiHeadAttention({
      ...CALL_SETTINGS,
      numHeads: 1,
      keyDim: 1,
      useGate: true,
      slidingWindow: 1,
      softmaxRobustMasking: true,
      chunkSize: 1,
    } as never),
  GroupQueryAttention: () =>
    new src.GroupQueryAttention({
      ...CALL_SETTINGS,
      headDim: 1,
      numQueryHeads: 1,
      numKeyValueHeads: 1,
      useGate: true,
      slidingWindow: 1,
    } as never),
  DotProductAttention: () => new src.DotProductAttention({...CALL_SETTINGS} as never),
  Attention: () => new src.Attention({...CALL_SETTINGS, useScale: true} as never),
  AdditiveAttention: () => new src.AdditiveAttention({...CALL_SETTINGS, numHiddens: 1} as never),
  EinsumDense: () =>
    new src.EinsumDense({
      equation: 'ab,bc->ac',
      outputShape: 1,
      biasAxes: 'c',
      activation: 'relu',
      quantizationMode: 'int4',
      int4BlockSize: 64,
    }),
  TokenAndPositionEmbedding: () =>
    new src.TokenAndPositionEmbedding({
      vocabularySize: 1,
      sequenceLength: 1,
      embeddingDim: 1,
      maskZero: true,
    }),
  PositionEmbedding: () => new src.PositionEmbedding({sequenceLength: 2, startIndex: 1}),
  SinePositionEncoding: () => new src.SinePositionEncoding({startIndex: 1}),
  RotaryEmbedding: () => new src.RotaryEmbedding({startIndex: 1}),
  ReversibleEmbedding: () =>
    new src.ReversibleEmbedding({
      inputDim: 1,
      outputDim: 1,
      maskZero: true,
      logitSoftCap: 1,
      quantizationMode: 'int4',
      int4BlockSize: 64,
      int4ReverseInputQuantization: false,
    }),
  TransformerEncoder: () =>
    new src.TransformerEncoder({intermediateDim: 1, numHeads: 1, inputRoles: ['inputs']} as never),
  TransformerDecoder: () =>
    new src.TransformerDecoder({
      intermediateDim: 1,
      numHeads: 1,
      inputRoles: ['decoderSequence'],
    } as never),
  GetItem: () => new src.GetItem({index: [0]}),
  QuantizedDense: () =>
    new src.QuantizedDense({
      units: 1,
      activation: 'relu',
      useBias: true,
      quantizationMode: 'int4',
      int4BlockSize: 64,
    }),
  QuantizedEmbedding: () =>
    new src.QuantizedEmbedding({
      inputDim: 2,
      outputDim: 1,
      maskZero: true,
      quantizationMode: 'int4',
      int4BlockSize: -1,
    }),
  LlamaLayerNorm: () => new src.LlamaLayerNorm({epsilon: 1e-5}),
  LlamaAttention: () =>
    new src.LlamaAttention({
      numQueryHeads: 2,
      numKeyValueHeads: 1,
      ropeMaxWavelength: 500000,
      ...ROPE_31,
      dropout: 0.1,
    }),
  LlamaTransformerDecoder: () =>
    new src.LlamaTransformerDecoder({
      intermediateDim: 1,
      numQueryHeads: 1,
      numKeyValueHeads: 1,
      ...ROPE_31,
      inputRoles: ['decoderSequence'],
    } as never),
  QwenLayerNorm: () => new src.QwenLayerNorm({epsilon: 1e-5}),
  QwenAttention: () =>
    new src.QwenAttention({
      numQueryHeads: 2,
      numKeyValueHeads: 1,
      ropeMaxWavelength: 1e6,
      ropeScalingFactor: 2,
      dropout: 0.1,
      biasInitializer: 'ones',
      useSlidingWindowAttention: true,
      slidingWindowSize: 3,
    }),
  QwenTransformerDecoder: () =>
    new src.QwenTransformerDecoder({
      intermediateDim: 1,
      numQueryHeads: 1,
      numKeyValueHeads: 1,
      ropeScalingFactor: 2,
      useSlidingWindowAttention: true,
      slidingWindowSize: 3,
      inputRoles: ['decoderSequence'],
    } as never),
  Qwen3LayerNorm: () => new src.Qwen3LayerNorm({epsilon: 1e-5}),
  Qwen3Attention: () =>
    new src.Qwen3Attention({
      numQueryHeads: 2,
      numKeyValueHeads: 1,
      headDim: 4,
      ropeMaxWavelength: 1e6,
      ropeScalingFactor: 2,
      dropout: 0.1,
      layerNormEpsilon: 1e-6,
      slidingWindowSize: 3,
    }),
  Qwen3TransformerDecoder: () =>
    new src.Qwen3TransformerDecoder({
      intermediateDim: 1,
      numQueryHeads: 1,
      numKeyValueHeads: 1,
      headDim: 4,
      ropeScalingFactor: 2,
      slidingWindowSize: 3,
      inputRoles: ['decoderSequence'],
    } as never),
  MistralLayerNormalization: () => new src.MistralLayerNormalization({epsilon: 1e-5}),
  CachedMistralAttention: () =>
    new src.CachedMistralAttention({
      numQueryHeads: 2,
      numKeyValueHeads: 1,
      ropeMaxWavelength: 500000,
      ropeScalingFactor: 1,
      slidingWindow: 3,
      headDim: 4,
      dropout: 0.1,
    }),
  MistralTransformerDecoder: () =>
    new src.MistralTransformerDecoder({
      intermediateDim: 1,
      numQueryHeads: 1,
      numKeyValueHeads: 1,
      ropeScalingFactor: 1,
      slidingWindow: 3,
      headDim: 4,
      inputRoles: ['decoderSequence'],
    } as never),
  RMSNormalization: () => new src.RMSNormalization({epsilon: 1e-5, axis: -1}),
  SmolLM3RotaryEmbedding: () =>
    new src.SmolLM3RotaryEmbedding({
      hiddenSize: 8,
      numAttentionHeads: 2,
      maxPositionEmbeddings: 64,
      ropeTheta: 500000,
      partialRotaryFactor: 1,
    }),
  SmolLM3Attention: () => new src.SmolLM3Attention(SMOLLM3_OPTIONS),
  SmolLM3DecoderLayer: () =>
    new src.SmolLM3DecoderLayer({
      ...SMOLLM3_OPTIONS,
      intermediateSize: 4,
      mlpBias: false,
      layerNormEpsilon: 1e-5,
      inputRoles: ['decoderSequence'],
    } as never),
  Gemma3RMSNormalization: () => new src.Gemma3RMSNormalization({epsilon: 1e-5}),
  CachedGemma3Attention: () =>
    new src.CachedGemma3Attention({
      headDim: 2,
      numQueryHeads: 2,
      numKeyValueHeads: 1,
      kernelInitializer: 'zeros',
      logitSoftCap: 50,
      useSlidingWindowAttention: true,
      slidingWindowSize: 3,
      queryHeadDimNormalize: false,
      useQueryKeyNorm: true,
      layerNormEpsilon: 1e-5,
      ropeWavelength: 1e6,
      ropeScalingFactor: 8,
      useBidirectionalAttention: true,
      dropout: 0.1,
    }),
  Gemma3DecoderBlock: () =>
    new src.Gemma3DecoderBlock({
      hiddenDim: 4,
      intermediateDim: 4,
      headDim: 2,
      numQueryHeads: 2,
      numKeyValueHeads: 1,
      queryHeadDimNormalize: false,
      useQueryKeyNorm: true,
      usePostFfwNorm: true,
      usePostAttentionNorm: true,
      gateDimReduction: 1,
      logitSoftCap: 50,
      useSlidingWindowAttention: true,
      slidingWindowSize: 3,
      layerNormEpsilon: 1e-5,
      ropeWavelength: 1e6,
      ropeScalingFactor: 8,
      useBidirectionalAttention: true,
      dropout: 0.1,
      inputRoles: ['x'],
    }),
  Gemma3EmbeddingScale: () => new src.Gemma3EmbeddingScale({factor: 2}),
  Gemma3MeanPooling: () => new src.Gemma3MeanPooling(),
  UnitNormalization: () => new src.UnitNormalization(),
};

describe('config keys', () => {
  it("each class's list is what getConfig writes with every option set, both ways", () => {
    const missing: string[] = [];
    const unwritten: string[] = [];
    for (const cls of LAYER_CLASSES) {
      const make = EVERY_OPTION[cls.className];
      expect([cls.className, make]).toEqual([cls.className, expect.any(Function)]);
      const layer = make();
      const written = Object.keys(layer.getConfig()).filter((k) => !TFJS_KEYS.includes(k));
      const listed = cls.contract.configKeys;
      for (const k of written) if (!listed.includes(k)) missing.push(`${cls.className}.${k}`);
      for (const k of listed) if (!written.includes(k)) unwritten.push(`${cls.className}.${k}`);
      expect(new Set(listed).size).toBe(listed.length);
    }
    expect({missing, unwritten}).toEqual({missing: [], unwritten: []});
  });

  it('a layer built by each harness case writes only listed keys', () => {
    for (const cls of LAYER_CLASSES) {
      for (const [, c] of LAYER_CASES[cls.className] ?? []) {
        const layer = c.make();
        const inputs = c.inputShapes.map((shape, i) =>
          tf.input({shape: shape.slice(1), dtype: c.inputDtypes?.[i] ?? 'float32'}),
        );
        layer.apply(inputs.length === 1 ? inputs[0] : inputs);
        const extra = Object.keys(layer.getConfig()).filter(
          (k) => !TFJS_KEYS.includes(k) && !cls.contract.configKeys.includes(k),
        );
        expect([cls.className, extra]).toEqual([cls.className, []]);
      }
    }
  });
});

describe('one spelling for contract functions', () => {
  it("a saved config is camelCased once; where both spellings are saved, Keras' is read", () => {
    const saved = {num_heads: 2, keyDim: 9, key_dim: 4, units: 3, numHeads: 7, rope_type: 'x'};
    expect(camelConfig(saved)).toEqual({numHeads: 2, keyDim: 4, units: 3, ropeType: 'x'});
    // and the option an implied size is blamed on named as the file spells it
    expect(savedKey(saved, 'numHeads')).toBe('num_heads');
    expect(savedKey(saved, 'units')).toBe('units');
    expect(savedKey({}, '')).toBe('');
  });

  it("the package's contract functions read camelCase only (the planner's getConfig())", () => {
    const implied = (cls: string, c: Record<string, number>) =>
      (contractOf(cls) as LayerContract).weights.implied(c);
    expect(implied('MultiHeadAttention', {num_heads: 2, key_dim: 4}).values).toBe(0);
    expect(implied('MultiHeadAttention', {numHeads: 2, keyDim: 4})).toEqual({
      values: 32,
      option: 'keyDim',
    });
    const decoder = contractOf('TransformerDecoder')?.decoding as CachedDecoding;
    expect(decoder.cacheShape({numHeads: 2}, [1, 3, 8], 1, 5)).toEqual([1, 2, 5, 2, 4]);
    const refuse = (contractOf('RotaryEmbedding') as LayerContract).keras.refuseConfig;
    expect(refuse?.({ropeType: 'yarn'})).toMatch(/^has rope_type "yarn"/);
    expect(refuse?.({rope_type: 'yarn'})).toBeNull();
    const llama = (contractOf('LlamaAttention') as LayerContract).keras.refuseConfig;
    expect(llama?.({ropePositionScalingFactor: 2})).toMatch(
      /^has rope_position_scaling_factor = 2/,
    );
  });
});

describe('defineContract', () => {
  const decoding = {kind: 'refused', reason: 'a test'} as const;
  const keras = {keras3: {keys: []}, keras2: {}, call: {kind: 'tensor'}} as const;

  it('fills the parts a contract leaves out with their defaults', () => {
    const c = defineContract({keras, configKeys: [], decoding});
    expect(c.keras.kerasOnlyKeys).toEqual([]);
    expect(c.keras.refuseConfig).toBeNull();
    expect(c.weights.sublayers).toBeNull();
    expect(c.weights.keras3Folders).toEqual({});
    expect(c.weights.implied({units: 5})).toEqual({values: 0, option: ''});
    expect(c.makesKerasMask({maskZero: true}, {} as never)).toBe(false);
    expect('quantization' in c).toBe(false);
    // and keeps what a contract states
    const own = defineContract({
      keras: {...keras, kerasOnlyKeys: ['causal'], refuseConfig: () => 'no'},
      configKeys: [],
      weights: {keras3Folders: {a: '_a'}},
      decoding,
      makesKerasMask: () => true,
      quantization: {kind: 'own'},
    });
    expect(own.keras.kerasOnlyKeys).toEqual(['causal']);
    expect(own.keras.refuseConfig?.({})).toBe('no');
    expect(own.weights.keras3Folders).toEqual({a: '_a'});
    expect(own.weights.sublayers).toBeNull();
    expect(own.makesKerasMask({}, {} as never)).toBe(true);
    expect(own.quantization).toEqual({kind: 'own'});
  });

  it('refuses a contract without a part that has no default (a type error, and at run time)', () => {
    // @ts-expect-error: no decoding
    const noDecoding: ContractSpec = {keras, configKeys: []};
    const noCall: ContractSpec = {
      // @ts-expect-error: no calling form
      keras: {keras3: {keys: []}, keras2: {}},
      configKeys: [],
      decoding,
    };
    expect(() => defineContract(noDecoding)).toThrow(
      "defineContract: the contract has no 'decoding', which has no default; expected it set, " +
        'received the parts ["keras","configKeys"]',
    );
    expect(() => defineContract(noCall)).toThrow(
      "defineContract: the contract has no 'keras.call', which has no default",
    );
  });
});
