/**
 * No per-step work on constants: during the decode steps of `generate` with the key / value cache
 * (each step one new position), no kernel copies a weight (a transpose of the tied embedding
 * table, the per-call kernel transpose of tfjs' Dense on 3-D input, a kernel scaled per call), no
 * Transpose runs at all, and no weight-sized tensor is uploaded; the tokens are those of
 * recomputing the prefix (`useCache: false`). Kernel calls are recorded with their inputs' and
 * outputs' data ids (helpers/kernel_calls.ts), on small GPT-style models: a tied
 * ReversibleEmbedding with keras-hub TransformerDecoders, and TokenAndPositionEmbedding with
 * MultiHeadAttention blocks whose feed-forward and logits are EinsumDense, or tfjs' Dense (fed
 * rows `[batch * t, features]` by the step, generate/layer_rules.ts).
 */
import * as tf from '@tensorflow/tfjs';

import {
  EinsumDense,
  generate,
  MultiHeadAttention,
  PositionEmbedding,
  ReversibleEmbedding,
  TokenAndPositionEmbedding,
  TransformerDecoder,
} from '../../src';
import {GraphStepper} from '../../src/generate/graph_step';
import {describeBackends} from '../helpers/backends';
import {KernelCall, recordKernels, weightCopies} from '../helpers/kernel_calls';
import {withSimdKernels} from '../helpers/kernels';

const V = 97;
const D = 32;
const MAX = 12;
type S = tf.SymbolicTensor;

function randomize(model: tf.LayersModel): tf.LayersModel {
  model.setWeights(
    model.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.5, 'float32', 11 + i)),
  );
  return model;
}

/** ReversibleEmbedding (tied) + PositionEmbedding, two TransformerDecoders, tied logits. */
function tiedDecoderModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const emb = new ReversibleEmbedding({inputDim: V, outputDim: D});
  const tokens = emb.apply(ids) as S;
  const pos = new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S;
  let x = tf.layers.add().apply([tokens, pos]) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D, numHeads: 4}).apply(x) as S;
  x = new TransformerDecoder({
    intermediateDim: 2 * D,
    numHeads: 2,
    normalizeFirst: true,
    activation: 'gelu',
  }).apply(x) as S;
  return randomize(tf.model({inputs: ids, outputs: emb.apply(x) as S}));
}

/** TokenAndPositionEmbedding, two MultiHeadAttention blocks with EinsumDense feed-forward and logits. */
function mhaEinsumModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
  }).apply(ids) as S;
  const dense = (units: number, activation: 'relu' | 'linear') =>
    new EinsumDense({
      equation: 'abc,cd->abd',
      outputShape: [null, units],
      biasAxes: 'd',
      activation,
    });
  for (let i = 0; i < 2; i++) {
    const att = new MultiHeadAttention({numHeads: 4, keyDim: 8, useCausalMask: true});
    const a = att.apply(x) as S;
    const h = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, a])) as S;
    const f = dense(D, 'linear').apply(dense(2 * D, 'relu').apply(h) as S) as S;
    x = tf.layers.layerNormalization().apply(tf.layers.add().apply([h, f])) as S;
  }
  return randomize(tf.model({inputs: ids, outputs: dense(V, 'linear').apply(x) as S}));
}

/** tfjs' Embedding + PositionEmbedding, MultiHeadAttention blocks with tfjs Dense feed-forward and logits. */
function mhaDenseModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const tokens = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
  let x = tf.layers
    .add()
    .apply([tokens, new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S]) as S;
  for (let i = 0; i < 2; i++) {
    const a = new MultiHeadAttention({numHeads: 4, keyDim: 8, useCausalMask: true}).apply(x) as S;
    const h = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, a])) as S;
    const f = tf.layers.dense({units: 2 * D, activation: 'relu'}).apply(h) as S;
    const g = tf.layers.dense({units: D}).apply(f) as S;
    x = tf.layers.layerNormalization().apply(tf.layers.add().apply([h, g])) as S;
  }
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S}));
}

const MODELS: Array<[string, () => tf.LayersModel]> = [
  ['tied ReversibleEmbedding + 2 TransformerDecoders', tiedDecoderModel],
  ['TokenAndPositionEmbedding + 2 MultiHeadAttention blocks, EinsumDense', mhaEinsumModel],
  ['Embedding + PositionEmbedding + 2 MultiHeadAttention blocks, tfjs Dense', mhaDenseModel],
];

const PROMPTS = [
  [5, 3, 8, 1],
  [7, 2, 9, 4],
];
/** SIMD module on / off; two rows, and one (a one-row product takes tfjs' kernel on wasm). */
const CASES: Array<[boolean, number[][]]> = [
  [true, PROMPTS],
  [false, PROMPTS],
  [true, PROMPTS.slice(0, 1)],
  [false, PROMPTS.slice(0, 1)],
];

/** The ids generate gives, greedy. */
async function tokens(
  model: tf.LayersModel,
  prompts: number[][],
  useCache: boolean,
): Promise<number[][]> {
  const out = await generate(model, prompts, {maxLength: MAX, useCache});
  const rows = out.arraySync();
  out.dispose();
  return rows;
}

/**
 * Runs cached generation, recording the kernel calls and uploads of every one-position step
 * (the decode steps after the prefill) and how many there were.
 */
async function decodeSteps(
  model: tf.LayersModel,
  prompts: number[][],
): Promise<{calls: KernelCall[]; uploads: number[]; steps: number; rows: number[][]}> {
  const recorder = recordKernels();
  const step = GraphStepper.prototype.step;
  let steps = 0;
  const spy = jest.spyOn(GraphStepper.prototype, 'step').mockImplementation(function (
    this: GraphStepper,
    ids: tf.Tensor2D,
  ) {
    const decoding = ids.shape[1] === 1;
    if (decoding) steps++;
    recorder.recording = decoding;
    try {
      return step.call(this, ids);
    } finally {
      recorder.recording = false;
    }
  });
  try {
    const rows = await tokens(model, prompts, true);
    return {calls: recorder.calls, uploads: recorder.uploads, steps, rows};
  } finally {
    spy.mockRestore();
    recorder.restore();
  }
}

const PRODUCTS = ['BatchMatMul', '_FusedMatMul', 'TfjsAttentionMatMul'];

describeBackends('decode steps do no work on constants', () => {
  // the eager stepper's kernels (the compiled step runs none: compiled_step.test.ts)
  beforeAll(() => tf.env().set('TFJS_ATTENTION_COMPILED_STEP', false));
  afterAll(() => tf.env().set('TFJS_ATTENTION_COMPILED_STEP', true));
  for (const [name, make] of MODELS) {
    describe(name, () => {
      let model: tf.LayersModel;
      beforeAll(() => {
        model = make();
      });
      afterAll(() => model.dispose());

      for (const [simd, prompts] of CASES) {
        // without the SIMD module (not loaded, or no SIMD) the products take tfjs' kernels
        const how = `${simd ? 'own SIMD products' : 'without the SIMD module'}, batch ${prompts.length}`;
        it(`${how}: no weight is copied, transposed or uploaded in a decode step; tokens as recomputing`, () =>
          withSimdKernels(simd, async () => {
            const before = tf.memory().numTensors;
            const {calls, uploads, steps, rows} = await decodeSteps(model, prompts);
            expect(tf.memory().numTensors).toBe(before);
            const weights = model.weights.map((w) => w.read());
            // the recording saw the steps, and their products reading the weights
            expect(steps).toBe(MAX - PROMPTS[0].length);
            const ids = new Set(weights.map((w) => w.dataId));
            const weightProducts = calls.filter(
              (c) => PRODUCTS.includes(c.name) && c.inputs.some((x) => ids.has(x.dataId)),
            );
            expect(weightProducts.length).toBeGreaterThanOrEqual(steps * 5);
            expect(weightCopies(calls, weights)).toEqual([]);
            const smallest = Math.min(...weights.filter((w) => w.rank >= 2).map((w) => w.size));
            expect(uploads.filter((n) => n >= smallest)).toEqual([]);
            expect(rows).toEqual(await tokens(model, prompts, false));
          }));
      }
    });
  }

  it('the recorder finds a transposed copy, a scaled copy and a re-upload of a weight', () => {
    const w = tf.variable(tf.randomNormal([D, V]));
    const recorder = recordKernels();
    recorder.recording = true;
    try {
      tf.tidy(() => tf.matMul(tf.ones([1, V]), tf.transpose(w)));
      tf.tidy(() => tf.mul(w, 2));
      tf.tidy(() => tf.tensor(w.dataSync(), w.shape)); // a re-upload
    } finally {
      recorder.restore();
    }
    expect(weightCopies(recorder.calls, [w]).map((c) => c.split('(')[0])).toEqual([
      'Transpose',
      'Multiply',
    ]);
    expect(recorder.uploads).toContain(D * V);
    w.dispose();
  });
});
