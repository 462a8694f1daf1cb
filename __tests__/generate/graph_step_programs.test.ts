/**
 * How many programs one decoding step of the eager stepper (generate/graph_step.ts, the cached
 * step of webgl and webgpu) dispatches: one new token, batch 1, after the prompt, with the
 * compiled step switched off (TFJS_ATTENTION_COMPILED_STEP) and the package's own cpu / wasm
 * kernels off (TFJS_ATTENTION_OWN_KERNELS: webgl and webgpu have none of them).
 *
 * Counted on tfjs' cpu backend in Node: the eager stepper calls the same tfjs ops, hence the same
 * kernels, on cpu as on webgl / webgpu (the layers choose a path by backend only where the
 * package's own kernels run, switched off here), and on webgl / webgpu every kernel is one
 * shader program, except the view kernels (Reshape, ExpandDims, Squeeze, Identity: the same data
 * under another shape, no program), which are not counted.
 *
 * Models: keras-hub's GPT2CausalLM (the committed fixture: two TransformerDecoders, tied
 * ReversibleEmbedding logits, a padding-mask input), a tied ReversibleEmbedding with
 * TransformerDecoders, TokenAndPositionEmbedding with MultiHeadAttention blocks whose
 * feed-forward and logits are EinsumDense, and with tfjs' Dense. The tokens of greedy generation
 * with the eager stepper equal those of recomputing the prefix (`useCache: false`) and of the
 * compiled step; no tensor is left behind. The pieces that cut programs are checked against plain
 * loops: layer normalization without tiles, the bias inside the product, the cache written by a
 * scatter (a few rows) or by split and concatenation (more). Without the package's kernels, on
 * every backend: tfjs' LayerNormalization in fewer kernels against tfjs' layer, the unit-axis
 * permute as a reshape, training's loss and gradients, and the eager stepper's logits against the
 * whole prefix.
 */
import * as tf from '@tensorflow/tfjs';

import {
  buildKerasHubModel,
  EinsumDense,
  generate,
  MultiHeadAttention,
  PositionEmbedding,
  ReversibleEmbedding,
  TokenAndPositionEmbedding,
  TransformerDecoder,
  TransformerEncoder,
} from '../../src';
import {COMPILED_STEP, OWN_KERNELS} from '../../src/kernels/flags';
import {GraphStepper} from '../../src/generate/graph_step';
import {fusedBiasProduct, layerNormLastAxis} from '../../src/layers/core/fused_ops';
import {describeBackends, expectNoLeak, useBackend} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {randTensor} from '../helpers/data';
import {eagerLogits, maxDiff, planOf} from '../helpers/eager_logits';
import {recordKernels} from '../helpers/kernel_calls';
import {withFlags} from '../helpers/kernels';
import {hubFixture} from '../helpers/hub_families_fixture';

const V = 97;
const D = 32;
const MAX = 20;
type S = tf.SymbolicTensor;

/** Kernels that give the same data under another shape: no program on webgl / webgpu. */
const VIEWS = new Set(['Reshape', 'ExpandDims', 'Squeeze', 'Identity']);

function randomize(model: tf.LayersModel): tf.LayersModel {
  model.setWeights(
    model.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.5, 'float32', 11 + i)),
  );
  return model;
}

/** keras-hub's GPT2CausalLM of the committed fixture (vocabulary 64, hidden 32, 2 layers). */
function gpt2Model(): tf.LayersModel {
  const fx = hubFixture('gpt2');
  return buildKerasHubModel('GPT2CausalLM', fx.task, fx.taskWeights);
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

/**
 * [name, model, prompt, programs of one decode step at most]; in the comment, the count before
 * the eager step's reductions (bias in the product, layer norm untiled, the heads of one position
 * reshaped, the cache written by one scatter, the last logits unsliced).
 */
const MODELS: Array<[string, () => tf.LayersModel, number[], number]> = [
  // before: 136 (Tile 24, Add 19, BatchMatMul 13, Multiply 12, Mean 10, Cast 8, Transpose 8, ...)
  ['keras-hub GPT2CausalLM (fixture)', gpt2Model, [5, 3, 8, 1], 94],
  // before: 114
  ['tied ReversibleEmbedding + 2 TransformerDecoders', tiedDecoderModel, [5, 3, 8, 1], 78],
  // before: 115
  [
    'TokenAndPositionEmbedding + 2 MultiHeadAttention blocks, EinsumDense',
    mhaEinsumModel,
    [5, 3, 8, 1],
    75,
  ],
  // before: 108
  [
    'Embedding + PositionEmbedding + 2 MultiHeadAttention blocks, tfjs Dense',
    mhaDenseModel,
    [5, 3, 8, 1],
    73,
  ],
];

/** The kernel names of each one-position step of greedy cached generation, and its tokens. */
async function decodeSteps(
  model: tf.LayersModel,
  prompt: number[],
): Promise<{steps: string[][]; rows: number[][]}> {
  const recorder = recordKernels();
  const step = GraphStepper.prototype.step;
  const steps: string[][] = [];
  const spy = jest.spyOn(GraphStepper.prototype, 'step').mockImplementation(function (
    this: GraphStepper,
    ids: tf.Tensor2D,
    rows?: readonly (readonly number[])[] | null,
  ) {
    const decoding = ids.shape[1] === 1;
    recorder.calls.length = 0;
    recorder.recording = decoding;
    try {
      return step.call(this, ids, rows);
    } finally {
      recorder.recording = false;
      if (decoding) steps.push(recorder.calls.map((c) => c.name));
    }
  });
  try {
    const out = await generate(model, [prompt], {maxLength: MAX, useCache: true});
    const rows = (await out.array()) as number[][];
    out.dispose();
    return {steps, rows};
  } finally {
    spy.mockRestore();
    recorder.restore();
  }
}

const programs = (names: string[]) => names.filter((n) => !VIEWS.has(n));

function histogram(names: string[]): Record<string, number> {
  const h: Record<string, number> = {};
  for (const n of programs(names)) h[n] = (h[n] ?? 0) + 1;
  return h;
}

async function tokens(model: tf.LayersModel, prompt: number[], useCache: boolean) {
  const out = await generate(model, [prompt], {maxLength: MAX, useCache});
  const rows = (await out.array()) as number[][];
  out.dispose();
  return rows;
}

describe('programs of one eager decoding step [cpu, as webgl / webgpu]', () => {
  beforeAll(() => useBackend('cpu'));

  for (const [name, make, prompt, most] of MODELS) {
    describe(name, () => {
      let model: tf.LayersModel;
      beforeAll(() => {
        model = make();
      });
      afterAll(() => model.dispose());

      it(`one decode step dispatches at most ${most} programs; tokens as recomputing and as the compiled step; no tensor left`, async () => {
        const eager = await withFlags({[COMPILED_STEP]: false, [OWN_KERNELS]: false}, async () => {
          const before = tf.memory().numTensors;
          const run = await decodeSteps(model, prompt);
          expect(tf.memory().numTensors).toBe(before);
          return run;
        });
        const {steps, rows} = eager;
        // every decode step after the prompt was recorded, and they all dispatch the same kernels
        expect(steps.length).toBe(MAX - prompt.length);
        for (const s of steps) expect(s).toEqual(steps[0]);
        if (process.env.EAGER_STEP_HISTOGRAM) {
          console.log(
            `${name}: ${programs(steps[0]).length} programs, ${steps[0].length} kernels\n` +
              JSON.stringify(histogram(steps[0])),
          );
        }
        expect(programs(steps[0]).length).toBeLessThanOrEqual(most);
        // the same tokens recomputing the prefix (useCache: false), and with the compiled step
        expect(rows[0].length).toBe(MAX);
        const recomputed = await withFlags({[OWN_KERNELS]: false}, () =>
          tokens(model, prompt, false),
        );
        expect(rows).toEqual(recomputed);
        expect(rows).toEqual(await tokens(model, prompt, true)); // compiled (cpu)
      });
    });
  }
});

/** Layer normalization over the last axis, in plain loops (float64). */
function layerNormLoops(x: number[][], gamma: number[], beta: number[], eps: number): number[][] {
  return x.map((row) => {
    const mean = row.reduce((p, v) => p + v, 0) / row.length;
    const variance = row.reduce((p, v) => p + (v - mean) ** 2, 0) / row.length;
    return row.map((v, i) => ((v - mean) / Math.sqrt(variance + eps)) * gamma[i] + beta[i]);
  });
}

/** Kernel names `f` runs. */
function kernelsOf(f: () => tf.Tensor): string[] {
  const recorder = recordKernels();
  recorder.recording = true;
  try {
    f().dispose();
  } finally {
    recorder.restore();
  }
  return recorder.calls.map((c) => c.name);
}

describe("the eager step's pieces against plain loops [cpu]", () => {
  beforeAll(() => useBackend('cpu'));
  const Dm = 6;

  it("layer normalization untiled: plain loops within 1e-5, tfjs' LayerNormalization to the bit, fewer kernels", async () => {
    const weights = [randTensor([Dm], 5, 1), randTensor([Dm], 6, 1)];
    const [gamma, beta] = weights.map((w) => Array.from(w.dataSync()));
    /** A built LayerNormalization (epsilon 1e-3) for inputs of this rank. */
    const layerNorm = (rank: number) => {
      const layer = tf.layers.layerNormalization({epsilon: 1e-3});
      layer.build([...new Array<null>(rank - 1).fill(null), Dm]);
      layer.setWeights(weights);
      return layer;
    };
    const ln = layerNorm(2);
    for (const shape of [
      [1, Dm],
      [3, Dm],
      [2, 3, Dm],
      [1, 1, Dm],
    ]) {
      const x = randTensor(shape, 7 + shape.length, 2);
      const layer = layerNorm(shape.length);
      const before = tf.memory().numTensors;
      const y = layerNormLastAxis(layer, x) as tf.Tensor;
      expect(y).not.toBeNull();
      expect(y.shape).toEqual(shape);
      const flat = tf.reshape(x, [-1, Dm]);
      const rows = (await flat.array()) as number[][];
      const yRows = tf.reshape(y, [-1, Dm]);
      expectClose(yRows, layerNormLoops(rows, gamma, beta, 1e-3), 1e-5, 1e-5);
      tf.dispose([flat, yRows]);
      const theirs = layer.apply(x) as tf.Tensor;
      expect(Array.from(y.dataSync())).toEqual(Array.from(theirs.dataSync()));
      tf.dispose([y, theirs]);
      expect(tf.memory().numTensors).toBe(before);
      // one row: no Tile at all; several: the mean and variance only (tfjs' layer tiles four)
      const tiles = kernelsOf(() => layerNormLastAxis(layer, x) as tf.Tensor).filter(
        (k) => k === 'Tile',
      );
      expect(tiles.length).toBe(x.size === Dm ? 0 : 2);
      x.dispose();
      layer.weights.forEach((w) => w.dispose());
    }
    weights.forEach((w) => w.dispose());
    // while a gradient is recorded (training), and over another axis: the layer itself
    const x = randTensor([2, Dm], 9);
    tf.grad((z: tf.Tensor) => {
      expect(layerNormLastAxis(ln, z)).toBeNull();
      return tf.sum(z);
    })(x).dispose();
    const other = tf.layers.layerNormalization({axis: 1});
    other.build([null, 3, Dm]);
    expect(layerNormLastAxis(other, randTensor([2, 3, Dm], 3))).toBeNull();
    expect(layerNormLastAxis(tf.layers.dense({units: 2}), x)).toBeNull();
    x.dispose();
  });

  it('bias inside the product: plain loops within 1e-5, one _FusedMatMul; not where the package has its own kernels', async () => {
    const rows = randTensor([3, 5], 1);
    const w = randTensor([5, 4], 2);
    const b = randTensor([4], 3);
    const [r, wv, bv] = [rows, w, b].map((t) => Array.from(t.dataSync()));
    const loops = (relu: boolean) =>
      Array.from({length: 3}, (_, i) =>
        Array.from({length: 4}, (_, j) => {
          let s = bv[j];
          for (let k = 0; k < 5; k++) s += r[i * 5 + k] * wv[k * 4 + j];
          return relu ? Math.max(0, s) : s;
        }),
      );
    await withFlags({[OWN_KERNELS]: false}, async () => {
      for (const act of ['linear', 'relu']) {
        const y = fusedBiasProduct(rows, w, b, act) as tf.Tensor;
        expectClose(y, loops(act === 'relu'), 1e-5, 1e-5);
        y.dispose();
        const ks = kernelsOf(() => fusedBiasProduct(rows, w, b, act) as tf.Tensor);
        expect(programs(ks)).toEqual(['_FusedMatMul']);
      }
      expect(fusedBiasProduct(rows, w, null)).toBeNull();
    });
    await withFlags({[OWN_KERNELS]: true}, async () => {
      expect(fusedBiasProduct(rows, w, b)).toBeNull(); // the package's SIMD product and bias
    });
    tf.dispose([rows, w, b]);
  });

  it("a transformer block's fused feed-forward trains with every activation (the gradients of the package's own path)", async () => {
    // the feed-forward through tfjs' fused product (own kernels off, as on webgl / webgpu), with
    // the activation inside it or after it, against the package's own path: the same loss and
    // gradients (tfjs' fused product differentiates only linear and relu itself, and runs unfused
    // while a gradient is recorded for the others)
    for (const activation of ['relu', 'sigmoid', 'elu', 'relu6', 'gelu']) {
      const block = new TransformerEncoder({intermediateDim: 8, numHeads: 2, activation});
      const x = randTensor([2, 3, 4], 5);
      block.apply(x);
      block.setWeights(block.getWeights().map((w, i) => randTensor(w.shape, 40 + i, 0.5)));
      const grads = () => {
        const {value, grads: g} = tf.variableGrads(
          () => tf.sum(tf.square(block.apply(x) as tf.Tensor)) as tf.Scalar,
          block.trainableWeights.map((w) => (w as unknown as {val: tf.Variable}).val),
        );
        const out = [value, ...Object.values(g)].map((t) => Array.from(t.dataSync()));
        tf.dispose([value, ...Object.values(g)]);
        return out;
      };
      const fused = await withFlags({[OWN_KERNELS]: false}, async () => grads());
      const own = await withFlags({[OWN_KERNELS]: true}, async () => grads());
      expect([activation, fused.length]).toEqual([activation, own.length]);
      fused.forEach((g, i) => expectClose(tf.tensor(g), tf.tensor(own[i]), 1e-4, 1e-4));
      x.dispose();
      block.weights.forEach((w) => w.dispose());
    }
  });

  for (const [t, how] of [
    [2, 'one scatter'],
    [9, 'split and concatenation (more than 16 rows)'],
  ] as Array<[number, string]>) {
    it(`the cache written at positions 1 .. ${t} by ${how}: this call's keys and values there, the rest untouched`, () => {
      tf.tidy(() => {
        const x = randTensor([1, t, 8], 4);
        const mha = new MultiHeadAttention({numHeads: 2, keyDim: 4, useCausalMask: true});
        mha.apply(x);
        mha.setWeights(mha.getWeights().map((w, i) => randTensor(w.shape, 20 + i, 0.5)));
        const S = t + 2;
        const cache0 = tf.fill([1, 2, S, 2, 4], 7);
        const recorder = recordKernels();
        recorder.recording = true;
        let cache: tf.Tensor;
        try {
          [, cache] = mha.apply(x, {cache: cache0, cacheUpdateIndex: 1}) as tf.Tensor[];
        } finally {
          recorder.restore();
        }
        const scatters = recorder.calls.filter((c) => c.name === 'TensorScatterUpdate');
        expect(scatters.length).toBe(t === 2 ? 1 : 0);
        const c = cache.arraySync() as number[][][][][];
        const k = (mha.keyDense as EinsumDense).apply(x) as tf.Tensor; // [1, t, 2, 4]
        const v = (mha.valueDense as EinsumDense).apply(x) as tf.Tensor;
        for (const kv of [0, 1]) {
          expect(c[0][kv][0].flat()).toEqual(new Array(8).fill(7));
          expect(c[0][kv][S - 1].flat()).toEqual(new Array(8).fill(7));
        }
        expectClose(tf.tensor(c[0][0].slice(1, 1 + t)), tf.squeeze(k, [0]), 1e-6, 1e-6);
        expectClose(tf.tensor(c[0][1].slice(1, 1 + t)), tf.squeeze(v, [0]), 1e-6, 1e-6);
      });
    });
  }
});

describeBackends('the fewer-program paths, values and gradients', (backend) => {
  afterEach(() => tf.env().set('TFJS_ATTENTION_OWN_KERNELS', true));

  it("tfjs' LayerNormalization in fewer kernels is tfjs' layer to the bit: center / scale off, another epsilon, ranks 2 to 4, one row and several; other axes left to the layer", () => {
    const cases: Array<[string, tf.layers.Layer, number[], boolean]> = [
      ['default', tf.layers.layerNormalization(), [3, 5, 7], true],
      ['one row', tf.layers.layerNormalization(), [1, 1, 7], true],
      ['center off', tf.layers.layerNormalization({center: false}), [2, 3, 7], true],
      ['scale off', tf.layers.layerNormalization({scale: false}), [2, 3, 7], true],
      ['both off', tf.layers.layerNormalization({center: false, scale: false}), [1, 1, 9], true],
      ['epsilon 0.5', tf.layers.layerNormalization({epsilon: 0.5}), [2, 7], true],
      ['rank 4', tf.layers.layerNormalization({axis: 3}), [2, 2, 3, 5], true],
      ['axis 1 of rank 3', tf.layers.layerNormalization({axis: 1}), [2, 4, 3], false],
      ['axes 1, 2', tf.layers.layerNormalization({axis: [1, 2]}), [2, 4, 3], false],
    ];
    for (const [name, layer, shape, taken] of cases) {
      tf.tidy(() => {
        const x = tf.add(tf.mul(randTensor(shape, 31), 3), 1.5);
        layer.apply(x); // build
        layer.setWeights(layer.getWeights().map((w, i) => randTensor(w.shape, 40 + i)));
        const reference = layer.apply(x) as tf.Tensor;
        const before = tf.memory().numTensors;
        const fewer = layerNormLastAxis(layer, x);
        expect([name, fewer != null]).toEqual([name, taken]);
        if (fewer != null) {
          expect([name, Array.from(fewer.dataSync())]).toEqual([
            name,
            Array.from(reference.dataSync()),
          ]);
          expect(tf.memory().numTensors).toBe(before + 1);
        }
      });
      layer.dispose();
    }
  });

  it('MultiHeadAttention over attention axes: one query position (a unit-axis permute as a reshape) is the row of the whole query', () => {
    // [B, T, C, D] attending over axis 1 (C batch-like), and over axis 2 (T batch-like)
    for (const attentionAxes of [[1], [2]]) {
      tf.tidy(() => {
        const mha = new MultiHeadAttention({numHeads: 3, keyDim: 2, attentionAxes});
        const q = randTensor([2, 4, 3, 5], 51);
        const v = randTensor([2, 4, 3, 5], 52);
        mha.apply([q, v]);
        mha.setWeights(mha.getWeights().map((w, i) => randTensor(w.shape, 60 + i, 0.5)));
        const whole = mha.apply([q, v]) as tf.Tensor; // [2, 4, 3, 5]
        const axis = attentionAxes[0];
        for (let i = 0; i < q.shape[axis]; i++) {
          const begin = [0, 0, 0, 0];
          begin[axis] = i;
          const size = [...q.shape];
          size[axis] = 1;
          const row = mha.apply([tf.slice(q, begin, size), v]) as tf.Tensor;
          expectClose(row, tf.slice(whole, begin, size), 1e-5, 1e-5);
        }
        // one position of one batch-like row, and batch 1 with one head
        const one = new MultiHeadAttention({numHeads: 1, keyDim: 4});
        const x = randTensor([1, 3, 5], 53);
        const all = one.apply(x) as tf.Tensor;
        const first = one.apply([tf.slice(x, [0, 2, 0], [1, 1, 5]), x]) as tf.Tensor;
        expectClose(first, tf.slice(all, [0, 2, 0], [1, 1, 5]), 1e-5, 1e-5);
        mha.dispose();
        one.dispose();
      });
    }
  });

  it("training a TransformerEncoder and an EinsumDense with a bias over [heads, width]: the loss and gradients without the package's kernels (tfjs' fused product) are those with them", async () => {
    const D = 8;
    const build = () => {
      const input = tf.input({shape: [5, D]});
      let x = new TransformerEncoder({intermediateDim: 12, numHeads: 2, activation: 'relu'}).apply(
        input,
      ) as S;
      x = new TransformerEncoder({
        intermediateDim: 6,
        numHeads: 2,
        normalizeFirst: true,
        activation: 'gelu',
      }).apply(x) as S;
      x = new EinsumDense({
        equation: 'abc,cde->abde',
        outputShape: [null, 2, 3],
        biasAxes: 'de',
        activation: 'tanh',
      }).apply(x) as S;
      const model = tf.model({inputs: input, outputs: tf.layers.flatten().apply(x) as S});
      model.weights.forEach((w, i) => {
        const t = randTensor(w.shape as number[], 90 + i, 0.4);
        w.write(t);
        t.dispose();
      });
      return model;
    };
    const before = tf.memory().numTensors;
    const x = randTensor([3, 5, D], 71);
    const y = randTensor([3, 30], 72);
    const run = async (own: boolean) => {
      tf.env().set('TFJS_ATTENTION_OWN_KERNELS', own);
      const model = build();
      const {value, grads} = tf.variableGrads(() =>
        tf.losses.meanSquaredError(y, model.apply(x, {training: false}) as tf.Tensor),
      );
      const out = {
        loss: value.dataSync()[0],
        grads: model.trainableWeights.map((w) => {
          const g = grads[w.originalName] ?? grads[w.name];
          return Array.from(g.dataSync());
        }),
      };
      tf.dispose([value, ...Object.values(grads)]);
      // and three steps of fit: the weights trained
      const optimizer = tf.train.sgd(0.05);
      model.compile({optimizer, loss: 'meanSquaredError'});
      const history = await model.fit(x, y, {epochs: 3, batchSize: 3, verbose: 0});
      const trained = model.getWeights().map((w) => Array.from(w.dataSync()));
      model.dispose();
      optimizer.dispose();
      return {out, losses: history.history.loss as number[], trained};
    };
    const own = await run(true);
    const fused = await run(false);
    tf.env().set('TFJS_ATTENTION_OWN_KERNELS', true);
    tf.dispose([x, y]);
    expect(Math.abs(own.out.loss - fused.out.loss)).toBeLessThan(1e-6);
    expect(own.out.grads.length).toBe(fused.out.grads.length);
    own.out.grads.forEach((g, i) => {
      const m = Math.max(...g.map((v, j) => Math.abs(v - fused.out.grads[i][j])));
      expect([i, m < 1e-5]).toEqual([i, true]);
    });
    own.losses.forEach((l, i) => expect(Math.abs(l - fused.losses[i])).toBeLessThan(1e-5));
    expect(own.losses[2]).toBeLessThan(own.losses[0]); // it trains
    own.trained.forEach((w, i) => {
      const m = Math.max(...w.map((v, j) => Math.abs(v - fused.trained[i][j])));
      expect([i, m < 1e-5]).toEqual([i, true]);
    });
    expect(tf.memory().numTensors).toBe(before);
    void backend;
  });
});

describeBackends("the eager stepper without the package's kernels", (backend) => {
  afterEach(() => {
    tf.env().set('TFJS_ATTENTION_OWN_KERNELS', true);
    tf.env().set('TFJS_ATTENTION_COMPILED_STEP', true);
  });

  it("a LayerNormalization shared by two nodes, one without center and with epsilon 0.1: each step's logits are the whole prefix's, and generate's tokens those of recomputing", async () => {
    const [V, D, MAX] = [23, 10, 14];
    const ids = tf.input({shape: [null], dtype: 'int32'});
    const tokens = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
    let x = tf.layers
      .add()
      .apply([tokens, new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S]) as S;
    const shared = tf.layers.layerNormalization();
    const att = new MultiHeadAttention({numHeads: 2, keyDim: 5, useCausalMask: true}).apply(
      shared.apply(x) as S,
    ) as S;
    x = tf.layers.add().apply([x, att]) as S;
    x = shared.apply(x) as S; // the same layer, a second node
    x = tf.layers.layerNormalization({center: false, epsilon: 0.1}).apply(x) as S;
    const model = tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S});
    model.weights.forEach((w, i) => {
      const t = randTensor(w.shape as number[], 120 + i, 0.6);
      w.write(t);
      t.dispose();
    });
    try {
      tf.env().set('TFJS_ATTENTION_OWN_KERNELS', false);
      const rows = [
        [3, 7, 1, 9, 4, 12, 5, 8, 2, 6, 11, 10, 13, 17],
        [5, 2, 14, 8, 21, 3, 9, 1, 17, 4, 13, 7, 22, 6],
      ];
      const lengths = [3, 6];
      const eager = eagerLogits(planOf(model), rows, lengths, MAX);
      // the reference: the whole prefix through the model, its last position
      const whole: Float32Array[][] = [];
      for (let index = Math.min(...lengths); index < MAX; index++) {
        whole.push(
          tf.tidy(() => {
            const prefix = tf.tensor2d(
              rows.map((r) => r.slice(0, index)),
              [2, index],
              'int32',
            );
            const y = model.apply(prefix) as tf.Tensor;
            const last = tf.slice(y, [0, index - 1, 0], [2, 1, V]).reshape([2, V]);
            return (last.arraySync() as number[][]).map((r) => Float32Array.from(r));
          }),
        );
      }
      const d = maxDiff(eager, whole);
      console.log(`eager stepper without own kernels [${backend}]: max |logits diff| ${d}`);
      expect(d).toBeLessThan(1e-5);
      tf.env().set('TFJS_ATTENTION_COMPILED_STEP', false);
      const prompts = rows.map((r) => r.slice(0, 6));
      const options = {maxLength: MAX, promptLengths: lengths};
      await expectNoLeak(async () => {
        const cached = await generate(model, prompts, {...options, useCache: true});
        const again = await generate(model, prompts, {...options, useCache: false});
        expect(await cached.array()).toEqual(await again.array());
        tf.dispose([cached, again]);
      });
    } finally {
      model.dispose();
    }
  });
});
