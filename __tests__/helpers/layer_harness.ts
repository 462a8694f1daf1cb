/**
 * One test harness for every layer (after Keras' `run_layer_test`): build, symbolic apply, eager
 * apply, a training step with a gradient for every weight, serialization and leak checks; and its
 * cases (`LAYER_CASES`), at least one per class src/layers/register.ts registers.
 * `__tests__/layers/register_harness.test.ts` runs them on every backend and fails when a registered class
 * has no case or a case makes a layer of another class.
 */
import * as tf from '@tensorflow/tfjs';

import {
  AdditiveAttention,
  Attention,
  CachedMultiHeadAttention,
  DotProductAttention,
  EinsumDense,
  GetItem,
  GroupQueryAttention,
  LlamaAttention,
  LlamaLayerNorm,
  QuantizedDense,
  QuantizedEmbedding,
  LlamaTransformerDecoder,
  MultiHeadAttention,
  PositionEmbedding,
  ReversibleEmbedding,
  RotaryEmbedding,
  SinePositionEncoding,
  TokenAndPositionEmbedding,
  TransformerDecoder,
  TransformerEncoder,
  CachedGemma3Attention,
  Gemma3DecoderBlock,
  Gemma3EmbeddingScale,
  Gemma3MeanPooling,
  Gemma3RMSNormalization,
  UnitNormalization,
  CachedMistralAttention,
  MistralLayerNormalization,
  MistralTransformerDecoder,
  RMSNormalization,
  SmolLM3Attention,
  SmolLM3DecoderLayer,
  SmolLM3RotaryEmbedding,
  QwenAttention,
  QwenLayerNorm,
  QwenTransformerDecoder,
  Qwen3Attention,
  Qwen3LayerNorm,
  Qwen3TransformerDecoder,
} from '../../src';
import {expectClose} from './close';
import {randTensor} from './data';
import {saveToMemory} from './save';

export interface LayerCase {
  /** A fresh layer. */
  make: () => tf.layers.Layer;
  /** Input shapes with the batch axis first (used for eager inputs; batch is symbolic). */
  inputShapes: number[][];
  inputDtypes?: Array<'float32' | 'int32' | 'bool'>;
  /** Concrete inputs of those shapes (defaults to seeded random normal floats). */
  makeInputs?: () => tf.Tensor[];
  /** The output shape for the concrete inputs. */
  outputShape: number[];
  /** Shapes of further outputs (e.g. returned attention scores), for the concrete inputs. */
  moreOutputShapes?: number[][];
  /**
   * Call options. Tensors among them become extra model inputs in the symbolic model (as a
   * functional model passes lengths or masks); in eager calls they are passed as given.
   */
  callKwargs?: () => Record<string, unknown>;
  /** False for layers whose output does not depend on the input's values (position tables). */
  inputGradients?: boolean;
  /** Trainable weight count after build. */
  trainableWeights: number;
  /** Expected `originalName`s of the weights (with the layer name `layer`), when given. */
  weightNames?: string[];
}

/** The concrete inputs and call options of one eager call. */
function inputsFor(c: LayerCase): tf.Tensor[] {
  if (c.makeInputs) return c.makeInputs();
  return c.inputShapes.map((s, i) => tf.randomNormal(s, 0, 1, 'float32', 100 + i));
}

function isTensor(x: unknown): x is tf.Tensor {
  return x instanceof tf.Tensor;
}

/** The tensors among the call options, in a fixed order (they are model inputs too). */
function kwargTensors(kwargs: Record<string, unknown>): Array<[string, tf.Tensor]> {
  return Object.entries(kwargs).filter((e): e is [string, tf.Tensor] => isTensor(e[1]));
}

/** Model inputs for `predict`: the layer's inputs, then the call options' tensors. */
function modelInputsFor(c: LayerCase): {xs: tf.Tensor[]; kwargs: Record<string, unknown>} {
  const xs = inputsFor(c);
  const kwargs = c.callKwargs?.() ?? {};
  return {xs: [...xs, ...kwargTensors(kwargs).map(([, t]) => t)], kwargs};
}

function eagerApply(layer: tf.layers.Layer, xs: tf.Tensor[], kwargs: Record<string, unknown>) {
  const y = layer.apply(xs.length === 1 ? xs[0] : xs, kwargs) as tf.Tensor | tf.Tensor[];
  return Array.isArray(y) ? y : [y];
}

function symbolicModel(c: LayerCase): {model: tf.LayersModel; layer: tf.layers.Layer} {
  const layer = c.make();
  const ins = c.inputShapes.map((s, i) =>
    tf.input({shape: s.slice(1), dtype: c.inputDtypes?.[i] ?? 'float32'}),
  );
  const kwargs = c.callKwargs?.() ?? {};
  const symbolicKwargs: Record<string, unknown> = {...kwargs};
  const kwIns = kwargTensors(kwargs).map(([name, t]) => {
    const input = tf.input({
      shape: t.shape.slice(1),
      dtype: t.dtype as 'float32' | 'int32' | 'bool',
    });
    symbolicKwargs[name] = input;
    return input;
  });
  tf.dispose(kwargTensors(kwargs).map(([, t]) => t));
  const out = layer.apply(ins.length === 1 ? ins[0] : ins, symbolicKwargs) as
    tf.SymbolicTensor | tf.SymbolicTensor[];
  return {model: tf.model({inputs: [...ins, ...kwIns], outputs: out}), layer};
}

const outputsOf = (y: tf.Tensor | tf.Tensor[]) => (Array.isArray(y) ? y : [y]);

export function runLayerTest(name: string, c: LayerCase): void {
  describe(`layer harness: ${name}`, () => {
    it('builds on symbolic inputs with the right output shape and weights', () => {
      const {model, layer} = symbolicModel(c);
      const shapes = [c.outputShape, ...(c.moreOutputShapes ?? [])];
      expect(model.outputs.map((o) => o.shape)).toEqual(
        shapes.map((shape) => [null, ...shape.slice(1)]),
      );
      expect(layer.trainableWeights.length).toBe(c.trainableWeights);
      if (c.weightNames) {
        expect(layer.weights.map((w) => w.originalName)).toEqual(
          c.weightNames.map((n) => n.replace(/^layer/, layer.name)),
        );
      }
      model.dispose();
    });

    it('applies eagerly, with the shapes computeOutputShape promised, leaking nothing', () => {
      const layer = c.make();
      const xs = inputsFor(c);
      const kwargs = c.callKwargs?.() ?? {};
      const shapes = [c.outputShape, ...(c.moreOutputShapes ?? [])];
      const ys = eagerApply(layer, xs, kwargs);
      expect(ys.map((y) => y.shape)).toEqual(shapes);
      const promised = layer.computeOutputShape(
        xs.length === 1 ? xs[0].shape : xs.map((x) => x.shape),
      );
      // computeOutputShape sees the layer's inputs alone: its first shape is the output's
      const first = Array.isArray(promised[0]) ? (promised[0] as number[]) : promised;
      expect(first).toEqual(c.outputShape);
      tf.dispose(ys);
      const before = tf.memory().numTensors;
      const again = eagerApply(layer, xs, kwargs);
      // the outputs, and the Keras masks some carry (disposed with them)
      const masks = again.filter((y) => y.kerasMask != null).length;
      expect(tf.memory().numTensors).toBe(before + shapes.length + masks);
      tf.dispose(again);
      expect(tf.memory().numTensors).toBe(before);
      tf.dispose([...xs, ...kwargTensors(kwargs).map(([, t]) => t)]);
      layer.dispose();
    });

    it('trains: gradients reach every weight and float input, and fit lowers the loss', async () => {
      const full = symbolicModel(c).model;
      // trained on the first output (the scores of attention layers follow from it)
      const model = tf.model({inputs: full.inputs, outputs: full.outputs[0]});
      const {xs} = modelInputsFor(c);
      const target = tf.randomNormal(c.outputShape, 0, 1, 'float32', 7);
      const lossOf = (inputs: tf.Tensor[]) => {
        const y = model.apply(inputs, {training: true}) as tf.Tensor;
        return tf.losses.meanSquaredError(target, y) as tf.Scalar;
      };
      // gradients with respect to the float inputs (all layers, weights or not)
      const floatIdx = xs
        .map((x, i) => (x.dtype === 'float32' && c.inputGradients !== false ? i : -1))
        .filter((i) => i >= 0);
      const inputGrads =
        floatIdx.length === 0
          ? []
          : tf.grads((...fl: tf.Tensor[]) => {
              const all = [...xs];
              floatIdx.forEach((i, j) => (all[i] = fl[j]));
              return lossOf(all);
            })(floatIdx.map((i) => xs[i]));
      for (const g of inputGrads) {
        expect(tf.max(tf.abs(g)).dataSync()[0]).toBeGreaterThan(0);
      }
      tf.dispose(inputGrads);
      const vars = model.trainableWeights.map((w) => w.read() as tf.Variable);
      expect(vars.length).toBe(c.trainableWeights);
      if (vars.length === 0) {
        tf.dispose([...xs, target]);
        model.dispose();
        return;
      }
      const {value, grads} = tf.variableGrads(() => lossOf(xs), vars);
      value.dispose();
      for (const v of vars) {
        const g = grads[v.name];
        expect(g).toBeDefined();
        expect(tf.max(tf.abs(g)).dataSync()[0]).toBeGreaterThan(0);
      }
      tf.dispose(Object.values(grads));
      model.compile({optimizer: tf.train.adam(0.02), loss: 'meanSquaredError'});
      const evalLoss = () => {
        const l = model.evaluate(xs, target, {batchSize: c.outputShape[0]}) as tf.Scalar;
        const v = l.dataSync()[0];
        l.dispose();
        return v;
      };
      const before = evalLoss();
      await model.fit(xs, target, {epochs: 20, batchSize: c.outputShape[0], verbose: 0});
      expect(evalLoss()).toBeLessThan(before);
      // after the first fit has created the optimizer's slots, fit and predict leak nothing
      const count = tf.memory().numTensors;
      await model.fit(xs, target, {epochs: 1, batchSize: c.outputShape[0], verbose: 0});
      tf.dispose(model.predict(xs));
      expect(tf.memory().numTensors).toBe(count);
      tf.dispose([...xs, target]);
      model.dispose();
    });

    it('serializes: config round trip, save and load predict identically', async () => {
      const {model, layer} = symbolicModel(c);
      const config = layer.getConfig();
      const entry = tf.serialization.SerializationMap.getMap().classNameMap[layer.getClassName()];
      expect(entry).toBeDefined();
      const clone = entry[1](entry[0], {...config}) as tf.layers.Layer;
      expect(clone.getConfig()).toEqual(config);

      const artifacts = await saveToMemory(model);
      const topology = JSON.stringify(artifacts.modelTopology);
      expect(topology).toContain(`"class_name":"${layer.getClassName()}"`);
      const loaded = await tf.loadLayersModel(tf.io.fromMemory(artifacts));
      expect(loaded.weights.map((w) => w.originalName)).toEqual(
        model.weights.map((w) => w.originalName),
      );
      const {xs} = modelInputsFor(c);
      const a = outputsOf(model.predict(xs));
      const b = outputsOf(loaded.predict(xs));
      expect(b.length).toBe(1 + (c.moreOutputShapes?.length ?? 0));
      b.forEach((t, i) => expectClose(t, a[i], 1e-6, 1e-6));
      tf.dispose([...xs, ...a, ...b]);
      model.dispose();
      loaded.dispose();
    });
  });
}

/** Ids with repeats (1, 5) and padding (0), for the embeddings. */
const IDS = [
  [3, 1, 4, 1, 0],
  [5, 5, 2, 0, 0],
];

// the transformer blocks: batch, target and source lengths, width, and padding masks
const B = 2;
const T = 5;
const D = 8;
const S = 4;
const PAD = [
  [1, 1, 1, 0, 0],
  [1, 1, 1, 1, 1],
];
const ENC_PAD = [
  [1, 1, 0, 0],
  [1, 1, 1, 0],
];

/** Registered class name -> its cases, each a name and a {@link LayerCase}. */
export const LAYER_CASES: Readonly<Record<string, ReadonlyArray<[string, LayerCase]>>> = {
  MultiHeadAttention: [
    [
      'self-attention from one tensor',
      {
        make: () => new MultiHeadAttention({numHeads: 2, keyDim: 4}),
        inputShapes: [[2, 5, 8]],
        outputShape: [2, 5, 8],
        trainableWeights: 8,
        weightNames: ['query', 'key', 'value', 'attention_output'].flatMap((n) => [
          `layer/${n}/kernel`,
          `layer/${n}/bias`,
        ]),
      },
    ],
    [
      'cross-attention with key, valueDim and outputShape',
      {
        make: () => new MultiHeadAttention({numHeads: 3, keyDim: 2, valueDim: 5, outputShape: 7}),
        inputShapes: [
          [2, 4, 6],
          [2, 3, 5],
          [2, 3, 9],
        ],
        outputShape: [2, 4, 7],
        trainableWeights: 8,
      },
    ],
    [
      'useBias false with a lengths input',
      {
        make: () =>
          new MultiHeadAttention({numHeads: 2, keyDim: 3, useBias: false, useCausalMask: true}),
        inputShapes: [
          [3, 4, 6],
          [3, 1],
        ],
        inputDtypes: ['float32', 'int32'],
        makeInputs: () => [randTensor([3, 4, 6], 5), tf.tensor2d([[4], [2], [1]], [3, 1], 'int32')],
        outputShape: [3, 4, 6],
        trainableWeights: 4,
        weightNames: ['query', 'key', 'value', 'attention_output'].map((n) => `layer/${n}/kernel`),
      },
    ],
    [
      'gated attention over two axes with dropout',
      {
        make: () =>
          new MultiHeadAttention({
            numHeads: 2,
            keyDim: 2,
            useGate: true,
            attentionAxes: [1, 2],
            dropout: 0.2,
          }),
        inputShapes: [[2, 3, 2, 4]],
        outputShape: [2, 3, 2, 4],
        trainableWeights: 10,
      },
    ],
    [
      'lengths, causal and returned scores as call options',
      {
        make: () => new MultiHeadAttention({numHeads: 2, keyDim: 3}),
        inputShapes: [
          [3, 4, 6],
          [3, 5, 6],
        ],
        callKwargs: () => ({
          validLens: tf.tensor2d([[5], [2], [1]], [3, 1], 'int32'),
          useCausalMask: true,
          returnAttentionScores: true,
        }),
        outputShape: [3, 4, 6],
        moreOutputShapes: [[3, 2, 4, 5]],
        trainableWeights: 8,
      },
    ],
  ],
  CachedMultiHeadAttention: [
    [
      'keras-hub layout',
      {
        make: () => new CachedMultiHeadAttention({numHeads: 2, keyDim: 3}),
        inputShapes: [[2, 4, 6]],
        outputShape: [2, 4, 6],
        trainableWeights: 8,
        weightNames: ['query', 'key', 'value', 'attention_output'].flatMap((n) => [
          `layer/${n}/kernel`,
          `layer/${n}/bias`,
        ]),
      },
    ],
  ],
  GroupQueryAttention: [
    [
      '4 query heads over 2 key / value heads',
      {
        make: () => new GroupQueryAttention({headDim: 3, numQueryHeads: 4, numKeyValueHeads: 2}),
        inputShapes: [[2, 5, 6]],
        outputShape: [2, 5, 6],
        trainableWeights: 8,
        weightNames: ['query', 'key', 'value', 'attention_output'].flatMap((n) => [
          `layer/${n}/kernel`,
          `layer/${n}/bias`,
        ]),
      },
    ],
    [
      'multi-query, gated, cross-attention with a key, no bias',
      {
        make: () =>
          new GroupQueryAttention({
            headDim: 2,
            numQueryHeads: 3,
            numKeyValueHeads: 1,
            useGate: true,
            useBias: false,
            dropout: 0.1,
          }),
        // the value as wide as the query (Keras' compute_output_shape), the key not
        inputShapes: [
          [2, 4, 6],
          [2, 3, 6],
          [2, 3, 7],
        ],
        outputShape: [2, 4, 6],
        trainableWeights: 5,
        weightNames: ['query', 'key', 'value', 'gate', 'attention_output'].map(
          (n) => `layer/${n}/kernel`,
        ),
      },
    ],
  ],
  DotProductAttention: [
    [
      'with a lengths input',
      {
        make: () => new DotProductAttention({dropout: 0.1}),
        inputShapes: [
          [2, 3, 4],
          [2, 5, 6],
          [2, 5, 4],
          [2, 1],
        ],
        inputDtypes: ['float32', 'float32', 'float32', 'int32'],
        makeInputs: () => [
          randTensor([2, 3, 4], 1),
          randTensor([2, 5, 6], 2),
          randTensor([2, 5, 4], 3),
          tf.tensor2d([[2], [4]], [2, 1], 'int32'),
        ],
        outputShape: [2, 3, 6],
        trainableWeights: 0,
      },
    ],
    [
      'lengths as a call option',
      {
        make: () => new DotProductAttention(),
        inputShapes: [
          [2, 3, 4],
          [2, 5, 6],
          [2, 5, 4],
        ],
        callKwargs: () => ({validLens: tf.tensor2d([[4], [2]], [2, 1], 'int32')}),
        outputShape: [2, 3, 6],
        trainableWeights: 0,
      },
    ],
  ],
  Attention: [
    [
      'dot with scale, [query, value]',
      {
        make: () => new Attention({useScale: true}),
        inputShapes: [
          [2, 3, 4],
          [2, 5, 4],
        ],
        outputShape: [2, 3, 4],
        trainableWeights: 1,
        weightNames: ['layer/scale'],
      },
    ],
    [
      'concat with scale and key',
      {
        make: () => new Attention({useScale: true, scoreMode: 'concat', dropout: 0.3}),
        inputShapes: [
          [2, 3, 4],
          [2, 5, 6],
          [2, 5, 4],
        ],
        outputShape: [2, 3, 6],
        trainableWeights: 2,
        weightNames: ['layer/scale', 'layer/concat_score_weight'],
      },
    ],
    [
      'lengths and returned scores as call options',
      {
        make: () => new Attention({useScale: true}),
        inputShapes: [
          [2, 3, 4],
          [2, 5, 4],
        ],
        callKwargs: () => ({
          validLens: tf.tensor2d([[4], [2]], [2, 1], 'int32'),
          returnAttentionScores: true,
        }),
        outputShape: [2, 3, 4],
        moreOutputShapes: [[2, 3, 5]],
        trainableWeights: 1,
      },
    ],
  ],
  AdditiveAttention: [
    [
      'Keras form (scale over dim)',
      {
        make: () => new AdditiveAttention(),
        inputShapes: [
          [2, 3, 4],
          [2, 5, 4],
        ],
        outputShape: [2, 3, 4],
        trainableWeights: 1,
        weightNames: ['layer/scale'],
      },
    ],
    [
      'd2l form with numHiddens, query and key of different sizes, lengths input',
      {
        make: () => new AdditiveAttention({numHiddens: 6, dropout: 0.2}),
        inputShapes: [
          [2, 3, 5],
          [2, 4, 2],
          [2, 4, 3],
          [2, 1],
        ],
        inputDtypes: ['float32', 'float32', 'float32', 'int32'],
        makeInputs: () => [
          randTensor([2, 3, 5], 1),
          randTensor([2, 4, 2], 2),
          randTensor([2, 4, 3], 3),
          tf.tensor2d([[3], [1]], [2, 1], 'int32'),
        ],
        outputShape: [2, 3, 2],
        trainableWeights: 3,
        weightNames: ['layer/query_kernel', 'layer/key_kernel', 'layer/scale'],
      },
    ],
    [
      'an attention mask and returned scores as call options',
      {
        make: () => new AdditiveAttention(),
        inputShapes: [
          [2, 3, 4],
          [2, 5, 4],
        ],
        callKwargs: () => ({
          attentionMask: tf.tensor3d(
            Array.from({length: 30}, (_, i) => (i % 5 < 3 || i % 7 === 0 ? 1 : 0)),
            [2, 3, 5],
            'bool',
          ),
          returnAttentionScores: true,
        }),
        outputShape: [2, 3, 4],
        moreOutputShapes: [[2, 3, 5]],
        trainableWeights: 1,
      },
    ],
  ],
  EinsumDense: [
    [
      'the MultiHeadAttention query projection',
      {
        make: () =>
          new EinsumDense({
            equation: 'abc,cde->abde',
            outputShape: [null, 3, 4],
            biasAxes: 'de',
            activation: 'relu',
          }),
        inputShapes: [[2, 5, 6]],
        outputShape: [2, 5, 3, 4],
        trainableWeights: 2,
        weightNames: ['layer/kernel', 'layer/bias'],
      },
    ],
    [
      'an ellipsis equation',
      {
        make: () => new EinsumDense({equation: '...b,bc->...c', outputShape: 7, biasAxes: 'c'}),
        inputShapes: [[2, 3, 4]],
        outputShape: [2, 3, 7],
        trainableWeights: 2,
      },
    ],
  ],
  TokenAndPositionEmbedding: [
    [
      'ids with padding and maskZero',
      {
        make: () =>
          new TokenAndPositionEmbedding({
            vocabularySize: 7,
            sequenceLength: 6,
            embeddingDim: 3,
            maskZero: true,
          }),
        inputShapes: [[2, 5]],
        inputDtypes: ['int32'],
        makeInputs: () => [tf.tensor2d(IDS, [2, 5], 'int32')],
        outputShape: [2, 5, 3],
        trainableWeights: 2,
        weightNames: ['layer/token_embedding/embeddings', 'layer/position_embedding/embeddings'],
      },
    ],
  ],
  PositionEmbedding: [
    [
      'a table of 6 positions on [batch, 5, 3]',
      {
        make: () => new PositionEmbedding({sequenceLength: 6}),
        inputShapes: [[2, 5, 3]],
        outputShape: [2, 5, 3],
        trainableWeights: 1,
        weightNames: ['layer/embeddings'],
        inputGradients: false, // the output is the table's rows: it does not depend on x's values
      },
    ],
  ],
  SinePositionEncoding: [
    [
      'on [batch, T, width]: the table broadcast to the input',
      {
        make: () => new SinePositionEncoding({maxWavelength: 100}),
        inputShapes: [[2, 5, 6]],
        outputShape: [2, 5, 6],
        trainableWeights: 0,
        inputGradients: false, // sin / cos of the positions: independent of x's values
      },
    ],
  ],
  RotaryEmbedding: [
    [
      'on [batch, T, heads, headDim]',
      {
        make: () => new RotaryEmbedding(),
        inputShapes: [[2, 5, 2, 4]],
        outputShape: [2, 5, 2, 4],
        trainableWeights: 0,
      },
    ],
  ],
  ReversibleEmbedding: [
    [
      'forward: int32 ids -> embeddings, with maskZero',
      {
        make: () => new ReversibleEmbedding({inputDim: 7, outputDim: 4, maskZero: true}),
        inputShapes: [[2, 5]],
        inputDtypes: ['int32'],
        makeInputs: () => [tf.tensor2d(IDS, [2, 5], 'int32')],
        outputShape: [2, 5, 4],
        trainableWeights: 1,
        weightNames: ['layer/embeddings'],
      },
    ],
    [
      'reverse ({reverse: true}): hidden states -> logits on the tied table, soft-capped',
      {
        make: () => new ReversibleEmbedding({inputDim: 7, outputDim: 4, logitSoftCap: 2}),
        inputShapes: [[2, 5, 4]],
        callKwargs: () => ({reverse: true}),
        outputShape: [2, 5, 7],
        trainableWeights: 1,
        weightNames: ['layer/embeddings'],
      },
    ],
  ],
  TransformerEncoder: [
    [
      'padding mask as a call option',
      {
        make: () => new TransformerEncoder({intermediateDim: 12, numHeads: 2}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        callKwargs: () => ({paddingMask: tf.tensor2d(PAD, [B, T], 'int32')}),
        trainableWeights: 16,
        weightNames: [
          'layer/self_attention_layer/query/kernel',
          'layer/self_attention_layer/query/bias',
          'layer/self_attention_layer/key/kernel',
          'layer/self_attention_layer/key/bias',
          'layer/self_attention_layer/value/kernel',
          'layer/self_attention_layer/value/bias',
          'layer/self_attention_layer/attention_output/kernel',
          'layer/self_attention_layer/attention_output/bias',
          'layer/self_attention_layer_norm/gamma',
          'layer/self_attention_layer_norm/beta',
          'layer/feedforward_layer_norm/gamma',
          'layer/feedforward_layer_norm/beta',
          'layer/feedforward_intermediate_dense/kernel',
          'layer/feedforward_intermediate_dense/bias',
          'layer/feedforward_output_dense/kernel',
          'layer/feedforward_output_dense/bias',
        ],
      },
    ],
  ],
  TransformerDecoder: [
    [
      'decoder-only, causal, with a decoder padding mask',
      {
        make: () => new TransformerDecoder({intermediateDim: 12, numHeads: 2}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        callKwargs: () => ({decoderPaddingMask: tf.tensor2d(PAD, [B, T], 'int32')}),
        trainableWeights: 16,
      },
    ],
    [
      'with cross-attention and an encoder padding mask',
      {
        make: () =>
          new TransformerDecoder({intermediateDim: 12, numHeads: 2, normalizeFirst: true}),
        inputShapes: [
          [B, T, D],
          [B, S, D],
        ],
        outputShape: [B, T, D],
        callKwargs: () => ({encoderPaddingMask: tf.tensor2d(ENC_PAD, [B, S], 'int32')}),
        trainableWeights: 26,
      },
    ],
  ],
  GetItem: [
    [
      'x[:, 1:3, ::2]',
      {
        make: () =>
          new GetItem({
            index: [
              {start: null, stop: null, step: null},
              {start: 1, stop: 3, step: null},
              {start: null, stop: null, step: 2},
            ],
          }),
        inputShapes: [[2, 4, 5]],
        outputShape: [2, 2, 3],
        trainableWeights: 0,
      },
    ],
  ],
  QuantizedDense: [
    [
      "Keras 3's int8 Dense (weights all non-trainable, inputs quantized: no input gradient)",
      {
        make: () => new QuantizedDense({units: 3, activation: 'relu'}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, 3],
        trainableWeights: 0,
        inputGradients: false,
        weightNames: ['layer/kernel', 'layer/bias', 'layer/kernel_scale'],
      },
    ],
  ],
  QuantizedEmbedding: [
    [
      "Keras 3's int8 Embedding with maskZero",
      {
        make: () => new QuantizedEmbedding({inputDim: 7, outputDim: 4, maskZero: true}),
        inputShapes: [[2, 5]],
        inputDtypes: ['int32'],
        makeInputs: () => [tf.tensor2d(IDS, [2, 5], 'int32')],
        outputShape: [2, 5, 4],
        trainableWeights: 0,
        inputGradients: false,
        weightNames: ['layer/embeddings', 'layer/embeddings_scale'],
      },
    ],
  ],
  LlamaLayerNorm: [
    [
      'RMS over the last axis',
      {
        make: () => new LlamaLayerNorm({epsilon: 1e-5}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 1,
        weightNames: ['layer/scale'],
      },
    ],
  ],
  LlamaAttention: [
    [
      '4 query heads over 2 key / value heads, rotary, no mask',
      {
        make: () => new LlamaAttention({numQueryHeads: 4, numKeyValueHeads: 2}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 4,
        weightNames: [
          'layer/query/kernel',
          'layer/key/kernel',
          'layer/value/kernel',
          'layer/attention_output/kernel',
        ],
      },
    ],
  ],
  LlamaTransformerDecoder: [
    [
      'causal, grouped-query, with a decoder padding mask',
      {
        make: () =>
          new LlamaTransformerDecoder({intermediateDim: 12, numQueryHeads: 4, numKeyValueHeads: 2}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        callKwargs: () => ({decoderPaddingMask: tf.tensor2d(PAD, [B, T], 'int32')}),
        trainableWeights: 9,
        weightNames: [
          'layer/self_attention/query/kernel',
          'layer/self_attention/key/kernel',
          'layer/self_attention/value/kernel',
          'layer/self_attention/attention_output/kernel',
          'layer/self_attention_layernorm/scale',
          'layer/feedforward_intermediate_dense/kernel',
          'layer/feedforward_gate_dense/kernel',
          'layer/feedforward_output_dense/kernel',
          'layer/feedforward_layernorm/scale',
        ],
      },
    ],
  ],
  QwenLayerNorm: [
    [
      'RMS over the last axis',
      {
        make: () => new QwenLayerNorm({epsilon: 1e-6}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 1,
        weightNames: ['layer/scale'],
      },
    ],
  ],
  QwenAttention: [
    [
      '4 query heads over 2 key / value heads, biases, rotary, no mask',
      {
        make: () => new QwenAttention({numQueryHeads: 4, numKeyValueHeads: 2}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 7,
        weightNames: [
          'layer/query/kernel',
          'layer/query/bias',
          'layer/key/kernel',
          'layer/key/bias',
          'layer/value/kernel',
          'layer/value/bias',
          'layer/attention_output/kernel',
        ],
      },
    ],
  ],
  QwenTransformerDecoder: [
    [
      'causal, grouped-query, sliding window, with a decoder padding mask',
      {
        make: () =>
          new QwenTransformerDecoder({
            intermediateDim: 12,
            numQueryHeads: 4,
            numKeyValueHeads: 2,
            useSlidingWindowAttention: true,
            slidingWindowSize: 2,
          }),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        callKwargs: () => ({decoderPaddingMask: tf.tensor2d(PAD, [B, T], 'int32')}),
        trainableWeights: 12,
        weightNames: [
          'layer/self_attention/query/kernel',
          'layer/self_attention/query/bias',
          'layer/self_attention/key/kernel',
          'layer/self_attention/key/bias',
          'layer/self_attention/value/kernel',
          'layer/self_attention/value/bias',
          'layer/self_attention/attention_output/kernel',
          'layer/self_attention_layernorm/scale',
          'layer/feedforward_intermediate_dense/kernel',
          'layer/feedforward_gate_dense/kernel',
          'layer/feedforward_output_dense/kernel',
          'layer/feedforward_layernorm/scale',
        ],
      },
    ],
  ],
  Qwen3LayerNorm: [
    [
      'RMS over the last axis (each head of a query)',
      {
        make: () => new Qwen3LayerNorm({epsilon: 1e-6}),
        inputShapes: [[B, T, 2, 4]],
        outputShape: [B, T, 2, 4],
        trainableWeights: 1,
        weightNames: ['layer/scale'],
      },
    ],
  ],
  Qwen3Attention: [
    [
      '4 query heads of 6 over 2 key / value heads, per-head norms, rotary, no mask',
      {
        make: () => new Qwen3Attention({numQueryHeads: 4, numKeyValueHeads: 2, headDim: 6}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 6,
        weightNames: [
          'layer/query/kernel',
          'layer/query_dense_layernorm/scale',
          'layer/key_dense_layernorm/scale',
          'layer/key/kernel',
          'layer/value/kernel',
          'layer/attention_output/kernel',
        ],
      },
    ],
  ],
  Qwen3TransformerDecoder: [
    [
      'causal, grouped-query, head_dim 4, sliding window, with a decoder padding mask',
      {
        make: () =>
          new Qwen3TransformerDecoder({
            intermediateDim: 12,
            numQueryHeads: 4,
            numKeyValueHeads: 2,
            headDim: 4,
            slidingWindowSize: 2,
          }),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        callKwargs: () => ({decoderPaddingMask: tf.tensor2d(PAD, [B, T], 'int32')}),
        trainableWeights: 11,
        weightNames: [
          'layer/self_attention/query/kernel',
          'layer/self_attention/query_dense_layernorm/scale',
          'layer/self_attention/key_dense_layernorm/scale',
          'layer/self_attention/key/kernel',
          'layer/self_attention/value/kernel',
          'layer/self_attention/attention_output/kernel',
          'layer/self_attention_layernorm/scale',
          'layer/feedforward_intermediate_dense/kernel',
          'layer/feedforward_gate_dense/kernel',
          'layer/feedforward_output_dense/kernel',
          'layer/feedforward_layernorm/scale',
        ],
      },
    ],
  ],
  MistralLayerNormalization: [
    [
      'RMS over the last axis',
      {
        make: () => new MistralLayerNormalization({epsilon: 1e-5}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 1,
        weightNames: ['layer/scale'],
      },
    ],
  ],
  CachedMistralAttention: [
    [
      '4 query heads over 2 key / value heads, rotary, no mask',
      {
        make: () =>
          new CachedMistralAttention({numQueryHeads: 4, numKeyValueHeads: 2, slidingWindow: 2}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 4,
        weightNames: [
          'layer/query/kernel',
          'layer/key/kernel',
          'layer/value/kernel',
          'layer/attention_output/kernel',
        ],
      },
    ],
  ],
  MistralTransformerDecoder: [
    [
      'causal over a sliding window of 2, grouped-query, with a decoder padding mask',
      {
        make: () =>
          new MistralTransformerDecoder({
            intermediateDim: 12,
            numQueryHeads: 4,
            numKeyValueHeads: 2,
            slidingWindow: 2,
          }),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        callKwargs: () => ({decoderPaddingMask: tf.tensor2d(PAD, [B, T], 'int32')}),
        trainableWeights: 9,
        weightNames: [
          'layer/self_attention/query/kernel',
          'layer/self_attention/key/kernel',
          'layer/self_attention/value/kernel',
          'layer/self_attention/attention_output/kernel',
          'layer/self_attention_layernorm/scale',
          'layer/feedforward_intermediate_dense/kernel',
          'layer/feedforward_gate_dense/kernel',
          'layer/feedforward_output_dense/kernel',
          'layer/feedforward_layernorm/scale',
        ],
      },
    ],
  ],
  RMSNormalization: [
    [
      'RMS over the last axis',
      {
        make: () => new RMSNormalization({epsilon: 1e-6}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 1,
        weightNames: ['layer/scale'],
      },
    ],
  ],
  SmolLM3RotaryEmbedding: [
    [
      'the inverse frequencies as a weight, the input unchanged',
      {
        make: () => new SmolLM3RotaryEmbedding({hiddenSize: D, numAttentionHeads: 2}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 0,
        weightNames: ['layer/inv_freq'],
      },
    ],
  ],
  SmolLM3Attention: [
    [
      'a layer without rope, 4 query heads over 2 key / value heads, no mask',
      {
        make: () => new SmolLM3Attention({...SMOLLM3, layerIdx: 1}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 4,
        weightNames: [
          'layer/query/kernel',
          'layer/key/kernel',
          'layer/value/kernel',
          'layer/attention_output/kernel',
          'layer/rotary_embedding/inv_freq',
        ],
      },
    ],
  ],
  SmolLM3DecoderLayer: [
    [
      'a rotary layer, causal, grouped-query, with a decoder padding mask',
      {
        make: () => new SmolLM3DecoderLayer({...SMOLLM3, layerIdx: 0, intermediateSize: 12}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        callKwargs: () => ({decoderPaddingMask: tf.tensor2d(PAD, [B, T], 'int32')}),
        trainableWeights: 9,
        weightNames: [
          'layer/self_attention/query/kernel',
          'layer/self_attention/key/kernel',
          'layer/self_attention/value/kernel',
          'layer/self_attention/attention_output/kernel',
          'layer/self_attention_layernorm/scale',
          'layer/feedforward_intermediate_dense/kernel',
          'layer/feedforward_gate_dense/kernel',
          'layer/feedforward_output_dense/kernel',
          'layer/feedforward_layernorm/scale',
          'layer/self_attention/rotary_embedding/inv_freq',
        ],
      },
    ],
  ],
  Gemma3RMSNormalization: [
    [
      'RMS over the last axis times 1 + scale',
      {
        make: () => new Gemma3RMSNormalization({epsilon: 1e-6}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 1,
        weightNames: ['layer/scale'],
      },
    ],
  ],
  CachedGemma3Attention: [
    [
      '4 query heads of 6 over 2 key / value heads, query / key norms, sliding window, soft cap',
      {
        make: () =>
          new CachedGemma3Attention({
            headDim: 6,
            numQueryHeads: 4,
            numKeyValueHeads: 2,
            useQueryKeyNorm: true,
            useSlidingWindowAttention: true,
            slidingWindowSize: 2,
            logitSoftCap: 5,
          }),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 6,
        weightNames: [
          'layer/query/kernel',
          'layer/key/kernel',
          'layer/value/kernel',
          'layer/query_norm/scale',
          'layer/key_norm/scale',
          'layer/attention_output/kernel',
        ],
      },
    ],
  ],
  Gemma3DecoderBlock: [
    [
      'causal, local, post norms, with a padding mask',
      {
        make: () =>
          new Gemma3DecoderBlock({
            hiddenDim: D,
            intermediateDim: 12,
            headDim: 4,
            numQueryHeads: 4,
            numKeyValueHeads: 2,
            useQueryKeyNorm: true,
            usePostAttentionNorm: true,
            usePostFfwNorm: true,
            gateDimReduction: 1,
            useSlidingWindowAttention: true,
            slidingWindowSize: 3,
          }),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        callKwargs: () => ({paddingMask: tf.tensor2d(PAD, [B, T], 'int32')}),
        trainableWeights: 13,
        weightNames: [
          'layer/pre_attention_norm/scale',
          'layer/attention/query/kernel',
          'layer/attention/key/kernel',
          'layer/attention/value/kernel',
          'layer/attention/query_norm/scale',
          'layer/attention/key_norm/scale',
          'layer/attention/attention_output/kernel',
          'layer/post_attention_norm/scale',
          'layer/pre_ffw_norm/scale',
          'layer/ffw_gating/kernel',
          'layer/ffw_gating_2/kernel',
          'layer/ffw_linear/kernel',
          'layer/post_ffw_norm/scale',
        ],
      },
    ],
  ],
  Gemma3EmbeddingScale: [
    [
      'times sqrt(width)',
      {
        make: () => new Gemma3EmbeddingScale({factor: Math.sqrt(D)}),
        inputShapes: [[B, T, D]],
        outputShape: [B, T, D],
        trainableWeights: 0,
      },
    ],
  ],
  Gemma3MeanPooling: [
    [
      'the mean over a padding mask',
      {
        make: () => new Gemma3MeanPooling(),
        inputShapes: [
          [B, T, D],
          [B, T],
        ],
        inputDtypes: ['float32', 'int32'],
        makeInputs: () => [
          tf.randomNormal([B, T, D], 0, 1, 'float32', 7),
          tf.tensor2d(PAD, [B, T], 'int32'),
        ],
        outputShape: [B, D],
        trainableWeights: 0,
      },
    ],
  ],
  UnitNormalization: [
    [
      'unit length over the last axis',
      {
        make: () => new UnitNormalization(),
        inputShapes: [[B, D]],
        outputShape: [B, D],
        trainableWeights: 0,
      },
    ],
  ],
};

/** SmolLM3's attention options of the harness cases (width D, a rotary and a no-rope layer). */
const SMOLLM3 = {
  hiddenSize: D,
  numAttentionHeads: 4,
  numKeyValueHeads: 2,
  ropeLayerEnabledList: [true, false],
  layerTypes: ['full_attention', 'full_attention'],
};
