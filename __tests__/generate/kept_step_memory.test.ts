/**
 * The compiled step's memory kept with its model between `generate` calls
 * (src/generate/kept_step_memory.ts): a second call copies no weight (float32 or int8 bytes)
 * (counted by the memory's own counters, no timing); a weight changed between calls (setWeights)
 * gives the tokens of a model built with the new weights; `releaseGenerateMemory(model)` and
 * `model.dispose()` free it; two calls at once on one model give each its own tokens.
 */
import * as tf from '@tensorflow/tfjs';

import {
  generate,
  PositionEmbedding,
  quantize,
  releaseGenerateMemory,
  ReversibleEmbedding,
  TransformerDecoder,
} from '../../src';
import type {CompiledRunReport, StepReport} from '../../src';
import {describeBackends, expectNoLeak} from '../helpers/backends';

const V = 23;
const D = 16;
const MAX = 12;
type S = tf.SymbolicTensor;

/** A small GPT (tied embedding, two decoder blocks), every weight normal(0, 0.5) from `seed`. */
function gpt(seed: number): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const embedding = new ReversibleEmbedding({inputDim: V, outputDim: D, tieWeights: true});
  const tokens = embedding.apply(ids) as S;
  const positions = new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S;
  let x = tf.layers.add().apply([tokens, positions]) as S;
  for (const numHeads of [4, 2]) {
    x = new TransformerDecoder({intermediateDim: 2 * D, numHeads, normalizeFirst: true}).apply(
      x,
    ) as S;
  }
  x = tf.layers.layerNormalization({epsilon: 1e-5}).apply(x) as S;
  const model = tf.model({inputs: ids, outputs: embedding.apply(x) as S});
  const weights = model
    .getWeights()
    .map((w, i) => tf.randomNormal(w.shape, 0, 0.5, 'float32', seed + i));
  model.setWeights(weights);
  tf.dispose(weights);
  return model;
}

/** The float GPT of `seed`, or its int8 form. */
function lm(seed: number, int8: boolean): tf.LayersModel {
  const float = gpt(seed);
  if (!int8) return float;
  const q = quantize(float, 'int8');
  float.dispose();
  return q;
}

const PROMPTS = [
  [1, 2, 3],
  [4, 5, 6],
];

/** Greedy tokens of `model` and the compiled run's report (it must have compiled). */
async function tokens(model: tf.LayersModel): Promise<{ids: number[][]; run: CompiledRunReport}> {
  let report: StepReport | null = null;
  const out = await generate(model, PROMPTS, {
    maxLength: MAX,
    onCompile: (r) => {
      report = r;
    },
  });
  const ids = (await out.array()) as number[][];
  out.dispose();
  const r = report as StepReport | null;
  expect(r?.reason ?? null).toBeNull();
  return {ids, run: r?.run as CompiledRunReport};
}

describeBackends('the step memory kept with the model', (backend) => {
  for (const int8 of [false, true]) {
    const kind = int8 ? 'int8' : 'float32';

    it(`${kind}: a second call copies no weight and packs none; the memory's run buffers are freed after each`, async () => {
      const model = lm(5, int8);
      try {
        const first = await tokens(model);
        const uploads = first.run.counts.uploads;
        const packed = first.run.counts.packed;
        // on wasm weights (float32 and int8 bytes) are read in place; elsewhere each is copied
        // in once; no kernel of this model is head-major, so none is packed
        const read = first.run.weightIds.length + first.run.packedIds.length;
        expect(first.run.packedIds.length).toBe(int8 ? 1 + 2 * 6 : 0);
        expect(uploads).toBe(backend === 'wasm' ? 0 : read);
        expect(packed).toBe(0);
        expect(first.run.counts.kept).toBe(backend === 'wasm' ? 0 : uploads);
        const second = await tokens(model);
        expect(second.ids).toEqual(first.ids);
        expect(second.run.counts.runs).toBe(2); // the same memory served both calls
        expect(second.run.counts.uploads).toBe(uploads);
        expect(second.run.counts.packed).toBe(packed);
        expect(second.run.counts.live).toBe(0);
        expect(second.run.weightOffsets).toEqual(first.run.weightOffsets);
        expect(second.run.packedOffsets).toEqual(first.run.packedOffsets);
      } finally {
        model.dispose();
      }
    });

    it(`${kind}: weights changed between calls (setWeights) give the tokens of a model built with them`, async () => {
      const model = lm(5, int8);
      const other = lm(77, int8);
      try {
        const before = await tokens(model);
        // (the counters of one memory, read now: a later call updates them)
        const [uploads, packed] = [before.run.counts.uploads, before.run.counts.packed];
        const expected = await tokens(other);
        expect(expected.ids).not.toEqual(before.ids); // the two models tell apart
        const weights = other.getWeights();
        model.setWeights(weights);
        const after = await tokens(model);
        expect(after.ids).toEqual(expected.ids);
        expect(after.run.counts.runs).toBe(2); // the kept memory, its weights made again
        // every weight changed: each copied again (cpu, tensorflow)
        expect(after.run.counts.uploads).toBe(2 * uploads);
        expect(after.run.counts.packed).toBe(2 * packed);
      } finally {
        model.dispose();
        other.dispose();
      }
    });
  }

  it('releaseGenerateMemory(model) and model.dispose() free it; the next call makes it again', async () => {
    await expectNoLeak(async () => {
      const model = lm(5, true);
      const first = await tokens(model);
      // on wasm every weight is read in place: nothing kept aside, but a memory all the same
      if (backend !== 'wasm') expect(first.run.counts.kept).toBeGreaterThan(0);
      releaseGenerateMemory(model);
      expect(first.run.counts.kept).toBe(0);
      releaseGenerateMemory(model); // a second release does nothing
      const second = await tokens(model);
      expect(second.ids).toEqual(first.ids);
      expect(second.run.counts).not.toBe(first.run.counts); // a new memory
      expect(second.run.counts.runs).toBe(1);
      expect(second.run.counts.uploads).toBe(first.run.counts.uploads);
      if (backend !== 'wasm') expect(second.run.counts.kept).toBeGreaterThan(0);
      model.dispose();
      expect(second.run.counts.kept).toBe(0);
    });
  });

  it('two calls at once on one model: each gives its own tokens', async () => {
    const model = lm(5, false);
    try {
      const alone = await tokens(model);
      const [a, b] = await Promise.all([tokens(model), tokens(model)]);
      expect(a.ids).toEqual(alone.ids);
      expect(b.ids).toEqual(alone.ids);
    } finally {
      model.dispose();
    }
  });
});
