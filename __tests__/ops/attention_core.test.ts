/**
 * The attention core on its own against the plain-loop reference (reference_attention.ts):
 * leading axes, masks (including a fully masked row), scale, query blocks, returned weights,
 * dropout on and off, and attendToScores; no leaks. Tolerance 1e-5 (abs and rel).
 */
import * as tf from '@tensorflow/tfjs';

import {attendToScores, dotProductAttention, queryBlocks} from '../../src/ops/attention_core';
import {describeBackends, expectNoLeak} from '../helpers/backends';
import {expectClose} from '../helpers/close';
import {randTensor} from '../helpers/data';
import {Allowed, refDotAttention, M3} from '../helpers/reference_attention';

const TOL = 1e-5;

/** Query t of slice b may attend to key s: keys < 4 - (b % 3), and not (b = 1, t = 0) at all. */
const allowed: Allowed = (b, t, s) => s < 4 - (b % 3) && !(b === 1 && t === 0);

function maskTensor(B: number, T: number, S: number): tf.Tensor {
  const v: number[] = [];
  for (let b = 0; b < B; b++)
    for (let t = 0; t < T; t++) for (let s = 0; s < S; s++) v.push(allowed(b, t, s) ? 1 : 0);
  return tf.tensor3d(v, [B, T, S], 'bool');
}

describeBackends('attention core', () => {
  it('queryBlocks: automatic, fixed and off', () => {
    expect(queryBlocks(1, 5, 3, 2)).toEqual([
      [0, 2],
      [2, 4],
      [4, 5],
    ]);
    expect(queryBlocks(1, 5, 3, 0)).toEqual([[0, 5]]);
    expect(queryBlocks(1, 5, 3, null)).toEqual([[0, 5]]); // far below the automatic threshold
  });

  for (const chunkSize of [0, 2]) {
    it(`dotProductAttention = plain loops, masks and scale (query blocks of ${chunkSize || 'all'})`, async () => {
      const [B, T, S, K, V] = [3, 5, 4, 3, 2];
      const q = randTensor([B, T, K], 1);
      const k = randTensor([B, S, K], 2);
      const v = randTensor([B, S, V], 3);
      const mask = maskTensor(B, T, S);
      const ref = refDotAttention(
        q.arraySync() as M3,
        k.arraySync() as M3,
        v.arraySync() as M3,
        0.7,
        allowed,
      );
      await expectNoLeak(() => {
        const r = dotProductAttention(q, k, v, {
          mask,
          scale: 0.7,
          returnAttentionScores: true,
          chunkSize,
        });
        expectClose(r.output, ref.out, TOL, TOL);
        expectClose(r.scores as tf.Tensor, ref.weights, TOL, TOL);
        tf.dispose([r.output, r.scores as tf.Tensor]);
      });
      tf.dispose([q, k, v, mask]);
    });
  }

  for (const chunkSize of [0, 2]) {
    it(`grouped heads: query [B, V, G, T, K] against key [B, V, S, K] = plain loops on repeated keys (query blocks of ${chunkSize || 'all'})`, async () => {
      const [B, Hkv, G, T, S, K, V] = [2, 2, 3, 5, 4, 3, 2];
      const q = randTensor([B, Hkv, G, T, K], 11);
      const k = randTensor([B, Hkv, S, K], 12);
      const v = randTensor([B, Hkv, S, V], 13);
      const slices = B * Hkv * G; // query slice m uses key / value slice floor(m / G)
      const mask = tf.reshape(maskTensor(slices, T, S), [B, Hkv, G, T, S]);
      const kk = (k.reshape([B * Hkv, S, K]).arraySync() as M3).flatMap((x) => Array(G).fill(x));
      const vv = (v.reshape([B * Hkv, S, V]).arraySync() as M3).flatMap((x) => Array(G).fill(x));
      const qq = q.reshape([slices, T, K]).arraySync() as M3;
      const ref = refDotAttention(qq, kk, vv, 0.7, allowed);
      await expectNoLeak(() => {
        const r = dotProductAttention(q, k, v, {
          mask,
          scale: 0.7,
          returnAttentionScores: true,
          chunkSize,
        });
        expect(r.output.shape).toEqual([B, Hkv, G, T, V]);
        expect((r.scores as tf.Tensor).shape).toEqual([B, Hkv, G, T, S]);
        tf.tidy(() => {
          expectClose(r.output.reshape([slices, T, V]), ref.out, TOL, TOL);
          expectClose((r.scores as tf.Tensor).reshape([slices, T, S]), ref.weights, TOL, TOL);
        });
        tf.dispose([r.output, r.scores as tf.Tensor]);
      });
      // no copy of keys or values per query head
      const profile = await tf.profile(
        () => dotProductAttention(q, k, v, {mask, chunkSize}).output,
      );
      tf.dispose(profile.result as tf.Tensor);
      expect(profile.kernelNames).not.toContain('Tile');
      tf.dispose([q, k, v, mask]);
    });
  }

  it('grouped heads: refuses a key that fits neither layout, saying what it expected', () => {
    tf.tidy(() => {
      const q = tf.zeros([2, 2, 3, 5, 4]);
      expect(() => dotProductAttention(q, tf.zeros([2, 3, 6, 4]), tf.zeros([2, 3, 6, 4]))).toThrow(
        /expected query \[...L, T, K\] with key \[...L, S, K\].*received query \[2, 2, 3, 5, 4\], key \[2, 3, 6, 4\]/,
      );
    });
  });

  it('dotProductAttention keeps leading axes and broadcasts a mask over them', () => {
    tf.tidy(() => {
      const q = randTensor([2, 3, 4, 2], 4); // [batch, heads, T, K]
      const k = randTensor([2, 3, 5, 2], 5);
      const v = randTensor([2, 3, 5, 6], 6);
      const keys = tf.tensor4d([1, 1, 1, 0, 0, 1, 1, 1, 1, 1], [2, 1, 1, 5], 'bool'); // per batch
      const r = dotProductAttention(q, k, v, {mask: keys, returnAttentionScores: true});
      expect(r.output.shape).toEqual([2, 3, 4, 6]);
      const flat = (t: tf.Tensor) =>
        t.reshape([6, t.shape[2] as number, t.shape[3] as number]).arraySync() as M3;
      const ref = refDotAttention(flat(q), flat(k), flat(v), 1, (b, _t, s) =>
        b < 3 ? s < 3 : true,
      );
      expectClose(r.output, tf.tensor(ref.out).reshape([2, 3, 4, 6]), TOL, TOL);
      expectClose(r.scores as tf.Tensor, tf.tensor(ref.weights).reshape([2, 3, 4, 5]), TOL, TOL);
    });
  });

  it('dropout: off without training, seeded and rescaled with it; scores before or after', () => {
    tf.tidy(() => {
      const q = randTensor([2, 3, 2], 7);
      const k = randTensor([2, 4, 2], 8);
      const v = randTensor([2, 4, 3], 9);
      const plain = dotProductAttention(q, k, v, {returnAttentionScores: true});
      const notTraining = dotProductAttention(q, k, v, {dropout: 0.5, returnAttentionScores: true});
      expectClose(notTraining.output, plain.output, 0, 0);
      const opts = {dropout: 0.5, training: true, nextSeed: () => 3, returnAttentionScores: true};
      const before = dotProductAttention(q, k, v, opts);
      const after = dotProductAttention(q, k, v, {...opts, scoresAfterDropout: true});
      expectClose(before.scores as tf.Tensor, plain.scores as tf.Tensor, 0, 0);
      // each kept weight is doubled (1 / (1 - 0.5)), each dropped one is 0
      const w = (plain.scores as tf.Tensor).dataSync();
      const d = (after.scores as tf.Tensor).dataSync();
      let dropped = 0;
      d.forEach((x, i) => {
        if (x === 0) dropped++;
        else expect(Math.abs(x - 2 * w[i])).toBeLessThan(1e-6);
      });
      expect(dropped).toBeGreaterThan(0);
      expect(dropped).toBeLessThan(d.length);
      expectClose(after.output, tf.matMul(after.scores as tf.Tensor, v), TOL, TOL);
    });
  });

  it('attendToScores = plain loops on given logits with a mask', () => {
    tf.tidy(() => {
      const [B, T, S] = [3, 5, 4];
      const logits = randTensor([B, T, S], 10, 3);
      const v = randTensor([B, S, 2], 11);
      const L = logits.arraySync() as M3;
      const r = attendToScores(logits, v, {mask: maskTensor(B, T, S), returnAttentionScores: true});
      const w = r.scores as tf.Tensor;
      const rows = w.arraySync() as M3;
      rows.forEach((rowsB, b) =>
        rowsB.forEach((row, t) => {
          const ok = Array.from({length: S}, (_, s) => allowed(b, t, s));
          const any = ok.some(Boolean);
          const e = L[b][t].map((x, s) => (!any || ok[s] ? Math.exp(any ? x : 0) : 0));
          const sum = e.reduce((a, c) => a + c, 0);
          row.forEach((x, s) => expect(Math.abs(x - e[s] / sum)).toBeLessThan(TOL));
        }),
      );
      expectClose(r.output, tf.matMul(w, v), TOL, TOL);
    });
  });
});
