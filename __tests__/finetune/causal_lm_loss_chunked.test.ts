/**
 * The chunked head loss (src/finetune/causal_lm_loss.ts' `headLoss`): keras-hub's CausalLM loss of
 * the logits a frozen head makes of the final hidden states, computed a few rows at a time, and
 * its gradient with respect to the hidden states. Checked against float64 loops written from the
 * definitions (logits = h · Eᵀ tied, h · R untied, `tanh(z / cap) · cap` soft-capped; per position
 * -log_softmax(logits)[y] · w, summed, over batch · length) and against the unchunked path
 * (`causalLmLoss` of the whole logits, tfjs' gradient through the product), for chunk sizes that
 * do not divide the rows, a chunk of one row, one chunk of all rows, masked positions and a fully
 * masked row; and its peak memory against the whole logits' bytes.
 */
import * as tf from '@tensorflow/tfjs';

import {causalLmLoss} from '../../src';
import {defaultChunkRows, headLoss} from '../../src/finetune/causal_lm_loss';
import {describeBackends} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {lcg} from '../helpers/data';

const [B, L, D, V] = [3, 5, 4, 7];
const N = B * L;

interface Case {
  name: string;
  transposed: boolean;
  softCap: number | null;
}
const CASES: Case[] = [
  {name: 'tied (h · Eᵀ)', transposed: true, softCap: null},
  {name: 'untied (h · R)', transposed: false, softCap: null},
  {name: 'tied, soft-capped at 2', transposed: true, softCap: 2},
];

function data() {
  const hidden = Array.from(lcg(N * D, 11, 1.5));
  const table = Array.from(lcg(V * D, 12, 1.5)); // [V, D] tied, read as [D, V] untied
  const y = Array.from(lcg(N, 13), (u) => Math.floor(((u + 1) / 2) * V) % V);
  // shifted padding masks: trailing zeros, row 1 all but 2 masked, row 2 wholly masked
  const w = [
    [1, 1, 1, 1, 0],
    [1, 1, 0, 0, 0],
    [0, 0, 0, 0, 0],
  ].flat();
  return {hidden, table, y, w};
}

/** z[i][v] = Σ_d h[i][d] · t(v, d): the head's product before any cap, float64. */
function product(hidden: number[], table: number[], transposed: boolean): number[][] {
  const at = (v: number, d: number) => (transposed ? table[v * D + d] : table[d * V + v]);
  return Array.from({length: N}, (_, i) =>
    Array.from({length: V}, (_, v) => {
      let s = 0;
      for (let d = 0; d < D; d++) s += hidden[i * D + d] * at(v, d);
      return s;
    }),
  );
}

/** The loss and d loss / d hidden in float64 loops. */
function loop(c: Case, hidden: number[], table: number[], y: number[], w: number[]) {
  const at = (v: number, d: number) => (c.transposed ? table[v * D + d] : table[d * V + v]);
  const z = product(hidden, table, c.transposed);
  let loss = 0;
  const grad = new Array<number>(N * D).fill(0);
  for (let i = 0; i < N; i++) {
    const logits = z[i].map((v) => (c.softCap == null ? v : Math.tanh(v / c.softCap) * c.softCap));
    const max = Math.max(...logits);
    const lse = max + Math.log(logits.reduce((s, v) => s + Math.exp(v - max), 0));
    loss += -(logits[y[i]] - lse) * w[i];
    for (let v = 0; v < V; v++) {
      let dz = ((Math.exp(logits[v] - lse) - (v === y[i] ? 1 : 0)) * w[i]) / N;
      if (c.softCap != null) dz *= 1 - Math.tanh(z[i][v] / c.softCap) ** 2;
      for (let d = 0; d < D; d++) grad[i * D + d] += dz * at(v, d);
    }
  }
  return {loss: loss / N, grad};
}

function tensors(c: Case) {
  const {hidden, table, y, w} = data();
  return {
    h: tf.tensor(hidden, [B, L, D]),
    head: {
      table: tf.tensor2d(table, c.transposed ? [V, D] : [D, V]),
      transposed: c.transposed,
      softCap: c.softCap,
    },
    yt: tf.tensor(y, [B, L], 'int32'),
    wt: tf.tensor(w, [B, L]),
    expected: loop(c, hidden, table, y, w),
  };
}

describeBackends('headLoss', () => {
  describe.each(CASES)('$name', (c) => {
    // 1: a chunk of one row; 4 and 7 leave a partial last chunk; 15: one chunk; 100: over
    it.each([1, 2, 4, 7, 15, 100])(
      'in chunks of %i rows is the float64 loss and gradient (1e-5 relative, 1e-6)',
      (rows) => {
        const {h, head, yt, wt, expected} = tensors(c);
        const before = tf.memory().numTensors;
        const {value, grad} = tf.valueAndGrad((x: tf.Tensor) => headLoss(x, head, yt, wt, rows))(h);
        expect(value.shape).toEqual([]);
        const got = value.dataSync()[0];
        expect(Math.abs(got - expected.loss) / expected.loss).toBeLessThan(1e-5);
        expect(grad.shape).toEqual([B, L, D]);
        expectClose(grad, expected.grad, 1e-6, 0);
        // masked positions (row 2 wholly, row 1 from position 2) get no gradient; real ones do
        const g = grad.dataSync();
        expect(Array.from(g.slice(2 * L * D)).every((v) => v === 0)).toBe(true);
        expect(Array.from(g.slice((L + 2) * D, 2 * L * D)).every((v) => v === 0)).toBe(true);
        expect(Math.max(...Array.from(g.slice(0, D), Math.abs))).toBeGreaterThan(1e-4);
        tf.dispose([value, grad]);
        expect(tf.memory().numTensors).toBe(before);
        tf.dispose([h, head.table, yt, wt]);
      },
    );

    it('matches the unchunked loss of the whole logits and its gradient (1e-6)', () => {
      const {h, head, yt, wt} = tensors(c);
      const whole = (x: tf.Tensor) => {
        const z = tf.matMul(tf.reshape(x, [N, D]), head.table, false, head.transposed);
        const capped = c.softCap == null ? z : tf.mul(tf.tanh(tf.div(z, c.softCap)), c.softCap);
        return causalLmLoss(tf.reshape(capped, [B, L, V]), yt, wt);
      };
      const a = tf.valueAndGrad(whole)(h);
      const b = tf.valueAndGrad((x: tf.Tensor) => headLoss(x, head, yt, wt, 4))(h);
      expectClose(b.value, a.value, 1e-6, 1e-6);
      expectClose(b.grad, a.grad, 1e-7, 1e-5);
      // the gradient is scaled by the upstream one
      const g3 = tf.grad((x: tf.Tensor) => tf.mul(headLoss(x, head, yt, wt, 4), 3))(h);
      expectClose(g3, tf.mul(a.grad, 3), 3e-7, 1e-5);
      tf.dispose([a.value, a.grad, b.value, b.grad, g3, h, head.table, yt, wt]);
    });
  });

  it('gives the table no gradient: it is frozen', () => {
    const c = CASES[0];
    const {h, head, yt, wt} = tensors(c);
    expect(() =>
      tf.grad((t: tf.Tensor) => headLoss(h, {...head, table: t as tf.Tensor2D}, yt, wt, 4))(
        head.table,
      ),
    ).toThrow(/Cannot compute gradient/);
    tf.dispose([h, head.table, yt, wt]);
  });

  it('keeps its peak memory below the whole logits (4,096 rows of a 2,048 vocabulary)', async () => {
    const [b, l, d, v] = [4, 1024, 16, 2048];
    const logitBytes = b * l * v * 4; // 32 MiB
    const h = tf.tensor(lcg(b * l * d, 21), [b, l, d]);
    const table = tf.tensor2d(lcg(v * d, 22), [v, d]);
    const yt = tf.tensor(
      Array.from(lcg(b * l, 23), (u) => Math.floor(((u + 1) / 2) * v) % v),
      [b, l],
      'int32',
    );
    const wt = tf.ones([b, l]);
    const head = {table, transposed: true, softCap: null};
    const peakAbove = async (f: () => tf.Tensor[]) => {
      const base = tf.memory().numBytes;
      const p = await tf.profile(() => {
        tf.dispose(f());
      });
      return p.peakBytes - base;
    };
    const chunked = await peakAbove(() => {
      const {value, grad} = tf.valueAndGrad((x: tf.Tensor) => headLoss(x, head, yt, wt, 64))(h);
      return [value, grad];
    });
    const whole = await peakAbove(() => {
      const {value, grad} = tf.valueAndGrad((x: tf.Tensor) =>
        causalLmLoss(
          tf.reshape(tf.matMul(tf.reshape(x, [b * l, d]), table, false, true), [b, l, v]),
          yt,
          wt,
        ),
      )(h);
      return [value, grad];
    });
    // the whole logits' path holds several [4096, 2048] tensors at once, the chunked one none
    expect(whole).toBeGreaterThan(2 * logitBytes);
    expect(chunked).toBeLessThan(logitBytes / 4);
    tf.dispose([h, table, yt, wt]);
  });

  it('picks chunks of about 8M logits', () => {
    expect(defaultChunkRows(50257)).toBe(166);
    expect(defaultChunkRows(2 ** 24)).toBe(1);
    expect(defaultChunkRows(7)).toBe(1198372);
  });

  it('refuses shapes and chunk sizes that do not fit, saying what it expected', () => {
    const {h, head, yt, wt} = tensors(CASES[0]);
    const before = tf.memory().numTensors;
    const flat = tf.reshape(h, [N, D]);
    const bad = tf.zeros([B, L + 1], 'int32');
    const wide = tf.zeros([V, D + 1]);
    expect(() => headLoss(flat, head, yt, wt)).toThrow(
      'headLoss: expected hidden [batch, length, width], received [15,4]',
    );
    expect(() => headLoss(h, {...head, table: wide as tf.Tensor2D}, yt, wt)).toThrow(
      "headLoss: expected a table [vocab, 4] (the hidden states' width), received [7,5]",
    );
    expect(() => headLoss(h, head, bad, wt)).toThrow(
      "headLoss: expected y [3, 5] (the hidden states' batch and length), received [3,6]",
    );
    expect(() => headLoss(h, head, yt, wt, 0)).toThrow(
      'headLoss: chunkRows must be a positive integer, received 0',
    );
    expect(() => headLoss(h, head, yt, wt, 2.5)).toThrow(/received 2.5/);
    tf.dispose([flat, bad, wide]);
    expect(tf.memory().numTensors).toBe(before + 0);
    tf.dispose([h, head.table, yt, wt]);
  });
});
