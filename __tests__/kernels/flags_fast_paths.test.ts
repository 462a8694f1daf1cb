/**
 * Every fast path against the plain one, with proof of which path ran (the kernels tfjs ran, from
 * tf.profile): the package's own kernels (TFJS_ATTENTION_OWN_KERNELS) against tfjs' ops in
 * MultiHeadAttention, query blocks against whole attention, and each own kernel against a plain
 * loop or tfjs' op — outputs and gradients, tolerance 1e-5 (abs and rel) unless stated.
 */
import * as tf from '@tensorflow/tfjs';

import {MultiHeadAttention} from '../../src';
import {BLOCK_ABOVE, BLOCK_TARGET, OWN_KERNELS} from '../../src/kernels/flags';
import {fanOut} from '../../src/kernels/fan_out';
import {softmaxWithFill} from '../../src/kernels/fused_softmax';
import {mm} from '../../src/kernels/matmul';
import {queryBlocks} from '../../src/ops/attention_core';
import {maskFill} from '../../src/ops/masking';
import {swapAxes12} from '../../src/kernels/swap_axes';
import {describeBackends} from '../helpers/backends';
import {kernelsOf, withFlags, withSimdKernels} from '../helpers/kernels';
import {expectClose} from '../helpers/close';
import {randTensor} from '../helpers/data';

const TOL = 1e-5;

const count = (names: string[], name: string) => names.filter((n) => n === name).length;
/** Matrix products: tfjs' BatchMatMul, or the package's SIMD sgemm on cpu. */
const products = (names: string[]) =>
  count(names, 'BatchMatMul') + count(names, 'TfjsAttentionMatMul');

/** Output, scores and the gradients of every weight and float input. */
function run(layer: MultiHeadAttention, inputs: tf.Tensor[], kwargs: Record<string, unknown>) {
  return tf.tidy(() => {
    const g = randTensor(layer.computeOutputShape(inputs.map((x) => x.shape)) as number[], 99);
    const vars = layer.trainableWeights.map((v) => v.read() as tf.Variable);
    const loss = (xs: tf.Tensor[]) =>
      tf.sum(tf.mul(layer.apply(xs, kwargs) as tf.Tensor, g)) as tf.Scalar;
    const {grads} = tf.variableGrads(() => loss(inputs), vars);
    const inputGrads = tf.grads((...xs: tf.Tensor[]) => loss(xs))(inputs);
    const out = layer.apply(inputs, {...kwargs, returnAttentionScores: true}) as tf.Tensor[];
    return {out, grads: vars.map((v) => grads[v.name]), inputGrads};
  });
}

type Result = ReturnType<typeof run>;

function expectSame(a: Result, b: Result, tol = TOL): void {
  a.out.forEach((t, i) => expectClose(t, b.out[i], tol, tol));
  a.grads.forEach((t, i) => expectClose(t, b.grads[i], tol, tol));
  a.inputGrads.forEach((t, i) => expectClose(t, b.inputGrads[i], tol, tol));
}

function mhaCase(args: ConstructorParameters<typeof MultiHeadAttention>[0], cross: boolean) {
  const layer = new MultiHeadAttention(args);
  const q = randTensor([2, 4, 6], 1);
  const inputs = cross ? [q, randTensor([2, 5, 5], 2), randTensor([2, 5, 7], 3)] : [q];
  layer.apply(inputs);
  layer.setWeights(layer.getWeights().map((w, i) => randTensor(w.shape, 20 + i, 0.5)));
  return {layer, inputs};
}

describeBackends('fast paths', (backend) => {
  const cases: Array<{
    name: string;
    args: ConstructorParameters<typeof MultiHeadAttention>[0];
    cross: boolean;
    kwargs: () => Record<string, unknown>;
  }> = [
    {name: 'self-attention', args: {numHeads: 2, keyDim: 3}, cross: false, kwargs: () => ({})},
    {
      name: 'cross, key, valueDim, 2-D outputShape, no bias',
      args: {numHeads: 3, keyDim: 2, valueDim: 4, outputShape: [2, 3], useBias: false},
      cross: true,
      kwargs: () => ({}),
    },
    {
      name: '1-D lengths and causal',
      args: {numHeads: 2, keyDim: 3, useCausalMask: true},
      cross: false,
      kwargs: () => ({validLens: tf.tensor1d([3, 0], 'int32')}),
    },
    {
      name: '2-D lengths and an attention mask',
      args: {numHeads: 2, keyDim: 3},
      cross: true,
      kwargs: () => ({
        validLens: tf.tensor2d([1, 5, 2, 4, 3, 3, 5, 0], [2, 4], 'int32'),
        attentionMask: tf.greater(randTensor([2, 4, 5], 8), -0.4),
      }),
    },
    {
      name: 'gate and sliding window',
      args: {numHeads: 2, keyDim: 3, useGate: true, slidingWindow: 2},
      cross: false,
      kwargs: () => ({}),
    },
  ];

  for (const c of cases) {
    it(`MultiHeadAttention with own kernels = with tfjs' ops only: ${c.name}`, async () => {
      const {layer, inputs} = mhaCase(c.args, c.cross);
      const kwargs = c.kwargs();
      const call = () => layer.apply(inputs, kwargs) as tf.Tensor;
      const own = await kernelsOf(call);
      const plain = await withFlags({[OWN_KERNELS]: false}, () => kernelsOf(call));
      if (backend === 'cpu') {
        // the fused masked softmax, the head transposes and the products (q kᵀ, weights · v,
        // and the projections) are the package's kernels
        expect(count(own, 'TfjsAttentionMaskedSoftmax')).toBe(1);
        expect(count(own, 'TfjsAttentionSwapAxes12')).toBeGreaterThanOrEqual(4);
        expect(count(plain, 'TfjsAttentionMaskedSoftmax')).toBe(0);
        expect(count(plain, 'TfjsAttentionSwapAxes12')).toBe(0);
        expect(count(plain, 'Softmax')).toBe(1);
      }
      if (backend === 'cpu' || backend === 'wasm') {
        // the products (q kᵀ, weights · v, and the projections) are the package's SIMD sgemm
        expect(count(own, 'TfjsAttentionMatMul')).toBeGreaterThanOrEqual(2);
        expect(count(own, 'BatchMatMul')).toBe(0);
        expect(count(plain, 'TfjsAttentionMatMul')).toBe(0);
      }
      if (backend === 'wasm') {
        // without the SIMD module: explicit transposes instead of matMul's transpose flags (q kᵀ)
        await withSimdKernels(false, async () => {
          const layout = await kernelsOf(call);
          expect(count(layout, 'Transpose')).toBeGreaterThan(count(plain, 'Transpose'));
          const r1 = run(layer, inputs, kwargs);
          const r2 = withFlags({[OWN_KERNELS]: false}, () => run(layer, inputs, kwargs));
          expectSame(r1, r2);
          tf.dispose([r1, r2]);
        });
      }
      const fast = run(layer, inputs, kwargs);
      const slow = withFlags({[OWN_KERNELS]: false}, () => run(layer, inputs, kwargs));
      expectSame(fast, slow);
      tf.dispose([fast, slow, inputs, Object.values(kwargs) as tf.Tensor[]]);
      layer.dispose();
    });
  }

  it('query blocks (chunkSize) = whole attention, and blocks ran', async () => {
    const args = {numHeads: 2, keyDim: 3, useCausalMask: true};
    const blocked = mhaCase({...args, chunkSize: 2}, false);
    const whole = mhaCase({...args, chunkSize: 0}, false);
    whole.layer.setWeights(blocked.layer.getWeights());
    const lens = tf.tensor2d([1, 2, 3, 4, 4, 4, 2, 1], [2, 4], 'int32');
    const names = (m: typeof blocked) =>
      kernelsOf(() => m.layer.apply(m.inputs, {validLens: lens}) as tf.Tensor);
    const b = await names(blocked);
    const w = await names(whole);
    // 4 queries in blocks of 2: two extra products (q kᵀ and weights · v) for the second block
    expect(products(b) - products(w)).toBe(2);
    expect(count(b, 'Concat')).toBeGreaterThan(count(w, 'Concat'));
    // on cpu the blocks' queries come from one [T, n, K] layout and their outputs are joined in
    // [T, n, V] (contiguous slices and concat between head swaps: 1 + 2 for the queries of the 2
    // blocks, 2 + 1 for their outputs), not through tfjs' element-by-element Slice / split
    const swaps = count(b, 'TfjsAttentionSwapAxes12') - count(w, 'TfjsAttentionSwapAxes12');
    expect(swaps).toBe(backend === 'cpu' ? 1 + 2 + 2 + 1 : 0);
    // gradients: the queries' blocks come from one split, whose gradient is one concat (no pad
    // of each block to the whole queries); on cpu the blocks' keys and values are fanned out, so
    // their gradients are summed by one AddN each, not by an Add per extra block
    const gradNames = (m: typeof blocked) =>
      kernelsOf(() =>
        tf.grads((x: tf.Tensor) => m.layer.apply([x], {validLens: lens}) as tf.Tensor)(m.inputs),
      );
    const gb = await gradNames(blocked);
    const gw = await gradNames(whole);
    expect(count(gb, 'PadV2')).toBe(0);
    expect(count(gb, 'AddN') - count(gw, 'AddN')).toBe(backend === 'cpu' ? 2 : 0);
    expect(count(gb, 'Add') - count(gw, 'Add')).toBe(backend === 'cpu' ? 0 : 2);
    const r1 = run(blocked.layer, blocked.inputs, {validLens: lens});
    const r2 = run(whole.layer, whole.inputs, {validLens: lens});
    expectSame(r1, r2);
    tf.dispose([r1, r2, lens, blocked.inputs, whole.inputs]);
  });

  it('MultiHeadAttention reshapes nothing to the shape it has (each reshape is a native op on tfjs-node)', async () => {
    const {layer, inputs} = mhaCase({numHeads: 2, keyDim: 3}, true);
    const info = await tf.profile(() => layer.apply(inputs) as tf.Tensor);
    tf.dispose(info.result as tf.Tensor);
    const reshapes = info.kernels.filter((k) => k.name === 'Reshape');
    expect(reshapes.length).toBeGreaterThan(0);
    const noOps = reshapes.filter(
      (k) => JSON.stringify(k.inputShapes[0]) === JSON.stringify(k.outputShapes[0]),
    );
    expect(noOps.map((k) => k.inputShapes[0])).toEqual([]);
    tf.dispose(inputs);
  });

  it('automatic block size: 2^21 score elements (2^23 on tensorflow) unless the flag is set', () => {
    // 4 heads x 2048 x 2048 = 2^24 score elements, above 2^23: blocks of target / (4 * 2048) queries
    const blocks = queryBlocks(4, 2048, 2048, null);
    expect(blocks.length).toBe(backend === 'tensorflow' ? 2 : 8);
    expect(blocks[0]).toEqual([0, backend === 'tensorflow' ? 1024 : 256]);
    expect(
      withFlags({[BLOCK_TARGET]: 2 ** 20}, () => queryBlocks(4, 2048, 2048, null)),
    ).toHaveLength(16);
    // below the threshold: one block
    expect(queryBlocks(4, 1024, 2048, null)).toEqual([[0, 1024]]);
  });

  it('automatic query blocks (thresholds as tfjs flags) = whole attention, and blocks ran', async () => {
    // 2 x 2 x 9 x 9 = 324 score elements > 100: blocks of floor(40 / (2 * 2 * 9)) = 1 query
    const small = {[BLOCK_ABOVE]: 100, [BLOCK_TARGET]: 40};
    const x = randTensor([2, 9, 4], 4);
    const layer = new MultiHeadAttention({numHeads: 2, keyDim: 2, useCausalMask: true});
    layer.apply(x);
    const call = () => layer.apply(x) as tf.Tensor;
    const auto = await withFlags(small, () => kernelsOf(call));
    const whole = await kernelsOf(call);
    expect(products(auto) - products(whole)).toBe(2 * 8);
    const a = withFlags(small, () => run(layer, [x], {}));
    const w = run(layer, [x], {});
    expectSame(a, w);
    tf.dispose([a, w, x]);
  });

  it('softmaxWithFill = softmax(where(mask, logits, fill)), with its gradient', async () => {
    const logits = tf.mul(randTensor([2, 3, 4, 6], 5), 10);
    // random keys masked, and query 0 of batch 0 fully masked (uniform weights, zero gradient)
    const rowOff = tf.tensor4d([0, 1, 1, 1, 1, 1, 1, 1], [2, 1, 4, 1]);
    const mask = tf.logicalAnd(
      tf.greater(randTensor([2, 1, 4, 6], 6), -0.3),
      tf.cast(rowOff, 'bool'),
    );
    const fill = maskFill(mask, 4);
    const names = await kernelsOf(() => softmaxWithFill(logits, fill));
    // the fused kernel on cpu, and on wasm in its heap; composed tfjs ops elsewhere
    expect(count(names, 'TfjsAttentionMaskedSoftmax')).toBe(backend === 'tensorflow' ? 0 : 1);
    tf.tidy(() => {
      const composed = (x: tf.Tensor) =>
        tf.softmax(tf.where(tf.broadcastTo(mask, x.shape), x, tf.scalar(-1e9)));
      expectClose(softmaxWithFill(logits, fill), composed(logits), TOL, TOL);
      expectClose(softmaxWithFill(logits, null), tf.softmax(logits), TOL, TOL);
      const dy = randTensor(logits.shape, 7);
      const g1 = tf.grad((x: tf.Tensor) => tf.sum(tf.mul(softmaxWithFill(x, fill), dy)))(logits);
      const g2 = tf.grad((x: tf.Tensor) => tf.sum(tf.mul(composed(x), dy)))(logits);
      expectClose(g1, g2, TOL, TOL);
    });
    tf.dispose([logits, mask, fill, rowOff]);
  });

  // the fused masked softmax (cpu, wasm): tfjs' composed path has no gradient for its Equal
  if (backend !== 'tensorflow') {
    it("a gradient through a broadcast float attention mask has the mask's shape (zeros)", () => {
      const layer = new MultiHeadAttention({numHeads: 2, keyDim: 3});
      const q = randTensor([2, 3, 4], 16);
      const v = randTensor([2, 5, 4], 17);
      const m = tf.tensor([[[1, 1, 0, 1, 0]], [[1, 0, 1, 1, 1]]]); // [batch, 1, keys]: broadcast over the queries
      layer.apply([q, v]);
      tf.tidy(() => {
        const g = tf.grad((mm: tf.Tensor) =>
          tf.sum(layer.apply([q, v], {attentionMask: mm}) as tf.Tensor),
        )(m);
        expect(g.shape).toEqual([2, 1, 5]);
        expectClose(g, tf.zerosLike(m), 0, 0);
      });
      layer.dispose();
      tf.dispose([q, v, m]);
    });
  }

  it('softmaxWithFill refuses a fill that does not broadcast (the kernels would read past it)', () => {
    const logits = randTensor([2, 3, 4], 18);
    const fill = tf.zeros([2, 3, 5]);
    expect(() => softmaxWithFill(logits, fill)).toThrow(
      'softmaxWithFill: fill of shape [2,3,5] does not broadcast to logits [2,3,4]',
    );
    tf.dispose([logits, fill]);
  });

  it('fanOut: handles on the same values; the gradient sums every reader (zeros for an unused one)', async () => {
    const x = randTensor([3, 4], 13);
    const before = tf.memory().numTensors;
    const names = await kernelsOf(() => tf.tidy(() => tf.stack(fanOut(x, 3)))); // (not x itself)
    expect(count(names, 'TfjsAttentionFanOut')).toBe(backend === 'cpu' ? 1 : 0);
    const [g1, g2] = [randTensor([3, 4], 14), randTensor([3, 4], 15)];
    tf.tidy(() => {
      const hs = fanOut(x, 3);
      hs.forEach((h) => expectClose(h, x, 0, 0));
      // readers 0 and 2 (reader 1 unused): d/dx sum(h0 * g1 + h2 * g2) = g1 + g2
      const dx = tf.grad((t: tf.Tensor) => {
        const [a, , c] = fanOut(t, 3);
        return tf.add(tf.sum(tf.mul(a, g1)), tf.sum(tf.mul(c, g2)));
      })(x);
      const want = tf.tensor(
        Array.from(g1.dataSync(), (v, i) => v + g2.dataSync()[i]),
        [3, 4],
      );
      expectClose(dx, want, 1e-6, 1e-6);
      expect(fanOut(x, 1)).toEqual([x]);
    });
    expect(tf.memory().numTensors).toBe(before + 2); // only g1 and g2
    tf.dispose([x, g1, g2]);
  });

  if (backend === 'cpu') {
    it('swapAxes12 (own cpu kernel) = a plain-loop permutation, with its gradient', async () => {
      const x = randTensor([2, 3, 4, 5], 8);
      expect(count(await kernelsOf(() => swapAxes12(x)), 'TfjsAttentionSwapAxes12')).toBe(1);
      const src = x.dataSync();
      const expected = new Float32Array(src.length);
      for (let a = 0; a < 2; a++)
        for (let b = 0; b < 3; b++)
          for (let c = 0; c < 4; c++)
            for (let d = 0; d < 5; d++)
              expected[((a * 4 + c) * 3 + b) * 5 + d] = src[((a * 3 + b) * 4 + c) * 5 + d];
      tf.tidy(() => {
        expectClose(swapAxes12(x), tf.tensor(expected, [2, 4, 3, 5]), 0, 0);
        // the permutation is its own inverse: the gradient of sum(swap(x) * dy) is swap(dy)
        const dy = tf.tensor(expected, [2, 4, 3, 5]);
        const g = tf.grad((t: tf.Tensor) => tf.sum(tf.mul(swapAxes12(t), dy)))(x);
        expectClose(g, x, 0, 0);
      });
      x.dispose();
    });
  }

  if (backend === 'wasm') {
    it('mm without the SIMD module (explicit transposes, 2-D loops) = plain loops and tf.matMul, with gradients', async () => {
      await withSimdKernels(false, async () => {
        for (const [b, m, k, n] of [
          [3, 4, 5, 6],
          [2, 256, 16, 600], // large slices: a loop of 2-D products
        ]) {
          for (const ta of [false, true]) {
            for (const tb of [false, true]) {
              const a = randTensor(ta ? [b, k, m] : [b, m, k], 10);
              const c = randTensor(tb ? [b, n, k] : [b, k, n], 11);
              const names = await kernelsOf(() => mm(a, c, ta, tb));
              expect(count(names, 'Transpose')).toBe(Number(ta) + Number(tb));
              expect(count(names, 'Unpack')).toBe(m * k * n >= 2 ** 21 ? 2 : 0);
              tf.tidy(() => {
                const y = mm(a, c, ta, tb);
                if (m * n * k < 1000) {
                  const A = a.arraySync() as number[][][];
                  const C = c.arraySync() as number[][][];
                  const ref = A.map((_, s) =>
                    Array.from({length: m}, (_r, i) =>
                      Array.from({length: n}, (_c, j) => {
                        let sum = 0;
                        for (let l = 0; l < k; l++)
                          sum += (ta ? A[s][l][i] : A[s][i][l]) * (tb ? C[s][j][l] : C[s][l][j]);
                        return sum;
                      }),
                    ),
                  );
                  expectClose(y, tf.tensor(ref), TOL, TOL);
                }
                expectClose(y, tf.matMul(a, c, ta, tb), 1e-4, 1e-4);
                const dy = randTensor([b, m, n], 12);
                const f1 = tf.grads((x: tf.Tensor, z: tf.Tensor) =>
                  tf.sum(tf.mul(mm(x, z, ta, tb), dy)),
                )([a, c]);
                const f2 = tf.grads((x: tf.Tensor, z: tf.Tensor) =>
                  tf.sum(tf.mul(tf.matMul(x, z, ta, tb), dy)),
                )([a, c]);
                f1.forEach((g, i) => expectClose(g, f2[i], 1e-4, 1e-4));
              });
              tf.dispose([a, c]);
            }
          }
        }
      });
    });
  }
});
