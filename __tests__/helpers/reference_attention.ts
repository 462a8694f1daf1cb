/**
 * Plain-loop references for the attention layers, on nested number arrays. They share no code
 * with the library: every product is an explicit loop, every softmax a loop over one row.
 */
export type M2 = number[][];
export type M3 = number[][][];
/** allowed(b, t, s): may query t of batch b attend to key s? */
export type Allowed = (b: number, t: number, s: number) => boolean;

export const allowAll: Allowed = () => true;

/** Softmax of one row over its allowed entries; a row with none allowed is uniform (Keras). */
export function softmaxRow(row: number[], allowed: boolean[]): number[] {
  const any = allowed.some((a) => a);
  const keep = any ? allowed : row.map(() => true);
  const vals = any ? row : row.map(() => 0);
  let max = -Infinity;
  vals.forEach((v, i) => {
    if (keep[i]) max = Math.max(max, v);
  });
  const e = vals.map((v, i) => (keep[i] ? Math.exp(v - max) : 0));
  const sum = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / sum);
}

/** Attention given a score function: returns outputs [B][T][Dv] and weights [B][T][S]. */
export function attentionFromScores(
  score: (b: number, t: number, s: number) => number,
  v: M3,
  B: number,
  T: number,
  S: number,
  allowed: Allowed,
): {out: M3; weights: M3} {
  const out: M3 = [];
  const weights: M3 = [];
  for (let b = 0; b < B; b++) {
    out.push([]);
    weights.push([]);
    for (let t = 0; t < T; t++) {
      const row: number[] = [];
      const ok: boolean[] = [];
      for (let s = 0; s < S; s++) {
        row.push(score(b, t, s));
        ok.push(allowed(b, t, s));
      }
      const w = softmaxRow(row, ok);
      weights[b].push(w);
      const dv = v[b][0].length;
      const o = new Array(dv).fill(0);
      for (let s = 0; s < S; s++) {
        for (let j = 0; j < dv; j++) o[j] += w[s] * v[b][s][j];
      }
      out[b].push(o);
    }
  }
  return {out, weights};
}

function dot(a: number[], b: number[]): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) s += a[i] * b[i];
  return s;
}

/** Luong / scaled dot-product attention: scores = scale * q·k. */
export function refDotAttention(q: M3, k: M3, v: M3, scale: number, allowed: Allowed = allowAll) {
  return attentionFromScores(
    (b, t, s) => scale * dot(q[b][t], k[b][s]),
    v,
    q.length,
    q[0].length,
    k[0].length,
    allowed,
  );
}

/** x [T][D] · W [D][H] */
function matvec(x: number[], w: M2): number[] {
  const h = w[0].length;
  const out = new Array(h).fill(0);
  for (let d = 0; d < x.length; d++) for (let j = 0; j < h; j++) out[j] += x[d] * w[d][j];
  return out;
}

/** Additive attention: scores = Σ_h scale_h tanh((q Wq)_h + (k Wk)_h); W null = identity. */
export function refAdditiveAttention(
  q: M3,
  k: M3,
  v: M3,
  wq: M2 | null,
  wk: M2 | null,
  scale: number[] | null,
  allowed: Allowed = allowAll,
) {
  const pq = q.map((rows) => rows.map((x) => (wq ? matvec(x, wq) : x)));
  const pk = k.map((rows) => rows.map((x) => (wk ? matvec(x, wk) : x)));
  return attentionFromScores(
    (b, t, s) => {
      let sum = 0;
      for (let h = 0; h < pq[b][t].length; h++) {
        sum += (scale ? scale[h] : 1) * Math.tanh(pq[b][t][h] + pk[b][s][h]);
      }
      return sum;
    },
    v,
    q.length,
    q[0].length,
    k[0].length,
    allowed,
  );
}

export interface MhaWeights {
  wq: M3; // [D][N][K]
  bq: M2 | null; // [N][K]
  wk: M3;
  bk: M2 | null;
  wv: M3; // [D][N][V]
  bv: M2 | null;
  wo: M3; // [N][V][O]
  bo: number[] | null;
}

function project(x: number[], w: M3, bias: M2 | null, n: number): number[] {
  const width = w[0][0].length;
  const out = new Array(width).fill(0);
  for (let d = 0; d < x.length; d++) for (let j = 0; j < width; j++) out[j] += x[d] * w[d][n][j];
  if (bias) for (let j = 0; j < width; j++) out[j] += bias[n][j];
  return out;
}

/**
 * Keras MultiHeadAttention on 3-D inputs, head by head with loops: per head n,
 * softmax((q Wq_n + bq_n)·(k Wk_n + bk_n) / sqrt(K)) (v Wv_n + bv_n), then Σ_n,h out W_o + b_o.
 */
export function refMultiHeadAttention(
  query: M3,
  value: M3,
  key: M3,
  w: MhaWeights,
  numHeads: number,
  allowed: Allowed = allowAll,
): {out: M3; weights: number[][][][]} {
  const B = query.length;
  const T = query[0].length;
  const S = key[0].length;
  const K = w.wq[0][0].length;
  const O = w.wo[0][0].length;
  const heads: M3[] = [];
  const weights: number[][][][] = Array.from({length: B}, () => []);
  for (let n = 0; n < numHeads; n++) {
    const q = query.map((rows) => rows.map((x) => project(x, w.wq, w.bq, n)));
    const k = key.map((rows) => rows.map((x) => project(x, w.wk, w.bk, n)));
    const v = value.map((rows) => rows.map((x) => project(x, w.wv, w.bv, n)));
    const r = refDotAttention(q, k, v, 1 / Math.sqrt(K), allowed);
    heads.push(r.out);
    for (let b = 0; b < B; b++) weights[b].push(r.weights[b]);
  }
  const out: M3 = [];
  for (let b = 0; b < B; b++) {
    out.push([]);
    for (let t = 0; t < T; t++) {
      const o = new Array(O).fill(0);
      for (let n = 0; n < numHeads; n++) {
        const h = heads[n][b][t];
        for (let j = 0; j < h.length; j++) for (let c = 0; c < O; c++) o[c] += h[j] * w.wo[n][j][c];
      }
      if (w.bo) for (let c = 0; c < O; c++) o[c] += w.bo[c];
      out[b].push(o);
    }
  }
  void S;
  return {out, weights};
}

/** Allowed-function for d2l valid lengths: [B] per sequence or [B][T] per query. */
export function lensAllowed(lens: number[] | number[][]): Allowed {
  return (b, t, s) => {
    const l = lens[b];
    return s < (Array.isArray(l) ? l[t] : l);
  };
}

export function andAllowed(...fs: Allowed[]): Allowed {
  return (b, t, s) => fs.every((f) => f(b, t, s));
}

export const causalAllowed: Allowed = (_b, t, s) => s <= t;
