/**
 * Cached decoding of functional causal LMs (generate's `useCache`): for small random LMs built
 * with tfjs (TokenAndPositionEmbedding or Embedding + PositionEmbedding / SinePositionEncoding,
 * two blocks of causal MultiHeadAttention + LayerNorm + Dense, GroupQueryAttention with
 * RotaryEmbedding, CachedMultiHeadAttention, keras-hub's TransformerDecoder, a ReversibleEmbedding
 * head), `useCache: true` gives
 * the tokens of recomputing the prefix (greedy, seeded topK / topP, ragged prompts, endId), and
 * really runs the cache (no model.predict call; the attention layers are called with their cache
 * one position at a time). Models that cannot run incrementally fall back with a reason naming
 * the layer, or are an error with `useCache: true`. No tensor is left behind.
 */
import * as tf from '@tensorflow/tfjs';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {
  CachedMultiHeadAttention,
  cachedDecodingRefusal,
  EinsumDense,
  generate,
  GroupQueryAttention,
  MultiHeadAttention,
  PositionEmbedding,
  ReversibleEmbedding,
  RotaryEmbedding,
  SinePositionEncoding,
  TokenAndPositionEmbedding,
  TransformerDecoder,
} from '../../src';
import type {GenerateOptions} from '../../src';
import {planCachedDecoding, StepPlan} from '../../src/generate/graph_plan';
import {GraphStepper} from '../../src/generate/graph_step';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';

const V = 13;
const D = 16;
const MAX = 12;
type S = tf.SymbolicTensor;

/** Random weights, reproducible: every weight normal(0, 0.5) from its own seed. */
function randomize(model: tf.LayersModel, seed = 3): tf.LayersModel {
  model.setWeights(
    model.getWeights().map((w, i) => tf.randomNormal(w.shape, 0, 0.5, 'float32', seed + i)),
  );
  return model;
}

/** Attention, residual, layer norm, feed-forward, residual, layer norm. */
function block(x: S, attention: tf.layers.Layer, preAttention?: tf.layers.Layer): S {
  const q = preAttention ? (preAttention.apply(x) as S) : x;
  const a = attention.apply(q) as S;
  const h = tf.layers.layerNormalization().apply(tf.layers.add().apply([x, a])) as S;
  const f = tf.layers.dense({units: 2 * D, activation: 'relu'}).apply(h) as S;
  const g = tf.layers.dense({units: D}).apply(tf.layers.dropout({rate: 0.1}).apply(f) as S) as S;
  return tf.layers.layerNormalization().apply(tf.layers.add().apply([h, g])) as S;
}

const causalMha = () => new MultiHeadAttention({numHeads: 4, keyDim: 4, useCausalMask: true});

/** TokenAndPositionEmbedding, 2 causal MultiHeadAttention blocks, Dense logits. */
function tpeModel(length: number | null = null, maskZero = false): tf.LayersModel {
  const ids = tf.input({shape: [length], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
    maskZero,
  }).apply(ids) as S;
  x = block(block(x, causalMha()), causalMha());
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S}));
}

/**
 * ReversibleEmbedding (tied) + PositionEmbedding; a GroupQueryAttention block whose attention
 * input is rotated by RotaryEmbedding; a MultiHeadAttention block; the reverse embedding head.
 */
function gqaModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const emb = new ReversibleEmbedding({inputDim: V, outputDim: D});
  const tokens = emb.apply(ids) as S;
  const pos = new PositionEmbedding({sequenceLength: MAX}).apply(tokens) as S;
  let x = tf.layers.add().apply([tokens, pos]) as S;
  const gqa = new GroupQueryAttention({
    headDim: 4,
    numQueryHeads: 4,
    numKeyValueHeads: 2,
    useCausalMask: true,
  });
  x = block(block(x, gqa, new RotaryEmbedding()), causalMha());
  return randomize(tf.model({inputs: ids, outputs: emb.apply(x) as S}));
}

/** Embedding + SinePositionEncoding, CachedMultiHeadAttention, EinsumDense feed-forward. */
function sineModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const tokens = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
  const sine = new SinePositionEncoding().apply(tokens) as S;
  let x = tf.layers.add().apply([tokens, sine]) as S;
  const att = new CachedMultiHeadAttention({numHeads: 2, keyDim: 8, useCausalMask: true});
  x = block(x, att);
  const ff = new EinsumDense({equation: 'abc,cd->abd', outputShape: [null, V], biasAxes: 'd'});
  return randomize(tf.model({inputs: ids, outputs: ff.apply(x) as S}));
}

/**
 * maskZero on the embedding, but the only attention is CachedMultiHeadAttention, which ignores
 * Keras masks: the mask changes nothing, and the cache is used.
 */
function maskedCachedModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  const emb = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
    maskZero: true,
  });
  const x = block(
    emb.apply(ids) as S,
    new CachedMultiHeadAttention({numHeads: 2, keyDim: 8, useCausalMask: true}),
  );
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S}));
}

/**
 * maskZero reaching two causal MultiHeadAttention layers through the package's layers alone (see
 * keepsKerasMaskExactly): keys and queries of the id 0 are masked.
 */
function maskedMhaModel(): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
    maskZero: true,
  }).apply(ids) as S;
  x = causalMha().apply(causalMha().apply(x) as S) as S;
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S}));
}

/** keras-hub style: TokenAndPositionEmbedding, two TransformerDecoders (post- and pre-norm). */
function decoderModel(maskZero = false): tf.LayersModel {
  const ids = tf.input({shape: [null], dtype: 'int32'});
  let x = new TokenAndPositionEmbedding({
    vocabularySize: V,
    sequenceLength: MAX,
    embeddingDim: D,
    maskZero,
  }).apply(ids) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D, numHeads: 2}).apply(x) as S;
  x = new TransformerDecoder({intermediateDim: 2 * D, numHeads: 4, normalizeFirst: true}).apply(
    x,
  ) as S;
  return randomize(tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(x) as S}));
}

const MODELS: Array<[string, () => tf.LayersModel]> = [
  ['TokenAndPositionEmbedding + 2 TransformerDecoders', () => decoderModel()],
  ['TokenAndPositionEmbedding + 2 MultiHeadAttention blocks', () => tpeModel()],
  ['the same with a fixed input length', () => tpeModel(MAX)],
  ['ReversibleEmbedding + PositionEmbedding, RotaryEmbedding + GroupQueryAttention', gqaModel],
  ['Embedding + SinePositionEncoding, CachedMultiHeadAttention, EinsumDense', sineModel],
  ['maskZero feeding CachedMultiHeadAttention only', maskedCachedModel],
  ['maskZero feeding TransformerDecoders (key masks)', () => decoderModel(true)],
  ['maskZero feeding MultiHeadAttention (key and query masks)', maskedMhaModel],
];

// ragged, right-padded prompts; row 2 holds a 0 inside its prompt
const PROMPTS = [
  [4, 2, 7, 1, 0],
  [5, 0, 0, 0, 0],
  [3, 0, 9, 0, 0],
];
const LENGTHS = [4, 1, 3];

/**
 * The steps whose newest id is 0 in an active row, for a model that masks the id 0: there Keras
 * masks the query too, and generate recomputes that one step (counted here from the rows alone).
 */
function zeroSteps(rows: number[][], lengths: number[], queries = true): number {
  let n = 0;
  const seesNoKey = (r: number[], i: number) =>
    r[i] === 0 && (queries || r.slice(0, i).every((v) => v === 0));
  for (let t = Math.min(...lengths); t < MAX; t++) {
    if (rows.some((r, b) => t >= lengths[b] && seesNoKey(r, t - 1))) n++;
  }
  return n;
}

/** Runs generate, returns its rows, and counts model.predict calls and leaked tensors. */
async function run(
  model: tf.LayersModel,
  options: Partial<GenerateOptions>,
  prompts: number[][] = PROMPTS,
): Promise<{rows: number[][]; predicts: number}> {
  const spy = jest.spyOn(model, 'predict');
  const before = tf.memory().numTensors;
  const out = await generate(model, prompts, {
    maxLength: MAX,
    promptLengths: prompts === PROMPTS ? LENGTHS : undefined,
    ...options,
  });
  const rows = out.arraySync();
  out.dispose();
  expect(tf.memory().numTensors).toBe(before);
  const predicts = spy.mock.calls.length;
  spy.mockRestore();
  return {rows, predicts};
}

/** Every call of the model's cache-capable layers: its length and cache update index. */
function spyAttention(model: tf.LayersModel): {
  calls: Array<[number, unknown]>;
  restore: () => void;
} {
  const calls: Array<[number, unknown]> = [];
  const spies = model.layers
    .filter((l) =>
      ['MultiHeadAttention', 'CachedMultiHeadAttention', 'GroupQueryAttention'].includes(
        l.getClassName(),
      ),
    )
    .map((l) =>
      jest.spyOn(l, 'apply').mockImplementation(function (this: tf.layers.Layer, x, kwargs) {
        const t = (Array.isArray(x) ? x[0] : x) as tf.Tensor;
        calls.push([t.shape[1] as number, (kwargs as Kwargs | undefined)?.cacheUpdateIndex]);
        return Object.getPrototypeOf(l).apply.call(this, x, kwargs);
      }),
    );
  return {calls, restore: () => spies.forEach((s) => s.mockRestore())};
}

describeBackends('generate with a key / value cache', () => {
  for (const [name, make] of MODELS) {
    describe(name, () => {
      let model: tf.LayersModel;
      beforeAll(() => {
        model = make();
      });
      afterAll(() => model.dispose());

      it('runs with a cache', () => {
        expect(cachedDecodingRefusal(model)).toBeNull();
      });

      it('each step gives the logits of the whole sequence at its last position', () => {
        const ids = [
          [4, 2, 7, 1, 0, 12, 5, 5, 9, 3, 8, 6],
          [5, 11, 0, 3, 3, 10, 2, 1, 4, 4, 7, 0],
        ];
        const before = tf.memory().numTensors;
        tf.tidy(() => {
          const whole = model.predict(tf.tensor2d(ids, [2, MAX], 'int32')) as tf.Tensor; // [2, MAX, V]
          const plan = planCachedDecoding(model).plan as StepPlan;
          const masksZero = plan.masksZeroIds;
          const stepper = new GraphStepper(plan, 2, MAX);
          // a prefill of 3 positions, then one position per step
          for (const [from, to] of [
            [0, 3],
            ...Array.from({length: MAX - 3}, (_, i) => [i + 3, i + 4]),
          ]) {
            const chunk = tf.tensor2d(
              ids.map((r) => r.slice(from, to)),
              [2, to - from],
              'int32',
            );
            const logits = stepper.step(
              chunk,
              ids.map((r) => r.slice(from, to)),
            );
            // a model that masks the id 0 masks the query of a 0 too: generate recomputes there
            if (masksZero && ids.some((r) => r[to - 1] === 0)) continue;
            expectClose(
              logits,
              tf.squeeze(tf.slice(whole, [0, to - 1, 0], [2, 1, V]), [1]),
              1e-4,
              1e-4,
            );
          }
          expect(() => stepper.step(tf.tensor2d([[1], [1]], [2, 1], 'int32'))).toThrow(
            `generate: positions ${MAX} to ${MAX} exceed maxLength ${MAX}`,
          );
          stepper.dispose();
        });
        expect(tf.memory().numTensors).toBe(before);
      });

      for (const [sampler, extra] of [
        ['greedy', {}],
        ['topK (seeded)', {sampler: 'topK', k: 4, seed: 5}],
        ['topP (seeded)', {sampler: 'topP', p: 0.8, seed: 9, temperature: 2}],
      ] as Array<[string, Partial<GenerateOptions>]>) {
        it(`${sampler}: the tokens of recomputing, ragged prompts, without one predict call`, async () => {
          const cached = await run(model, {...extra, useCache: true});
          const recomputed = await run(model, {...extra, useCache: false});
          expect(cached.rows).toEqual(recomputed.rows);
          // the cache path ran the graph itself (but for a step whose newest id is a masked 0)
          const plan = planCachedDecoding(model).plan;
          const recomputedSteps = plan?.masksZeroIds
            ? zeroSteps(cached.rows, LENGTHS, plan.zeroQueries)
            : 0;
          expect(cached.predicts).toBe(recomputedSteps);
          expect(recomputed.predicts).toBe(MAX - 1);
          // the default takes the cache too
          expect((await run(model, extra)).predicts).toBe(recomputedSteps);
          // prompts kept
          cached.rows.forEach((r, b) =>
            expect(r.slice(0, LENGTHS[b])).toEqual(PROMPTS[b].slice(0, LENGTHS[b])),
          );
        });
      }

      it('endId stops each row where recomputing stops it', async () => {
        const free = (await run(model, {useCache: false})).rows;
        const endId = free[1][3]; // a token the second row generates
        const cached = await run(model, {endId, useCache: true});
        const recomputed = await run(model, {endId, useCache: false});
        expect(cached.rows).toEqual(recomputed.rows);
        const stop = cached.rows[1].indexOf(endId, 1);
        expect(cached.rows[1].slice(stop + 1).every((t) => t === 0)).toBe(true);
        // every row stopped early: the loop ends early too
        const one = await run(model, {endId: free[1][1], useCache: true}, [[5]]);
        expect(one.rows[0]).toEqual([5, free[1][1], ...new Array(MAX - 2).fill(0)]);
      });
    });
  }

  it('the attention layers see the prompt prefix once, then one position per step', async () => {
    // the eager stepper's calls (the compiled step calls no layer: compiled_step.test.ts)
    tf.env().set('TFJS_ATTENTION_COMPILED_STEP', false);
    try {
      const model = tpeModel();
      const spy = spyAttention(model);
      await run(model, {useCache: true});
      spy.restore();
      // shortest prompt 1: no prefill; then positions 0 .. MAX - 2, one at a time, in 2 layers
      const expected = Array.from({length: MAX - 1}, (_, t) => [1, t]).flatMap((c) => [c, c]);
      expect(spy.calls).toEqual(expected);
      const again = spyAttention(model);
      await run(model, {useCache: true, promptLengths: undefined}, [
        [4, 2, 7, 1],
        [5, 6, 8, 2],
      ]);
      again.restore();
      expect(again.calls.slice(0, 2)).toEqual([
        [3, 0], // prefill of positions 0 .. 2
        [3, 0],
      ]);
      expect(
        again.calls
          .slice(2)
          .every(([n], i) => n === 1 && again.calls[i + 2][1] === 3 + Math.floor(i / 2)),
      ).toBe(true);
      model.dispose();
    } finally {
      tf.env().set('TFJS_ATTENTION_COMPILED_STEP', true);
    }
  });

  it('a tf.sequential model runs with the cache too', async () => {
    const model = randomize(
      tf.sequential({
        layers: [
          new TokenAndPositionEmbedding({
            vocabularySize: V,
            sequenceLength: MAX,
            embeddingDim: D,
            inputShape: [null],
            inputDType: 'int32',
          } as never),
          causalMha(),
          tf.layers.layerNormalization(),
          tf.layers.dense({units: V}),
        ],
      }),
    );
    expect(cachedDecodingRefusal(model)).toBeNull();
    const cached = await run(model, {sampler: 'topK', k: 3, seed: 2});
    expect(cached.predicts).toBe(0);
    expect(cached.rows).toEqual(
      (await run(model, {sampler: 'topK', k: 3, seed: 2, useCache: false})).rows,
    );
    model.dispose();
  });

  describe('falls back, saying why', () => {
    const cases: Array<[string, () => tf.LayersModel, RegExp]> = [
      [
        'non-causal attention',
        () => {
          const ids = tf.input({shape: [null], dtype: 'int32'});
          const x = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
          const a = new MultiHeadAttention({numHeads: 2, keyDim: 8, name: 'bidirectional'}).apply(
            x,
          ) as S;
          return tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(a) as S});
        },
        /layer 'bidirectional' \(MultiHeadAttention\): it is not causal/,
      ],
      [
        'a Masking mask fed to attention',
        () => {
          const ids = tf.input({shape: [null], dtype: 'int32'});
          const e = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
          const x = tf.layers.masking({maskValue: 0}).apply(e) as S;
          const a = new MultiHeadAttention({
            numHeads: 2,
            keyDim: 8,
            useCausalMask: true,
            name: 'padded',
          }).apply(x) as S;
          return tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(a) as S});
        },
        /layer 'masking_\w+' \(Masking\): not known to compute each position alone/,
      ],
      [
        'an unknown layer (a recurrent one)',
        () => {
          const ids = tf.input({shape: [null], dtype: 'int32'});
          const e = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
          const rnn = tf.layers.simpleRNN({units: D, returnSequences: true, name: 'rnn'});
          return tf.model({
            inputs: ids,
            outputs: tf.layers.dense({units: V}).apply(rnn.apply(e)) as S,
          });
        },
        /layer 'rnn' \(SimpleRNN\): not known to compute each position alone/,
      ],
      [
        'a nested model',
        () => {
          const inner = tf.sequential({
            layers: [tf.layers.dense({units: V, inputShape: [null, D]})],
            name: 'inner',
          });
          const ids = tf.input({shape: [null], dtype: 'int32'});
          const e = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
          return tf.model({inputs: ids, outputs: inner.apply(e) as S});
        },
        /layer 'inner' \(Sequential\): a nested model/,
      ],
      [
        'a layer norm over the sequence axis',
        () => {
          const ids = tf.input({shape: [MAX], dtype: 'int32'});
          const e = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
          const mix = tf.layers.layerNormalization({axis: 1, name: 'mixer'}).apply(e) as S;
          return tf.model({inputs: ids, outputs: tf.layers.dense({units: V}).apply(mix) as S});
        },
        /layer 'mixer' \(LayerNormalization\): its normalized axis 1 is the batch or sequence axis/,
      ],
    ];
    for (const [name, make, reason] of cases) {
      it(name, async () => {
        const model = randomize(make());
        expect(cachedDecodingRefusal(model)).toMatch(reason);
        const reasons: string[] = [];
        const fallback = await run(model, {onFallback: (r) => reasons.push(r)});
        expect(reasons).toHaveLength(1);
        expect(reasons[0]).toMatch(reason);
        expect(fallback.predicts).toBe(MAX - 1);
        expect(fallback.rows).toEqual((await run(model, {useCache: false})).rows);
        await expect(
          generate(model, PROMPTS, {maxLength: MAX, promptLengths: LENGTHS, useCache: true}),
        ).rejects.toThrow(
          /^generate: useCache is true but the model cannot be decoded with a cache: layer '/,
        );
        model.dispose();
      });
    }

    const favourZero = (model: tf.LayersModel, bias: number) => {
      const head = model.layers[model.layers.length - 1];
      const b = tf.tensor1d([bias, ...new Array(V - 1).fill(0)]);
      head.setWeights([head.getWeights()[0], b]);
      b.dispose();
    };
    const maskZeroModels: Array<[string, () => tf.LayersModel, boolean]> = [
      ['TransformerDecoders (key padding masks)', () => decoderModel(true), false],
      ['MultiHeadAttention (key and query masks)', maskedMhaModel, true],
    ];
    for (const [name, make, queries] of maskZeroModels) {
      it(`a maskZero mask of the ids reaching attention, ${name}: 0s are masked keys in the cache`, async () => {
        const model = make();
        expect(cachedDecodingRefusal(model)).toBeNull();
        const reasons: string[] = [];
        // prompts holding 0s (row 1 is a lone 5, row 2 has a 0 inside); the id 0 favoured in
        // generation (the least bias, by recomputing, that makes some generated positions 0)
        let recomputed: {rows: number[][]; predicts: number} | null = null;
        const generatedZeros = (rows: number[][]) =>
          rows.flatMap((r, b) => r.slice(LENGTHS[b])).filter((v) => v === 0).length;
        const biases = [...Array.from({length: 24}, (_, i) => i / 4), 8, 11, 16, 23, 32, 45, 64];
        for (const bias of biases) {
          favourZero(model, bias);
          recomputed = await run(model, {useCache: false});
          if (generatedZeros(recomputed.rows) >= 2) break;
        }
        const cached = await run(model, {useCache: true, onFallback: (r) => reasons.push(r)});
        expect(cached.rows).toEqual(recomputed?.rows);
        expect(reasons).toEqual([]);
        expect(generatedZeros(cached.rows)).toBeGreaterThanOrEqual(2);
        // only the steps whose newest id is 0 are recomputed
        expect(planCachedDecoding(model).plan?.zeroQueries).toBe(queries);
        const zeros = zeroSteps(cached.rows, LENGTHS, queries);
        expect(zeros).toBeLessThan(MAX - Math.min(...LENGTHS));
        expect(cached.predicts).toBe(zeros);
        // prompts of 0s first (row 1 is a lone 0): queries that see no key, and the tokens are still equal
        const leading = [
          [0, 0, 4, 2, 0],
          [0, 0, 0, 0, 0],
          [3, 0, 9, 0, 0],
        ];
        const lengths = {promptLengths: [5, 1, 3]};
        const a = await run(model, {useCache: true, ...lengths}, leading);
        expect(a.rows).toEqual((await run(model, {useCache: false, ...lengths}, leading)).rows);
        expect(a.predicts).toBe(zeroSteps(a.rows, [5, 1, 3], queries));
        expect(a.predicts).toBeGreaterThan(0); // row 1's first query sees no key
        model.dispose();
      });
    }

    it('a maskZero mask passing tfjs layers before attention: cached while no known id is 0', async () => {
      // tfjs' Add garbles the mask (keepsKerasMaskExactly): predict's logits then depend on later
      // positions, which a cache cannot follow, so the cache serves until a 0 is known
      const model = tpeModel(null, true);
      expect(planCachedDecoding(model).plan?.zeroKeysExact).toBe(false);
      const clean = PROMPTS.map((r) => r.map((v) => (v === 0 ? 3 : v)));
      const cached = await run(model, {useCache: true}, clean);
      expect(cached.predicts).toBe(0);
      expect(cached.rows).toEqual((await run(model, {useCache: false}, clean)).rows);
      const reasons: string[] = [];
      const withZero = await run(model, {onFallback: (r) => reasons.push(r)});
      expect(reasons).toEqual([
        "a prompt holds the id 0 and the model's mask of the id 0 (mask_zero) reaches attention " +
          'through tfjs layers, whose mask a cache cannot follow',
      ]);
      expect(withZero.rows).toEqual((await run(model, {useCache: false})).rows);
      favourZero(model, 1e4);
      const later: string[] = [];
      const switched = await run(model, {onFallback: (r) => later.push(r)}, clean);
      expect(later).toEqual([
        `position ${clean[0].length} holds the id 0 and the model's mask of the id 0 ` +
          '(mask_zero) reaches attention through tfjs layers: recomputing from there',
      ]);
      expect(switched.predicts).toBeGreaterThan(0);
      expect(switched.rows).toEqual((await run(model, {useCache: false}, clean)).rows);
      model.dispose();
    });

    it('ids and a padding mask (keras-hub backbones): cached, the mask left out of the steps', async () => {
      const ids = tf.input({shape: [null], dtype: 'int32'});
      const padding = tf.input({shape: [null], dtype: 'int32'});
      let x = new TokenAndPositionEmbedding({
        vocabularySize: V,
        sequenceLength: MAX,
        embeddingDim: D,
      }).apply(ids) as S;
      for (const normalizeFirst of [false, true]) {
        x = new TransformerDecoder({intermediateDim: D, numHeads: 2, normalizeFirst}).apply(x, {
          decoderPaddingMask: padding,
        }) as S;
      }
      const model = randomize(
        tf.model({inputs: [ids, padding], outputs: tf.layers.dense({units: V}).apply(x) as S}),
      );
      expect(cachedDecodingRefusal(model)).toBeNull();
      const cached = await run(model, {useCache: true});
      expect(cached.predicts).toBe(0);
      // recomputing feeds the mask of the known positions (all ones there, zeros after)
      const recomputed = await run(model, {useCache: false});
      expect(recomputed.predicts).toBeGreaterThan(0);
      expect(cached.rows).toEqual(recomputed.rows);
      model.dispose();
    });

    it('two inputs where the second is not a padding mask', async () => {
      const ids = tf.input({shape: [null], dtype: 'int32'});
      const extra = tf.input({shape: [null, D]});
      const x = tf.layers.embedding({inputDim: V, outputDim: D}).apply(ids) as S;
      const sum = tf.layers.add().apply([x, extra]) as S;
      const model = tf.model({
        inputs: [ids, extra],
        outputs: tf.layers.dense({units: V}).apply(sum) as S,
      });
      expect(cachedDecodingRefusal(model)).toBe(
        'the model has 2 inputs; cached decoding needs ids alone, or ids and a padding mask [batch, T]',
      );
      await expect(generate(model, PROMPTS, {maxLength: MAX})).rejects.toThrow(
        /generate: the model is not a causal language model: expected a model taking token ids \[batch, length\] \(and optionally a padding mask/,
      );
      model.dispose();
    });
  });
});
