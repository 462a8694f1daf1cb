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
  generate,
  toKeras3Artifacts,
  toKerasArtifacts,
} from '../src';
import type {LayerContract} from '../src';
import {FAMILY_LAYER_CLASSES} from '../src/hub_models/register_layers';
import {LAYER_CLASSES as GENERIC_LAYER_CLASSES} from '../src/layers/register';

/** The package's layer classes: the generic ones and the built-in families' own. */
const LAYER_CLASSES = [...GENERIC_LAYER_CLASSES, ...FAMILY_LAYER_CLASSES];

/**
 * A user's layer: the running mean over the sequence, `y[t] = mean(x[0..t])` (causal). With a
 * cache `[batch, maxLength, features]` of the inputs so far, a call on positions
 * `index .. index + t - 1` returns `[y, cache]`, as the package's cached attention layers do.
 */
class RunningMean extends tf.layers.Layer {
  static readonly className: string = 'UserRunningMean';
  static readonly contract: LayerContract = {
    keras: {
      keras3: {pkg: 'my_layers', keys: ['scale']},
      keras2: {refused: 'tf-keras 2 has no such layer (a test layer)'},
      call: {kind: 'tensor'},
      kerasOnlyKeys: [],
      refuseConfig: null,
    },
    configSample: () => new RunningMean({scale: 2}),
    weights: {
      sublayers: null,
      keras3Folders: {},
      implied: (c) => ({values: Number(c.scale ?? 0), option: 'scale'}),
    },
    decoding: {
      kind: 'cached',
      refuse: (_c, node) => (node.inputTensors[0].rank === 3 ? null : 'not [batch, T, features]'),
      cacheShape: (_c, input, batch, maxLength) => [batch, maxLength, input[2] as number],
      cacheKwargs: (cache, index) => ({cache, cacheIndex: index}),
      readsKerasMasks: false,
      paddingMaskRole: null,
    },
    makesKerasMask: () => false,
  };
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
      GetItem: 'refused',
      QuantizedDense: 'positionWise',
      QuantizedEmbedding: 'positionWise',
      LlamaLayerNorm: 'positionWise',
      LlamaAttention: 'refused',
      LlamaTransformerDecoder: 'cached',
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
    });
  });

  it('imply weight sizes from Keras configs (independent arithmetic)', () => {
    const implied = (cls: string, c: Record<string, number | number[]>) =>
      (contractOf(cls) as LayerContract).weights.implied(c).values;
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
