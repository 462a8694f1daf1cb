import * as tf from '@tensorflow/tfjs';
import fc from 'fast-check';

import {einsum} from '../../src/ops/einsum';
import {parseEquation} from '../../src/ops/einsum_equation';
import {describeBackends, expectNoLeak} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {naiveEinsum} from '../helpers/naive_einsum';

interface Case {
  terms: string[];
  output: string;
  sizes: Record<string, number>;
  seed: number;
}

const LETTERS = 'abcdef';

/** Random equations: 1-3 operands over up to 5 labels of size 1-4, any output order. */
const caseArb: fc.Arbitrary<Case> = fc
  .record({
    nLabels: fc.integer({min: 1, max: 5}),
    sizes: fc.array(fc.integer({min: 1, max: 4}), {minLength: 5, maxLength: 5}),
    nOps: fc.integer({min: 1, max: 3}),
    seed: fc.integer({min: 1, max: 1e6}),
  })
  .chain(({nLabels, sizes, nOps, seed}) => {
    const labels = LETTERS.slice(0, nLabels).split('');
    const term = fc
      .shuffledSubarray(labels, {minLength: 0, maxLength: Math.min(3, nLabels)})
      .map((a) => a.join(''));
    return fc
      .tuple(fc.array(term, {minLength: nOps, maxLength: nOps}), fc.constant(labels))
      .chain(([terms, ls]) => {
        const used = [...new Set(terms.join(''))];
        return fc.shuffledSubarray(used.length ? used : ls.slice(0, 0)).map((out) => ({
          terms,
          output: out.join(''),
          sizes: Object.fromEntries(ls.map((l, i) => [l, sizes[i]])),
          seed,
        }));
      });
  });

function randomData(n: number, seed: number): Float32Array {
  // Deterministic values in [-1, 1) (a small LCG; independent of tf's RNG).
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

function operandsFor(c: Case) {
  return c.terms.map((t, k) => {
    const shape = [...t].map((l) => c.sizes[l]);
    const n = shape.reduce((p, d) => p * d, 1);
    return {labels: t, shape, data: randomData(n, c.seed + 7919 * k)};
  });
}

describeBackends('einsum', () => {
  it('matches a plain-loop einsum on random equations (property, atol 1e-4)', () => {
    fc.assert(
      fc.property(caseArb, (c) => {
        const ops = operandsFor(c);
        const eq = `${c.terms.join(',')}->${c.output}`;
        const expected = naiveEinsum(ops, c.output, c.sizes);
        tf.tidy(() => {
          const y = einsum(eq, ...ops.map((o) => tf.tensor(o.data, o.shape)));
          expect(y.shape).toEqual([...c.output].map((l) => c.sizes[l]));
          expectClose(y, Array.from(expected), 1e-4, 1e-4);
        });
      }),
      {numRuns: 150, seed: 42},
    );
  });

  it('has gradients equal to the plain-loop gradient einsum (property, atol 1e-4)', () => {
    fc.assert(
      fc.property(
        caseArb.filter((c) => c.terms.length === 2),
        (c) => {
          const ops = operandsFor(c);
          const eq = `${c.terms.join(',')}->${c.output}`;
          const outShape = [...c.output].map((l) => c.sizes[l]);
          const g = randomData(
            outShape.reduce((p, d) => p * d, 1),
            c.seed + 1,
          );
          // d/dA sum(einsum(A, B) * G) = einsum(G, B -> A-labels), computed by loops.
          const expectedA = naiveEinsum(
            [
              {labels: c.output, data: g},
              {labels: ops[1].labels, data: ops[1].data},
            ],
            ops[0].labels,
            c.sizes,
          );
          tf.tidy(() => {
            const b = tf.tensor(ops[1].data, ops[1].shape);
            const gt = tf.tensor(g, outShape);
            const gradA = tf.grad((a: tf.Tensor) => tf.sum(tf.mul(einsum(eq, a, b), gt)))(
              tf.tensor(ops[0].data, ops[0].shape),
            );
            expectClose(gradA, Array.from(expectedA), 1e-4, 1e-4);
          });
        },
      ),
      {numRuns: 80, seed: 7},
    );
  });

  it('computes the MultiHeadAttention equations like loops', () => {
    const sizes = {a: 2, b: 3, c: 2, d: 4, e: 5};
    for (const [eq, t1, t2, out] of [
      ['abc,cde->abde', 'abc', 'cde', 'abde'],
      ['aecd,abcd->acbe', 'aecd', 'abcd', 'acbe'],
      ['acbe,aecd->abcd', 'acbe', 'aecd', 'abcd'],
      ['abcd,cde->abe', 'abcd', 'cde', 'abe'],
    ]) {
      const ops = operandsFor({terms: [t1, t2], output: out, sizes, seed: 3});
      const expected = naiveEinsum(ops, out, sizes);
      tf.tidy(() => {
        const y = einsum(eq, ...ops.map((o) => tf.tensor(o.data, o.shape)));
        expectClose(y, Array.from(expected), 1e-5, 1e-5);
      });
    }
  });

  it('supports an ellipsis with numpy broadcasting', () => {
    tf.tidy(() => {
      const a = tf.tensor(randomData(2 * 3 * 4, 1), [2, 3, 4]);
      const w = tf.tensor(randomData(4 * 5, 2), [4, 5]);
      const ref = tf.reshape(tf.matMul(tf.reshape(a, [6, 4]), w), [2, 3, 5]);
      expectClose(einsum('...i,ij->...j', a, w), ref);
      // broadcast a size-1 ellipsis dim against 2
      const x = tf.tensor(randomData(1 * 3 * 4, 3), [1, 3, 4]);
      const y = tf.tensor(randomData(2 * 1 * 4, 4), [2, 1, 4]);
      const expected = tf.sum(tf.mul(x, y), -1); // [2, 3]
      expectClose(einsum('...i,...i->...', x, y), expected);
      // implicit output: letters appearing once, sorted
      expectClose(einsum('ij,jk', tf.ones([2, 3]), tf.ones([3, 4])), tf.fill([2, 4], 3));
      expectClose(einsum('ba', tf.tensor2d([[1, 2]])), tf.tensor2d([[1], [2]]));
    });
  });

  it('agrees with tf.einsum where tfjs supports the equation', () => {
    if (tf.getBackend() === 'wasm') {
      // tf.einsum has no wasm kernel; the comparison runs on the other backends.
      expect(() => tf.einsum('ij,jk->ik', tf.ones([2, 2]), tf.ones([2, 2]))).toThrow(/Einsum/);
      return;
    }
    for (const eq of ['ij,jk->ik', 'bij,bjk->bik', 'ij->ji', 'i,i->', 'ij,j->i', 'abc,cde->abde']) {
      tf.tidy(() => {
        const [l, r] = eq.split('->')[0].split(',');
        const sizes: Record<string, number> = {a: 2, b: 3, c: 4, d: 2, e: 3, i: 3, j: 4, k: 2};
        const ops = [l, r]
          .filter((t) => t !== undefined)
          .map((t, k) =>
            tf.tensor(
              randomData(
                [...t].reduce((p, c) => p * sizes[c], 1),
                10 + k,
              ),
              [...t].map((c) => sizes[c]),
            ),
          );
        expectClose(einsum(eq, ...ops), tf.einsum(eq, ...ops), 1e-5, 1e-5);
      });
    }
  });

  it('leaks no tensors and returns a new tensor for identity equations', async () => {
    const a = tf.ones([2, 3]);
    const b = tf.ones([3, 4]);
    await expectNoLeak(() => {
      einsum('ij,jk->ik', a, b).dispose();
      einsum('ij,jk->ijk', a, b).dispose();
      einsum('ij->', a).dispose();
    });
    const same = einsum('ij->ij', a);
    expect(same).not.toBe(a);
    same.dispose();
    expect(a.isDisposed).toBe(false);
    tf.dispose([a, b]);
  });

  it('names the equation and the problem in its errors', () => {
    const a = tf.ones([2, 3]);
    const b = tf.ones([4, 5]);
    expect(() => einsum('ij,jk->ik', a, b)).toThrow(/'ij,jk->ik'.*index 'j' has size 3 .* size 4/);
    expect(() => einsum('ijk,jk->i', a, b)).toThrow(/operand 0 has rank 2 .* name 3 axes/);
    expect(() => einsum('ij,jk->ik', a)).toThrow(/names 2 operands but 1 tensor was given/);
    expect(() => einsum('ii->i', tf.ones([2, 2]))).toThrow(/repeats the index 'i'/);
    expect(() => einsum('ij->iz', a)).toThrow(/output index 'z' does not appear/);
    expect(() => einsum('i$,j->i', a, b)).toThrow(/character '\$'/);
    expect(() => einsum('ij->i->j', a)).toThrow(/more than one '->'/);
    expect(() => einsum('i..j->ij', a)).toThrow(/ellipsis/);
    expect(() => einsum('ij,jk->ik')).toThrow(/at least one operand/);
    expect(() => einsum('ij->ii', a)).toThrow(/repeats the index 'i'/);
    tf.dispose([a, b]);
  });
});

describe('parseEquation (the one equation parser: einsum, EinsumDense, readers of axes)', () => {
  it('gives each term its letters and where its ellipsis sits', () => {
    expect(parseEquation('...ab,bc->...ac')).toEqual({
      inputs: [
        {letters: ['a', 'b'], ellipsisAt: 0},
        {letters: ['b', 'c'], ellipsisAt: -1},
      ],
      output: {letters: ['a', 'c'], ellipsisAt: 0},
    });
    expect(parseEquation('ab...,bc->ac...').inputs[0]).toEqual({
      letters: ['a', 'b'],
      ellipsisAt: 2,
    });
    expect(parseEquation('ij,jk')).toEqual({
      inputs: [
        {letters: ['i', 'j'], ellipsisAt: -1},
        {letters: ['j', 'k'], ellipsisAt: -1},
      ],
      output: null,
    });
  });

  it('refuses what einsum refuses, naming the equation as shown', () => {
    expect(() => parseEquation('ab,bc->a->c')).toThrow(
      "einsum: invalid equation 'ab,bc->a->c': it has more than one '->'",
    );
    expect(() => parseEquation('aab,bc->ac')).toThrow(/repeats the index 'a'/);
    expect(() => parseEquation('a b,bc->ac', 'a b , bc->ac')).toThrow(
      /invalid equation 'a b , bc->ac': operand 0 \('a b'\) has the character ' '/,
    );
  });
});
