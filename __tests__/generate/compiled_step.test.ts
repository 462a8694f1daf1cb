/**
 * The compiled decoding step (src/generate/compiled_step.ts): for small random LMs built here (a
 * GPT of ReversibleEmbedding tied + PositionEmbedding + pre- and post-norm TransformerDecoders,
 * gelu and relu; a functional MultiHeadAttention + LayerNormalization + Dense + Add model as
 * bench/generate_bench.ts builds; GroupQueryAttention; TokenAndPositionEmbedding with maskZero),
 * on cpu and wasm: its logits equal the eager stepper's (GraphStepper, an independent path
 * through tfjs' kernels) within 1e-4 at every step of a ragged batch of 2, generate's greedy
 * tokens equal recomputing the prefix, a model with a layer that has no rule falls back and still
 * equals, no tfjs tensor is left and every buffer is freed, a step runs no tfjs kernel, and the
 * weights are read in place on wasm (copied once per run elsewhere, never per step).
 */
import * as tf from '@tensorflow/tfjs';

import {
  generate,
  GroupQueryAttention,
  MultiHeadAttention,
  PositionEmbedding,
  ReversibleEmbedding,
  SinePositionEncoding,
  TokenAndPositionEmbedding,
  TransformerDecoder,
} from '../../src';
import type {CompiledRunReport, StepReport} from '../../src';
import {STEP_BACKEND_ROWS} from '../../src/generate/backend_products';
import {compiledStep} from '../../src/generate/compiled_step';
import type {DecodeStep} from '../../src/generate/decode_loop';
import {planCachedDecoding, StepPlan} from '../../src/generate/graph_plan';
import {GraphStepper} from '../../src/generate/graph_step';
import {compileStep} from '../../src/generate/step_compile';
import {describeBackends, expectNoLeak} from '../helpers/backends';

/** The report of the last `generate` call given {@link onCompile} (generate's `onCompile`). */
let report: StepReport | null = null;
const onCompile = (r: StepReport) => {
  report = r;
};

const V = 23;
const D = 16;
const MAX = 12;
type S = tf.SymbolicTensor;

/** Random weights, reproducible: every weight normal(0, 0.5) from its own seed. */
function randomize(model: tf.LayersModel, seed = 5, std = 0.5): tf.LayersModel {
  const weights = model
    .getWeights()
    .map((w, i) => tf.randomNormal(w.shape, 0, std, 'float32', seed + i));
  model.setWeights(weights);
  tf.dispose(weights);
  return model;
}

/** A small GPT: ReversibleEmbedding (tied) + PositionEmbedding, pre-norm gelu and post-norm relu blocks. */
function gpt(tieWeights = true): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const embedding = new ReversibleEmbedding({inputDim: V, outputDim: D, tieWeights});
  const tokens = embedding.apply(ids) as S;
  const positions = new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S;
  let x = tf.layers.add().apply([tokens, positions]) as S;
  x = new TransformerDecoder({
    intermediateDim: 2 * D,
    numHeads: 4,
    normalizeFirst: true,
    activation: 'gelu',
  }).apply(x) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D, numHeads: 2, activation: 'relu'}).apply(
    x,
  ) as S;
  x = tf.layers.layerNormalization({epsilon: 1e-5}).apply(x) as S;
  return randomize(tf.model({inputs: ids, outputs: embedding.apply(x) as S}));
}

/** bench/generate_bench.ts' model: TokenAndPositionEmbedding, MultiHeadAttention blocks with tfjs layers. */
function mhaModel(extra?: () => tf.layers.Layer): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
  }).apply(ids) as S;
  if (extra != null) x = tf.layers.add().apply([x, extra().apply(x) as S]) as S;
  for (let i = 0; i < 2; i++) {
    const att = new MultiHeadAttention({numHeads: 4, keyDim: 4, useCausalMask: true}).apply(x) as S;
    const h = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, att])) as S;
    const f = tf.layers.dense({units: 2 * D, activation: 'relu'}).apply(h) as S;
    const g = tf.layers.dense({units: D}).apply(tf.layers.dropout({rate: 0.1}).apply(f) as S) as S;
    x = tf.layers.layerNormalization().apply(tf.layers.add().apply([h, g])) as S;
  }
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S}));
}

/** Embedding + PositionEmbedding, GroupQueryAttention (8 query heads over 2), Multiply, Activation. */
function gqaModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const tokens = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
  const x = tf.layers
    .add()
    .apply([tokens, new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S]) as S;
  const att = new GroupQueryAttention({
    headDim: 4,
    numQueryHeads: 8,
    numKeyValueHeads: 2,
    useCausalMask: true,
  }).apply(x) as S;
  const gate = tf.layers
    .activation({activation: 'sigmoid'})
    .apply(tf.layers.dense({units: D}).apply(x) as S) as S;
  const h = tf.layers.multiply().apply([att, gate]) as S;
  const y = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, h])) as S;
  return randomize(
    tf.model({inputs: ids, outputs: tf.layers.dense({units: V, activation: 'tanh'}).apply(y) as S}),
  );
}

/** TokenAndPositionEmbedding with maskZero feeding two TransformerDecoders (key masks). */
function maskedDecoders(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
    maskZero: true,
  }).apply(ids) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D, numHeads: 2}).apply(x) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D, numHeads: 4, normalizeFirst: true}).apply(
    x,
  ) as S;
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S}));
}

/** TokenAndPositionEmbedding with maskZero feeding two causal MultiHeadAttention layers (key and query masks). */
function maskedMha(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
    maskZero: true,
  }).apply(ids) as S;
  for (let i = 0; i < 2; i++) {
    x = new MultiHeadAttention({numHeads: 4, keyDim: 4, useCausalMask: true}).apply(x) as S;
  }
  // no norm between the layers: smaller weights keep the logits near 1 (not ~100), so that 1e-4
  // is float32's rounding and not a looser relative bound
  const model = tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S});
  return randomize(model, 5, 0.25);
}

const MODELS: Array<[string, () => tf.LayersModel]> = [
  [
    'GPT: tied ReversibleEmbedding + PositionEmbedding + pre- / post-norm TransformerDecoders',
    () => gpt(),
  ],
  ['the same GPT with untied logits (reverse_embeddings)', () => gpt(false)],
  [
    'TokenAndPositionEmbedding + MultiHeadAttention, LayerNormalization, Dense, Add',
    () => mhaModel(),
  ],
  ['Embedding + PositionEmbedding + GroupQueryAttention, Multiply, Activation', gqaModel],
  ['TokenAndPositionEmbedding (maskZero) + TransformerDecoders', maskedDecoders],
  [
    'TokenAndPositionEmbedding (maskZero) + MultiHeadAttention (a query of 0 is recomputed)',
    maskedMha,
  ],
];

/** Ragged prompts of batch 2 (lengths 4 and 6) and the rest of each row, fixed ids (teacher forcing). */
function rows(withZeros: boolean): {ids: number[][]; lengths: number[]} {
  const ids = [
    [3, 7, 1, 9, 4, 12, 5, 8, 2, 6, 11, 10],
    [5, 2, 14, 8, 21, 3, 9, 1, 17, 4, 13, 7],
  ];
  if (withZeros) {
    ids[0][2] = 0; // a prompt 0 (a masked key inside the prefill)
    ids[1][7] = 0; // a later 0
    ids[0][9] = 0;
  }
  return {ids, lengths: [4, 6]};
}

/** The eager stepper's logits of each position, fed as generate's cached step feeds it. */
function eagerLogits(plan: StepPlan, ids: number[][], lengths: number[]): number[][][] {
  const B = ids.length;
  const stepper = new GraphStepper(plan, B, MAX);
  const feed = (from: number, to: number) => {
    const chunk = ids.map((r) => r.slice(from, to));
    const t = tf.tensor2d(chunk, [B, to - from], 'int32');
    try {
      return stepper.step(t, chunk);
    } finally {
      t.dispose();
    }
  };
  const out: number[][][] = [];
  try {
    for (let index = Math.min(...lengths); index < MAX; index++) {
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

/** The compiled step's logits of each position. */
function compiledLogits(step: DecodeStep, ids: number[][], lengths: number[]): Float32Array[][] {
  const out: Float32Array[][] = [];
  for (let index = Math.min(...lengths); index < MAX; index++) {
    const active = lengths.map((n) => index >= n);
    out.push(step.next(ids, index, active) as Float32Array[]);
  }
  return out;
}

function planOf(model: tf.LayersModel): StepPlan {
  const {plan, reason} = planCachedDecoding(model);
  if (plan == null) throw new Error(`no plan: ${reason}`);
  return plan;
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

describeBackends('compiled decoding step', (backend) => {
  for (const [name, make] of MODELS) {
    describe(name, () => {
      let model: tf.LayersModel;
      beforeAll(() => {
        model = make();
      });
      afterAll(() => model.dispose());

      it("gives the eager stepper's logits within 1e-4 at every step (batch 2, ragged prompts)", () => {
        const plan = planOf(model);
        const {ids, lengths} = rows(plan.masksZeroIds);
        const eager = eagerLogits(plan, ids, lengths);
        const made = compiledStep(plan, ids, lengths, MAX);
        expect(made.reason).toBeNull();
        const step = made.step as DecodeStep;
        let compiled: Float32Array[][];
        try {
          compiled = compiledLogits(step, ids, lengths);
        } finally {
          step.dispose();
        }
        expect(compiled.length).toBe(eager.length);
        expect(maxDiff(eager, compiled)).toBeLessThan(1e-4);
        expect(made.report.run?.counts.live).toBe(0); // every buffer freed
      });

      it("runs a prefill's products on the backend's matmul from TFJS_ATTENTION_STEP_BACKEND_ROWS rows (not on wasm's heap), the eager stepper's logits within 1e-4", async () => {
        const plan = planOf(model);
        const {ids, lengths} = rows(plan.masksZeroIds);
        const eager = eagerLogits(plan, ids, lengths);
        // 8 prefill rows (batch 2, the shortest prompt 4) from 2 rows on: every float product of
        // the first run; the single rows after it stay on the step's kernels
        tf.env().set(STEP_BACKEND_ROWS, 2);
        try {
          const made = compiledStep(plan, ids, lengths, MAX);
          const step = made.step as DecodeStep;
          const compiled: Float32Array[][] = [];
          try {
            const first = await tf.profile(() => {
              compiled.push(...compiledLogits(step, ids, lengths).slice(0, 1));
            });
            const products = first.kernelNames.filter((k) => k === 'BatchMatMul').length;
            if (backend === 'wasm') expect(products).toBe(0);
            else expect(products).toBeGreaterThan(0);
            expect(first.newTensors).toBe(0);
          } finally {
            step.dispose();
          }
          expect(maxDiff(eager.slice(0, 1), compiled)).toBeLessThan(1e-4);
        } finally {
          tf.env().set(STEP_BACKEND_ROWS, -1);
        }
      });

      for (const kernels of ['simd', 'js'] as const) {
        it(`gives the greedy tokens of recomputing, through the compiled path (${kernels} kernels), leaving nothing`, async () => {
          // the SIMD module of the whole step, or (TFJS_ATTENTION_SIMD off) the JavaScript loops
          tf.env().set('TFJS_ATTENTION_SIMD', kernels === 'simd');
          const prompts = [
            [1, 0, 3, 4, 0, 0], // a 0 inside a prompt: a masked key of a maskZero model
            [5, 6, 0, 0, 0, 0],
          ];
          let cached!: number[][];
          const before = report?.run;
          await expectNoLeak(async () => {
            const out = await generate(model, prompts, {
              maxLength: MAX,
              promptLengths: [4, 2],
              useCache: true,
              onCompile,
            });
            cached = (await out.array()) as number[][];
            out.dispose();
          });
          expect(report?.reason).toBeNull();
          expect(report?.run).not.toBe(before); // this call compiled its step
          expect(report?.run?.kernels).toBe(kernels);
          expect(report?.run?.memory).toBe(backend === 'wasm' ? 'heap' : 'own');
          expect(report?.run?.counts.live).toBe(0);
          expect(report?.run?.counts.allocated).toBeGreaterThan(0);
          const again = await generate(model, prompts, {
            maxLength: MAX,
            promptLengths: [4, 2],
            useCache: false,
          });
          expect(await again.array()).toEqual(cached);
          again.dispose();
          tf.env().set('TFJS_ATTENTION_SIMD', true);
        });
      }
    });
  }

  it('a step runs no tfjs kernel (the whole step is the compiled program)', async () => {
    const model = gpt();
    tf.env().set(STEP_BACKEND_ROWS, 0); // tfjs-node's own matmul off for the prefill's rows
    try {
      const plan = planOf(model);
      const {ids, lengths} = rows(false);
      const step = compiledStep(plan, ids, lengths, MAX).step as DecodeStep;
      try {
        const profile = await tf.profile(() => {
          compiledLogits(step, ids, lengths);
        });
        expect(profile.kernelNames).toEqual([]);
      } finally {
        step.dispose();
      }
      // and generate's kernels do not grow with the tokens generated
      const kernelsOf = async (maxLength: number) =>
        (
          await tf.profile(async () => {
            (await generate(model, [[1, 2, 3]], {maxLength})).dispose();
          })
        ).kernels.length;
      expect(await kernelsOf(MAX)).toBe(await kernelsOf(6));
    } finally {
      model.dispose();
      tf.env().set(STEP_BACKEND_ROWS, -1);
    }
  });

  it("after the last attention op only each row's last position is computed (the last decoder's feed-forward part too)", () => {
    const model = gpt();
    try {
      const {program} = compileStep(planOf(model));
      if (program == null) throw new Error('not compiled');
      const last = program.ops.map((o) => o.op).lastIndexOf('attention');
      expect(program.cachedOps).toBe(last + 1);
      const after = program.ops.slice(last + 1);
      // the last TransformerDecoder's output projection and its two feed-forward products (then
      // the tied logits, a denseT)
      expect(after.filter((o) => o.op === 'dense').length).toBe(3);
      const operands = ['x', 'a', 'b', 'q', 'qs', 'ids', 'like', 'out'] as const;
      for (const o of after) {
        for (const name of operands) {
          if (!(name in o)) continue;
          const v = (o as unknown as Record<string, number>)[name];
          // a lastRows reads the rows of every position and writes the last ones
          const want = o.op === 'lastRows' && name === 'x' ? 'all' : 'last';
          expect([o.op, name, program.values[v].rows]).toEqual([o.op, name, want]);
        }
      }
    } finally {
      model.dispose();
    }
  });

  it('a later generate call reuses the compiled program, and reads weights set since (the tokens of recomputing)', async () => {
    const model = gpt();
    try {
      const prompt = [[1, 2, 3]];
      const first = await generate(model, prompt, {maxLength: 9, onCompile});
      expect(report?.programReused).toBe(false);
      const second = await generate(model, prompt, {maxLength: 9, onCompile});
      expect(report?.programReused).toBe(true);
      expect(await second.array()).toEqual(await first.array());
      randomize(model, 77); // setWeights: new values in the same variables
      const third = await generate(model, prompt, {maxLength: 9, onCompile});
      expect(report?.programReused).toBe(true);
      const recomputed = await generate(model, prompt, {maxLength: 9, useCache: false});
      expect(await third.array()).toEqual(await recomputed.array());
      expect(await third.array()).not.toEqual(await first.array());
      tf.dispose([first, second, third, recomputed]);
    } finally {
      model.dispose();
    }
  });

  it('the first token is one run over the whole prompt (the time to first token), then one run per token', async () => {
    const model = gpt();
    try {
      const prompt = [[1, 2, 3, 4, 5, 6]];
      (await generate(model, prompt, {maxLength: 7, onCompile})).dispose();
      expect(report?.run?.runs).toBe(1);
      (await generate(model, prompt, {maxLength: 10, onCompile})).dispose();
      expect(report?.run?.runs).toBe(4);
    } finally {
      model.dispose();
    }
  });

  it('reads the weights in place on wasm and copies them once per run elsewhere, never per step', async () => {
    const model = gpt();
    try {
      const run = async (maxLength: number) => {
        (await generate(model, [[1, 2, 3]], {maxLength, onCompile})).dispose();
        return report?.run as CompiledRunReport;
      };
      const short = await run(6);
      const long = await run(MAX);
      const weights = model.weights.length; // every weight of the GPT is read by the program
      expect(long.weightIds.length).toBe(weights);
      expect(long.runs).toBeGreaterThan(short.runs);
      if (backend === 'wasm') {
        expect(long.counts.uploads).toBe(0);
        const heap = tf.backend() as unknown as {
          dataIdMap: {get(id: object): {memoryOffset: number}};
        };
        const byId = new Map(model.weights.map((w) => [w.read().id, w.read()]));
        long.weightOffsets.forEach((at, i) => {
          const t = byId.get(long.weightIds[i]) as tf.Tensor;
          expect(at).toBe(heap.dataIdMap.get(t.dataId).memoryOffset);
        });
      } else {
        expect(short.counts.uploads).toBe(weights);
        expect(long.counts.uploads).toBe(weights);
      }
    } finally {
      model.dispose();
    }
  });

  it('a model with a layer that has no compile rule falls back to the eager stepper, same tokens', async () => {
    const model = mhaModel(() => new SinePositionEncoding());
    try {
      const prompts = [[3, 1, 4, 1]];
      const out = await generate(model, prompts, {maxLength: MAX, useCache: true, onCompile});
      expect(report?.reason).toMatch(/SinePositionEncoding\): its class has no compile rule/);
      const again = await generate(model, prompts, {maxLength: MAX, useCache: false});
      expect(await out.array()).toEqual(await again.array());
      tf.dispose([out, again]);
    } finally {
      model.dispose();
    }
  });

  it('maskZero: a row that starts with the id 0 is not compiled (its first queries see no key)', async () => {
    const model = maskedDecoders();
    try {
      const prompts = [
        [0, 4, 5],
        [2, 3, 6],
      ];
      const options = {maxLength: 8, promptLengths: [3, 3]};
      const out = await generate(model, prompts, {...options, useCache: true, onCompile});
      expect(report?.reason).toMatch(/row 0 starts with the id 0/);
      const again = await generate(model, prompts, {...options, useCache: false});
      expect(await out.array()).toEqual(await again.array());
      tf.dispose([out, again]);
    } finally {
      model.dispose();
    }
  });
});
