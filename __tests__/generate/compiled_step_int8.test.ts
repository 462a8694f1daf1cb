/**
 * int8 models in the compiled decoding step (src/generate/compiled_step.ts): Keras 3's int8
 * layers (QuantizedDense, QuantizedEmbedding, int8 EinsumDense inside MultiHeadAttention /
 * GroupQueryAttention / TransformerDecoder, int8 ReversibleEmbedding lookup and tied / untied
 * logits) compile into the int8 kernels (per-row quantization, exact int8 products, int8 gathers)
 * on the int8 weights as the layers hold them (bytes in Keras' layout: read in place on
 * tfjs-wasm's heap, copied in once on a memory of its own).
 *
 * References, independent of the compiled program: the eager stepper (GraphStepper: the layers'
 * own int8 arithmetic through tfjs ops, src/ops/int8.ts) for the logits of every step, Keras'
 * own greedy int8 tokens (fixtures/int8_models.py, committed in __tests__/fixtures/int8) for the
 * fixture LM, and recomputing the prefix (`useCache: false`) for generate's tokens. On cpu and
 * wasm, with the SIMD kernels and with the JavaScript loops.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as v8 from 'v8';

import * as tf from '@tensorflow/tfjs';
import {LayerVariable} from '@tensorflow/tfjs-layers';

import {
  generate,
  GroupQueryAttention,
  int8Tensor,
  int8ValuesOf,
  loadKerasModel,
  MultiHeadAttention,
  PositionEmbedding,
  quantize,
  ReversibleEmbedding,
  TransformerDecoder,
} from '../../src';
import {CompositeLayer} from '../../src/layers/engine/composite_layer';
import {isInt8Layer, quantizedForm, quantizeInto} from '../../src/layers/core/quantization';
import type {CompiledRunReport, StepReport} from '../../src';
import {compiledStep} from '../../src/generate/compiled_step';
import type {DecodeStep} from '../../src/generate/decode_loop';
import {compileStep} from '../../src/generate/step_compile';
import {RELAXED_SIMD} from '../../src/kernels/flags';
import {relaxedSimdSupported} from '../../src/kernels/relaxed_simd';
import {stepKernelsReady} from '../../src/kernels/step_kernels';
import {describeBackends, expectNoLeak} from '../helpers/backends';
import {eagerLogits, maxDiff, planOf} from '../helpers/eager_logits';

/** The report of the last `generate` call given {@link onCompile} (generate's `onCompile`). */
let report: StepReport | null = null;
const onCompile = (r: StepReport) => {
  report = r;
};

const FIXTURE = path.join(__dirname, '..', 'fixtures', 'int8', 'decoder_lm');
type S = tf.SymbolicTensor;

interface Generated {
  prompts: number[][];
  steps: number;
  int8_tokens: number[][];
}

/** Keras' greedy int8 tokens of the fixture LM (fixtures/int8_models.py). */
function kerasTokens(): Generated {
  const io = JSON.parse(fs.readFileSync(path.join(FIXTURE, 'io.json'), 'utf8')) as {
    generate: Generated;
  };
  return io.generate;
}

/** Every layer of a model, composite layers' sublayers included. */
function allLayers(model: tf.LayersModel): tf.layers.Layer[] {
  const out: tf.layers.Layer[] = [];
  const visit = (l: tf.layers.Layer) => {
    out.push(l);
    if (l instanceof CompositeLayer) l.sublayers.forEach(visit);
  };
  model.layers.forEach(visit);
  return out;
}

/**
 * A model mixing float and int8 layers, weights random (fixed seeds): an int8 untied
 * ReversibleEmbedding's lookup plus an int8 Embedding (QuantizedEmbedding) plus a float
 * PositionEmbedding, a float causal MultiHeadAttention,
 * an int8 Dense (relu) into a float Dense, an int8 GroupQueryAttention (4 query heads over 2), a
 * float TransformerDecoder, and the int8 untied logits.
 */
function mixedModel(V: number, D: number, MAX: number): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const int8 = <L extends tf.layers.Layer>(l: L): L => quantizedForm(l, 'int8') as L;
  const embedding = int8(new ReversibleEmbedding({inputDim: V, outputDim: D, tieWeights: false}));
  const second = int8(tf.layers.embedding({inputDim: V, outputDim: D})); // a QuantizedEmbedding
  const tokens = tf.layers.add().apply([embedding.apply(ids) as S, second.apply(ids) as S]) as S;
  let x = tf.layers
    .add()
    .apply([tokens, new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S]) as S;
  const att = new MultiHeadAttention({numHeads: 2, keyDim: 8, useCausalMask: true}).apply(x) as S;
  x = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, att])) as S;
  const inner = int8(tf.layers.dense({units: 2 * D, activation: 'relu'})).apply(x) as S;
  const outer = tf.layers.dense({units: D}).apply(inner) as S;
  x = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, outer])) as S;
  const gqa = int8(
    new GroupQueryAttention({
      headDim: 4,
      numQueryHeads: 4,
      numKeyValueHeads: 2,
      useCausalMask: true,
    }),
  ).apply(x) as S;
  x = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, gqa])) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D, numHeads: 2, normalizeFirst: true}).apply(
    x,
  ) as S;
  const model = tf.model({inputs: ids, outputs: embedding.apply(x, {reverse: true}) as S});
  // float weights normal(0, 0.3), int8 weights Keras' quantization of normal(0, 0.3) floats
  const int8Values = new Set<string>();
  for (const layer of allLayers(model)) {
    if (!isInt8Layer(layer) || layer.quantizationMode !== 'int8') continue;
    for (const w of layer.int8Weights()) int8Values.add(w.values.name).add(w.scale.name);
  }
  model.weights.forEach((w, i) => {
    if (int8Values.has(w.name)) return;
    const t = tf.randomNormal(w.shape as number[], 0, 0.3, 'float32', 11 + i);
    w.write(t);
    t.dispose();
  });
  let seed = 101;
  for (const layer of allLayers(model)) {
    if (!isInt8Layer(layer) || layer.quantizationMode !== 'int8') continue;
    for (const w of layer.int8Weights()) {
      const float = tf.randomNormal(w.values.shape as number[], 0, 0.3, 'float32', seed++);
      quantizeInto(w, float);
      float.dispose();
    }
  }
  return model;
}

/** The compiled step's logits of the same positions. */
function compiledLogits(
  step: DecodeStep,
  ids: number[][],
  lengths: number[],
  max: number,
): Float32Array[][] {
  const out: Float32Array[][] = [];
  for (let index = Math.min(...lengths); index < max; index++) {
    out.push(
      step.next(
        ids,
        index,
        lengths.map((n) => index >= n),
      ) as Float32Array[],
    );
  }
  return out;
}

/** The number of int8 weight tensors of a model (values, not scales). */
function int8WeightCount(model: tf.LayersModel): number {
  let n = 0;
  for (const layer of allLayers(model)) {
    if (isInt8Layer(layer) && layer.quantizationMode === 'int8') n += layer.int8Weights().length;
  }
  return n;
}

/** The logits tolerance against the eager int8 path (see the file's notes). */
const LOGITS_TOL = 1e-5;

describeBackends('int8 in the compiled decoding step', (backend) => {
  let float: tf.LayersModel;
  let lm: tf.LayersModel;
  let kerasInt8: tf.LayersModel;
  let mixed: tf.LayersModel;
  beforeAll(async () => {
    float = await loadKerasModel(path.join(FIXTURE, 'float', 'model.json'));
    lm = quantize(float, 'int8');
    kerasInt8 = await loadKerasModel(path.join(FIXTURE, 'int8', 'model.json'));
    mixed = mixedModel(40, 16, 12);
    await stepKernelsReady(); // as generate does before it compiles (compiledStep is called directly below)
  });
  afterAll(() => [float, lm, kerasInt8, mixed].forEach((m) => m.dispose()));

  const models: Array<[string, () => tf.LayersModel, number]> = [
    ["the fixture LM quantized here (quantize(float, 'int8'))", () => lm, 16],
    ['the fixture LM as Keras wrote it in int8', () => kerasInt8, 16],
    ['a model mixing float and int8 layers (untied int8 logits, int8 GQA)', () => mixed, 12],
  ];

  for (const [name, model, max] of models) {
    describe(name, () => {
      it('compiles with no eager fallback: every planned layer has an int8 or float rule', () => {
        const compiled = compileStep(planOf(model()));
        expect(compiled.reason).toBeNull();
        const ops = new Set(compiled.program?.ops.map((o) => o.op));
        for (const op of ['quantize', 'denseInt8KN']) expect(ops.has(op as 'dense')).toBe(true);
        expect(compiled.program?.packed.length).toBe(int8WeightCount(model()));
      });

      for (const kernels of ['simd', 'js'] as const) {
        it(`gives the eager int8 stepper's logits within ${LOGITS_TOL} at every step (batch 2, ragged prompts, ${kernels} kernels)`, () => {
          tf.env().set('TFJS_ATTENTION_SIMD', kernels === 'simd');
          const plan = planOf(model());
          const ids = [
            [3, 7, 1, 9, 4, 12, 5, 8, 2, 6, 11, 10, 13, 17, 19, 23],
            [5, 2, 14, 8, 21, 3, 9, 1, 17, 4, 13, 7, 31, 29, 2, 37],
          ].map((r) => r.slice(0, max));
          const lengths = [4, 6];
          const eager = eagerLogits(plan, ids, lengths, max);
          const before = tf.memory().numTensors;
          const made = compiledStep(plan, ids, lengths, max);
          expect(made.reason).toBeNull();
          const step = made.step as DecodeStep;
          let compiled: Float32Array[][];
          try {
            compiled = compiledLogits(step, ids, lengths, max);
          } finally {
            step.dispose();
          }
          expect(tf.memory().numTensors).toBe(before);
          expect(made.report.run?.counts.live).toBe(0);
          tf.env().set('TFJS_ATTENTION_SIMD', true);
          expect(made.report.run?.kernels).toBe(kernels);
          const d = maxDiff(eager, compiled);
          console.log(
            `int8 compiled (${kernels}) vs eager [${backend}] ${name}: max |logits diff| ${d}`,
          );
          expect(d).toBeLessThan(LOGITS_TOL);
        });
      }
    });
  }

  for (const kernels of ['simd', 'js'] as const) {
    it(`the fixture LM: generate's greedy tokens are Keras' int8 tokens, through the compiled path (${kernels} kernels), leaving nothing`, async () => {
      tf.env().set('TFJS_ATTENTION_SIMD', kernels === 'simd');
      try {
        const g = kerasTokens();
        const maxLength = g.prompts[0].length + g.steps;
        for (const m of [lm, kerasInt8]) {
          let tokens!: number[][];
          const before = report?.run;
          await expectNoLeak(async () => {
            const out = await generate(m, g.prompts, {maxLength, useCache: true, onCompile});
            tokens = (await out.array()) as number[][];
            out.dispose();
          });
          expect(report?.reason).toBeNull();
          expect(report?.run).not.toBe(before); // this call compiled its step
          expect(report?.run?.kernels).toBe(kernels);
          expect(report?.run?.counts.live).toBe(0);
          expect(tokens).toEqual(g.int8_tokens);
        }
      } finally {
        tf.env().set('TFJS_ATTENTION_SIMD', true);
      }
    });
  }

  it('an int8 step runs no tfjs kernel (the whole step is the compiled program)', async () => {
    const g = kerasTokens();
    const ids = g.prompts.map((p) => [...p, ...Array<number>(12).fill(1)].slice(0, 16));
    const lengths = g.prompts.map((p) => p.length);
    const step = compiledStep(planOf(lm), ids, lengths, 16).step as DecodeStep;
    try {
      const profile = await tf.profile(() => {
        compiledLogits(step, ids, lengths, 16);
      });
      expect(profile.kernelNames).toEqual([]);
    } finally {
      step.dispose();
    }
  });

  it('the mixed model: generate gives the tokens of recomputing the prefix', async () => {
    const prompts = [
      [1, 5, 3, 4],
      [5, 6, 0, 0],
    ];
    const options = {maxLength: 12, promptLengths: [4, 2]};
    const out = await generate(mixed, prompts, {...options, useCache: true, onCompile});
    expect(report?.reason).toBeNull();
    const again = await generate(mixed, prompts, {...options, useCache: false});
    expect(await out.array()).toEqual(await again.array());
    tf.dispose([out, again]);
  });

  it('reads each int8 weight as it is held: in place on wasm, copied in once elsewhere, none packed, never per step', async () => {
    const g = kerasTokens();
    const run = async (maxLength: number) => {
      (await generate(lm, [g.prompts[0]], {maxLength, onCompile})).dispose();
      return report?.run as CompiledRunReport;
    };
    const short = await run(6);
    const long = await run(16);
    expect(long.runs).toBeGreaterThan(short.runs);
    const int8 = int8WeightCount(lm);
    expect(int8).toBeGreaterThan(0);
    // no kernel of this model is head-major: none is packed (transposed) at all
    expect(short.counts.packed).toBe(0);
    expect(long.counts.packed).toBe(0);
    expect(long.packedIds.length).toBe(int8);
    // the int8 weights read are the int8 layers' values tensors (bytes), one place each
    const values = new Map<number, tf.Tensor>();
    for (const layer of allLayers(lm)) {
      if (isInt8Layer(layer)) {
        for (const w of layer.int8Weights()) values.set(w.values.read().id, w.values.read());
      }
    }
    expect(new Set(long.packedIds)).toEqual(new Set(values.keys()));
    expect(new Set(long.packedOffsets).size).toBe(int8);
    if (backend === 'wasm') {
      // in place: each at its tensor's own bytes in tfjs-wasm's heap (no copy of any)
      const heap = tf.backend() as unknown as {
        dataIdMap: {get(id: tf.DataId): {memoryOffset: number}};
      };
      long.packedIds.forEach((id, i) => {
        const t = values.get(id) as tf.Tensor;
        expect(long.packedOffsets[i]).toBe(heap.dataIdMap.get(t.dataId).memoryOffset);
      });
    }
    // every weight (int8 bytes, scales, biases, norms, positions): read in place on wasm, copied
    // in once elsewhere
    const floats = lm.weights.length - int8;
    expect(long.weightIds.length).toBe(floats);
    expect(long.counts.uploads).toBe(backend === 'wasm' ? 0 : floats + int8);
  });

  it('an int8 weight not held as bytes is declined by the step (the eager stepper runs), naming the dtype', () => {
    const m = mixedModel(40, 16, 12);
    try {
      const layer = allLayers(m).find((l) => l.getClassName() === 'QuantizedDense');
      if (layer == null) throw new Error('the mixed model has no QuantizedDense');
      const dense = layer as unknown as {kernel: LayerVariable};
      const kernel = dense.kernel;
      // a float32 kernel of whole numbers (how int8 values were held before they were bytes)
      dense.kernel = new LayerVariable(tf.zeros(kernel.shape as number[]), 'float32', 'kernel');
      try {
        const compiled = compileStep(planOf(m));
        expect(compiled.reason).toMatch(
          /an int8 weight of dtype float32 with a scale of dtype float32 \(expected int8 values held as bytes, dtype 'bool', and a float32 scale\)/,
        );
      } finally {
        dense.kernel.dispose();
        dense.kernel = kernel;
      }
    } finally {
      m.dispose();
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

describeBackends('int8 models of odd widths through generate', (backend) => {
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
          expect(made.report.run?.kernels).toBe(kernels);
          // every int8 weight read as int8: the embedding table, the Dense kernels, every
          // EinsumDense kernel of the attention layers and the decoder (none left to a float path)
          // 1 table + 4 (MultiHeadAttention) + 2 (Dense) + 4 (GroupQueryAttention) + 6 (decoder)
          expect([D, int8WeightCount(model), made.report.run?.packedIds.length]).toEqual([
            D,
            17,
            17,
          ]);
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
                onCompile,
              },
            );
            tokens = (await out.array()) as number[][];
            out.dispose();
          });
          return tokens;
        };
        const compiled = await run({useCache: true});
        expect([D, report?.reason]).toEqual([D, null]);
        expect([D, report?.run?.kernels]).toEqual([D, kernels]);
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

describeBackends('an int8 model past one block of the eager products', (backend) => {
  it("the compiled step's logits are the eager int8 stepper's: tied table [4100, 72] (295,200 values), feed-forward [72, 4103] and [4103, 72]", async () => {
    await stepKernelsReady();
    const [V, D, MAX] = [4100, 72, 9];
    const ids = tf.input({shape: [null], dtype: 'int32'});
    const embedding = new ReversibleEmbedding({inputDim: V, outputDim: D, tieWeights: true});
    let x = embedding.apply(ids) as S;
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

describeBackends('the int8 products on relaxed SIMD (TFJS_ATTENTION_RELAXED_SIMD)', (backend) => {
  // Node 20 validates relaxed SIMD only behind a V8 flag (Chromium and Node 22 have it): on for
  // these tests, off again after them where it was off; generate asks for the relaxed module again
  let hadRelaxed = false;
  let lm: tf.LayersModel;
  let mixed: tf.LayersModel;
  beforeAll(async () => {
    hadRelaxed = relaxedSimdSupported();
    v8.setFlagsFromString('--experimental-wasm-relaxed-simd');
    const float = await loadKerasModel(path.join(FIXTURE, 'float', 'model.json'));
    lm = quantize(float, 'int8');
    float.dispose();
    mixed = mixedModel(40, 16, 12);
    await stepKernelsReady();
  });
  afterAll(() => {
    [lm, mixed].forEach((m) => m.dispose());
    tf.env().set(RELAXED_SIMD, false);
    if (!hadRelaxed) v8.setFlagsFromString('--no-experimental-wasm-relaxed-simd');
  });

  it("generate's greedy tokens and the step's logits are the same with it on and off (the fixture LM: Keras' int8 tokens), leaving nothing", async () => {
    const g = kerasTokens();
    const maxLength = g.prompts[0].length + g.steps;
    const mixedPrompts = [
      [3, 7, 1, 9],
      [5, 2, 14, 8, 21, 3],
    ];
    for (const [m, prompts, max] of [
      [lm, g.prompts, maxLength],
      [mixed, mixedPrompts, 12],
    ] as const) {
      const tokens: number[][][] = [];
      const logits: Float32Array[][][] = [];
      for (const on of [true, false]) {
        tf.env().set(RELAXED_SIMD, on);
        await expectNoLeak(async () => {
          const out = await generate(m, prompts as number[][], {
            maxLength: max,
            useCache: true,
            onCompile,
          });
          tokens.push((await out.array()) as number[][]);
          out.dispose();
        });
        expect(report?.reason).toBeNull();
        expect(report?.run?.kernels).toBe(on ? 'simd-relaxed' : 'simd');
        // the logits of every step (a prefill of several rows, then one row each step)
        const ids = tokens[tokens.length - 1];
        const lengths = prompts.map((p) => p.length);
        const made = compiledStep(planOf(m), ids, lengths, max);
        expect(made.report.run?.kernels).toBe(on ? 'simd-relaxed' : 'simd');
        const step = made.step as DecodeStep;
        try {
          logits.push(compiledLogits(step, ids, lengths, max));
        } finally {
          step.dispose();
        }
      }
      expect(tokens[0]).toEqual(tokens[1]);
      if (m === lm) expect(tokens[0]).toEqual(g.int8_tokens);
      const bits = (rows: Float32Array[][]) =>
        rows.map((r) =>
          r.map((v) => Array.from(new Uint32Array(v.buffer, v.byteOffset, v.length))),
        );
      expect(bits(logits[0])).toEqual(bits(logits[1]));
      console.log(`relaxed SIMD on and off [${backend}]: the same tokens and logits`);
    }
  });

  it("an int8 weight holding -128 (outside Keras' range) is refused with it on, and runs with it off", async () => {
    const m = mixedModel(40, 16, 12);
    try {
      const layer = allLayers(m).find((l) => l.getClassName() === 'QuantizedDense');
      const w = isInt8Layer(layer) ? layer.int8Weights()[0].values : null;
      if (w == null) throw new Error('the mixed model has no QuantizedDense');
      const values = Int8Array.from(int8ValuesOf(w.read()));
      values[7] = -128;
      const bad = int8Tensor(values, w.shape as number[]);
      w.write(bad);
      bad.dispose();
      tf.env().set(RELAXED_SIMD, true);
      await expect(generate(m, [[1, 2, 3]], {maxLength: 6})).rejects.toThrow(
        /an int8 weight \(tensor \d+, shape \[16,32\]\) holds -128 at index 7; the relaxed SIMD int8 products \(TFJS_ATTENTION_RELAXED_SIMD\) take Keras' range, \[-127, 127\]/,
      );
      tf.env().set(RELAXED_SIMD, false);
      (await generate(m, [[1, 2, 3]], {maxLength: 6})).dispose();
    } finally {
      tf.env().set(RELAXED_SIMD, false);
      m.dispose();
    }
  });
});
