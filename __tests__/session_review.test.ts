/**
 * Attacks on the int8 kernels packed transposed (src/generate/step_memory.ts, the SIMD and the
 * JavaScript `packInt8T` / `denseInt8`) and on the eager step's fewer programs
 * (src/layers/core/fused_ops.ts, the cache's scatter write, the unit-axis permute): shapes the
 * other tests do not reach. References: plain loops over the tensors' values, the other path
 * (recomputing the prefix, the eager stepper, the package's own kernels), tfjs' own layers.
 */
import * as tf from '@tensorflow/tfjs';

import {
  CachedMultiHeadAttention,
  EinsumDense,
  generate,
  GroupQueryAttention,
  MultiHeadAttention,
  PositionEmbedding,
  quantize,
  ReversibleEmbedding,
  TransformerDecoder,
  TransformerEncoder,
} from '../src';
import {layerNormLastAxis} from '../src/layers/core/fused_ops';
import {isInt8Layer} from '../src/layers/core/quantization';
import {CompositeLayer} from '../src/layers/engine/composite_layer';
import {compiledStep, lastCompiledRun, lastCompileRefusal} from '../src/generate/compiled_step';
import type {DecodeStep} from '../src/generate/decode_loop';
import {planCachedDecoding, StepPlan} from '../src/generate/graph_plan';
import {GraphStepper} from '../src/generate/graph_step';
import {chooseStepKernels} from '../src/generate/step_kernels_choice';
import {stepMemory, type StepMemory} from '../src/generate/step_memory';
import {stepKernelsReady} from '../src/kernels/step_kernels';
import {describeBackends, expectNoLeak} from './helpers/backends';
import {expectClose} from './helpers/close';
import {randTensor} from './helpers/data';

type S = tf.SymbolicTensor;

/** Whole numbers in [-127, 127], not periodic in any small stride. */
const ints = (size: number, seed: number) =>
  Float32Array.from({length: size}, (_, i) => ((i * 7919 + seed * 104729) % 255) - 127);

/** Positions where the packed bytes differ from `[n, k]`, the transpose of `values` `[k, n]`. */
function transposeErrors(got: Int8Array, values: Float32Array, k: number, n: number): number {
  let wrong = 0;
  for (let p = 0; p < k; p++) {
    for (let j = 0; j < n; j++) if (got[j * k + p] !== values[p * n + j]) wrong++;
  }
  return wrong;
}

describeBackends('session review: int8 packing', (backend) => {
  let memory: StepMemory;
  beforeAll(async () => {
    await stepKernelsReady();
  });
  beforeEach(() => {
    const m = stepMemory();
    if (m.memory == null) throw new Error(`no step memory on ${backend}: ${m.reason}`);
    memory = m.memory;
  });
  afterEach(() => {
    memory.dispose();
    tf.env().set('TFJS_ATTENTION_SIMD', true);
  });

  const bytes = (at: number, size: number) => new Int8Array(memory.memory.buffer, at, size);

  for (const simd of [true, false]) {
    it(`packs odd kernels transposed: n past one block of 2^18, k < 16, n = 1, k = 1, a small weight then a large then a small (simd ${simd})`, () => {
      tf.env().set('TFJS_ATTENTION_SIMD', simd);
      const K = chooseStepKernels(memory.memory, (b) => memory.alloc(b));
      const shapes: Array<[number, number]> = [
        [3, 5], // a small weight first: the scratch is sized for it
        [37, 20001], // n > 2^18 / 16: 16 rows a block (320,016 values), more than the scratch
        [7, 40000], // k < 16, n large: one ragged block
        [24, 1], // n = 1
        [1, 24], // k = 1
        [17, 33], // both ragged past a tile
        [5, 3], // small again: the large scratch reused
      ];
      shapes.forEach(([k, n], s) => {
        const values = ints(k * n, s + 1);
        const t = tf.tensor2d(values, [k, n]);
        try {
          const at = memory.int8Weight(t, K, k);
          expect([k, n, transposeErrors(bytes(at, k * n), values, k, n)]).toEqual([k, n, 0]);
        } finally {
          t.dispose();
        }
      });
    });
  }

  it('names a refused value in the last block: a kernel with n past the scratch, a table past 2^18', () => {
    const K = chooseStepKernels(memory.memory, (b) => memory.alloc(b));
    const cases: Array<[number, number, number, number]> = [
      // [k, n, rows (0: a table), index]: the last of three blocks of 16 rows of 20001
      [40, 20001, 40, 39 * 20001 + 20000],
      [40, 20001, 40, 33 * 20001 + 5], // its first row, inside a tile
      [3, 300_001, 0, 3 * 300_001 - 1], // a table of 900,003 values: its last value
    ];
    for (const [k, n, rows, index] of cases) {
      const values = ints(k * n, 9);
      values[index] = 127.5;
      const t = tf.tensor2d(values, [k, n]);
      try {
        expect(() => memory.int8Weight(t, K, rows)).toThrow(
          new RegExp(`holds 127\\.5 at index ${index}; expected whole numbers in \\[-127, 127\\]`),
        );
      } finally {
        t.dispose();
      }
    }
  });
});

/**
 * A float LM of odd widths, quantized by `quantize(model, 'int8')`: an embedding of width D, a
 * causal MultiHeadAttention (2 heads of 3: int8 kernels [D, 6] and [6, D]), a Dense of one unit
 * (n = 1) and one back to D (k = 1), a GroupQueryAttention (3 query heads over 1 of 5), a
 * TransformerDecoder (feed-forward 2D + 1), the tied logits.
 */
function oddModel(V: number, D: number, MAX: number): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const embedding = new ReversibleEmbedding({inputDim: V, outputDim: D, tieWeights: true});
  const tokens = embedding.apply(ids) as S;
  let x = tf.layers
    .add()
    .apply([tokens, new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S]) as S;
  const att = new MultiHeadAttention({numHeads: 2, keyDim: 3, useCausalMask: true}).apply(x) as S;
  x = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, att])) as S;
  const one = tf.layers.dense({units: 1, activation: 'relu'}).apply(x) as S;
  const back = tf.layers.dense({units: D}).apply(one) as S;
  x = tf.layers.add().apply([x, back]) as S;
  const gqa = new GroupQueryAttention({
    headDim: 5,
    numQueryHeads: 3,
    numKeyValueHeads: 1,
    useCausalMask: true,
  }).apply(x) as S;
  x = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, gqa])) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D + 1, numHeads: 1}).apply(x) as S;
  const model = tf.model({inputs: ids, outputs: embedding.apply(x, {reverse: true}) as S});
  model.weights.forEach((w, i) => {
    const t = tf.randomNormal(w.shape as number[], 0, 0.4, 'float32', 7 + i);
    w.write(t);
    t.dispose();
  });
  return model;
}

/** The int8 weight tensors (values, not scales) of a model's layers, sublayers included. */
function int8Weights(model: tf.LayersModel): number {
  let n = 0;
  const visit = (l: tf.layers.Layer) => {
    if (isInt8Layer(l) && l.quantizationMode === 'int8') n += l.int8Weights().length;
    if (l instanceof CompositeLayer) l.sublayers.forEach(visit);
  };
  model.layers.forEach(visit);
  return n;
}

function planOf(model: tf.LayersModel): StepPlan {
  const {plan, reason} = planCachedDecoding(model);
  if (plan == null) throw new Error(`no plan: ${reason}`);
  return plan;
}

/** The eager stepper's logits at each position from the shortest prompt on, as generate feeds it. */
function eagerLogits(
  plan: StepPlan,
  ids: number[][],
  lengths: number[],
  max: number,
): number[][][] {
  const stepper = new GraphStepper(plan, ids.length, max);
  const feed = (from: number, to: number) => {
    const chunk = ids.map((r) => r.slice(from, to));
    const t = tf.tensor2d(chunk, [ids.length, to - from], 'int32');
    try {
      return stepper.step(t, chunk);
    } finally {
      t.dispose();
    }
  };
  const out: number[][][] = [];
  try {
    for (let index = Math.min(...lengths); index < max; index++) {
      if (stepper.position < index - 1) feed(stepper.position, index - 1).dispose();
      const logits = feed(index - 1, index);
      out.push(logits.arraySync());
      logits.dispose();
    }
  } finally {
    stepper.dispose();
  }
  return out;
}

function maxDiff(a: number[][][], b: Float32Array[][]): number {
  let m = 0;
  a.forEach((step, s) =>
    step.forEach((row, r) =>
      row.forEach((v, j) => {
        const d = Math.abs(v - b[s][r][j]);
        m = Number.isNaN(d) ? Infinity : Math.max(m, d);
      }),
    ),
  );
  return m;
}

describeBackends('session review: int8 models of odd widths through generate', (backend) => {
  const MAX = 24;
  const V = 29;
  let models: Array<[number, tf.LayersModel, tf.LayersModel]>;
  beforeAll(async () => {
    await stepKernelsReady();
    models = [7, 24, 1].map((D) => {
      const float = oddModel(V, D, MAX);
      return [D, float, quantize(float, 'int8')];
    });
  });
  afterAll(() => {
    models.forEach(([, f, q]) => {
      f.dispose();
      q.dispose();
    });
    tf.env().set('TFJS_ATTENTION_SIMD', true);
    tf.env().set('TFJS_ATTENTION_COMPILED_STEP', true);
  });
  const ids = [
    [3, 7, 1, 9, 4, 12, 5, 8, 2, 6, 11, 10, 13, 17, 19, 23, 28, 1, 4, 2, 9, 14, 20, 27],
    [5, 2, 14, 8, 21, 3, 9, 1, 17, 4, 13, 7, 25, 22, 2, 26, 0, 6, 3, 5, 18, 12, 11, 10],
  ];
  const lengths = [5, 18]; // ragged: the first run's rows are the short prompt's
  // the first run's rows: 2 x 4 (< 16), 2 x 11 (>= 16), 1 x 19
  const shapes: Array<[number[][], number[]]> = [
    [ids, lengths],
    [ids, [12, 18]],
    [[ids[1]], [20]],
  ];

  for (const kernels of ['simd', 'js'] as const) {
    it(`compiled int8 logits are the eager int8 stepper's (D 7, 24, 1; batch 2 ragged, first runs of 8, 22 and 19 rows; ${kernels} kernels)`, () => {
      for (const [D, , model] of models) {
        for (const [ids, lengths] of shapes) {
          tf.env().set('TFJS_ATTENTION_SIMD', kernels === 'simd');
          const plan = planOf(model);
          const eager = eagerLogits(plan, ids, lengths, MAX);
          const before = tf.memory().numTensors;
          const made = compiledStep(plan, ids, lengths, MAX);
          expect([D, made.reason]).toEqual([D, null]);
          const step = made.step as DecodeStep;
          const compiled: Float32Array[][] = [];
          try {
            for (let index = Math.min(...lengths); index < MAX; index++) {
              compiled.push(
                step.next(
                  ids,
                  index,
                  lengths.map((n) => index >= n),
                ) as Float32Array[],
              );
            }
          } finally {
            step.dispose();
          }
          expect(tf.memory().numTensors).toBe(before);
          expect(lastCompiledRun?.kernels).toBe(kernels);
          // every int8 weight packed: the embedding table, the Dense kernels, every EinsumDense
          // kernel of the attention layers and the decoder (none left to a float path)
          // 1 table + 4 (MultiHeadAttention) + 2 (Dense) + 4 (GroupQueryAttention) + 6 (decoder)
          expect([D, int8Weights(model), lastCompiledRun?.counts.packed]).toEqual([D, 17, 17]);
          const d = maxDiff(eager, compiled);
          console.log(
            `odd int8 D=${D} lengths ${lengths} [${backend}, ${kernels}]: max |logits diff| ${d}`,
          );
          expect([D, lengths, d < 1e-5]).toEqual([D, lengths, true]);
        }
      }
    });
  }

  afterEach(() => tf.env().set('TFJS_ATTENTION_SIMD', true));

  for (const kernels of ['simd', 'js'] as const) {
    it(`generate: the compiled int8 tokens (${kernels} kernels) are those of recomputing and of the eager stepper, leaving nothing`, async () => {
      for (const [D, , model] of models) {
        tf.env().set('TFJS_ATTENTION_SIMD', kernels === 'simd');
        const run = async (options: {useCache: boolean}) => {
          let tokens!: number[][];
          await expectNoLeak(async () => {
            const out = await generate(
              model,
              ids.map((r) => r.slice(0, 18)),
              {
                maxLength: MAX,
                promptLengths: lengths,
                ...options,
              },
            );
            tokens = (await out.array()) as number[][];
            out.dispose();
          });
          return tokens;
        };
        const compiled = await run({useCache: true});
        expect([D, lastCompileRefusal]).toEqual([D, null]);
        expect([D, lastCompiledRun?.kernels]).toEqual([D, kernels]);
        tf.env().set('TFJS_ATTENTION_COMPILED_STEP', false);
        const eager = await run({useCache: true});
        tf.env().set('TFJS_ATTENTION_COMPILED_STEP', true);
        const again = await run({useCache: false});
        expect([D, compiled]).toEqual([D, again]);
        expect([D, eager]).toEqual([D, again]);
      }
    });
  }
});

describeBackends('session review: an int8 table past one block of 2^18 values', (backend) => {
  it("the compiled step's logits are the eager int8 stepper's: tied table [4100, 72] (295,200 values), feed-forward [72, 4103] and [4103, 72] (two blocks of rows each on a memory of its own)", async () => {
    await stepKernelsReady();
    const [V, D, MAX] = [4100, 72, 9];
    const ids = tf.input({shape: [null], dtype: 'int32'});
    const embedding = new ReversibleEmbedding({inputDim: V, outputDim: D, tieWeights: true});
    let x = embedding.apply(ids) as S;
    // blocks of 48 rows of 4103 and of 3632 rows of 72: 48 + 24, 3632 + 471
    const wide = tf.layers.dense({units: V + 3, activation: 'relu'}).apply(x) as S;
    x = tf.layers.add().apply([x, tf.layers.dense({units: D}).apply(wide) as S]) as S;
    x = tf.layers.layerNormalization().apply(x) as S;
    const float = tf.model({inputs: ids, outputs: embedding.apply(x, {reverse: true}) as S});
    float.weights.forEach((w, i) => {
      const t = tf.randomNormal(w.shape as number[], 0, 0.3, 'float32', 200 + i);
      w.write(t);
      t.dispose();
    });
    const model = quantize(float, 'int8');
    try {
      const rows = [[4099, 17, 2048, 4000, 3, 1, 4096, 77, 5]];
      const lengths = [3];
      const plan = planOf(model);
      const eager = eagerLogits(plan, rows, lengths, MAX);
      const made = compiledStep(plan, rows, lengths, MAX);
      expect(made.reason).toBeNull();
      const step = made.step as DecodeStep;
      const compiled: Float32Array[][] = [];
      try {
        for (let index = 3; index < MAX; index++) {
          compiled.push(step.next(rows, index, [false]) as Float32Array[]);
        }
      } finally {
        step.dispose();
      }
      const d = maxDiff(eager, compiled);
      console.log(`int8 table past 2^18 [${backend}]: max |logits diff| ${d}`);
      expect(d).toBeLessThan(1e-5);
    } finally {
      float.dispose();
      model.dispose();
    }
  });
});

describeBackends('session review: the cache written by one scatter', () => {
  it("a gradient through a cached call at the cache's last row (batch 2) is the whole sequence's", () => {
    const [B, T, D] = [2, 5, 6];
    const cached = new CachedMultiHeadAttention({numHeads: 2, keyDim: 3});
    const plain = new MultiHeadAttention({numHeads: 2, keyDim: 3});
    const x = randTensor([B, T, D], 21);
    const c = randTensor([B, 1, D], 22);
    const before = tf.memory().numTensors;
    tf.tidy(() => {
      cached.apply(x);
      plain.apply(x);
      cached.setWeights(cached.getWeights().map((w, i) => randTensor(w.shape, 80 + i, 0.5)));
      plain.setWeights(cached.getWeights());
      const causal = tf.linalg.bandPart(tf.ones([T, T]), -1, 0);
      // the keys and values of positions 0 .. T - 2, then the last position's call (index T - 1)
      let cache = tf.zeros([B, 2, T, 2, 3]);
      for (let t = 0; t < T - 1; t++) {
        const [, next] = cached.apply(tf.slice(x, [0, t, 0], [B, 1, D]), {
          cache,
          cacheUpdateIndex: t,
        }) as tf.Tensor[];
        cache = next;
      }
      const last = tf.tile(tf.slice(causal, [T - 1, 0], [1, T]).expandDims(0), [B, 1, 1]);
      const xt = tf.slice(x, [0, T - 1, 0], [B, 1, D]);
      const cachedGrad = tf.grad((q: tf.Tensor) => {
        const [y] = cached.apply(q, {
          attentionMask: last,
          cache,
          cacheUpdateIndex: T - 1,
        }) as tf.Tensor[];
        return tf.sum(tf.mul(y, c));
      })(xt);
      // the reference: the uncached layer over the whole sequence (causal), its last row; only
      // the last position's query, key and value depend on x[:, T - 1]
      const wholeGrad = tf.grad((whole: tf.Tensor) => {
        const y = plain.apply(whole, {
          attentionMask: tf.tile(tf.expandDims(causal, 0), [B, 1, 1]),
        }) as tf.Tensor;
        return tf.sum(tf.mul(tf.slice(y, [0, T - 1, 0], [B, 1, D]), c));
      })(x);
      expectClose(cachedGrad, tf.slice(wholeGrad, [0, T - 1, 0], [B, 1, D]), 1e-5, 1e-5);
    });
    expect(tf.memory().numTensors - before).toBe(cached.weights.length + plain.weights.length);
    cached.dispose();
    plain.dispose();
  });
});

describeBackends('session review: the fewer-program paths, values and gradients', (backend) => {
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

describeBackends("session review: the eager stepper without the package's kernels", (backend) => {
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
