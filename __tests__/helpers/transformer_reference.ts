/**
 * keras-hub's TransformerEncoder / TransformerDecoder in plain loops over nested arrays (one
 * batch row at a time), from keras-hub 0.32's source: the independent reference of
 * layers/hub/transformer_block_layers.test.ts. Masks are functions (query i, key j) -> keep.
 */
type M = number[][];

export interface MhaWeights {
  qk: number[][][]; // [D, N, H]
  qb: M; // [N, H]
  kk: number[][][];
  kb: M;
  vk: number[][][];
  vb: M;
  ok: number[][][]; // [N, H, D]
  ob: number[];
}

export interface BlockWeights {
  self: MhaWeights;
  selfNorm: [number[], number[]];
  cross?: MhaWeights;
  crossNorm?: [number[], number[]];
  ffNorm: [number[], number[]];
  ff1: [M, number[]];
  ff2: [M, number[]];
}

export interface BlockOptions {
  normalizeFirst: boolean;
  epsilon: number;
  activation: (x: number) => number;
}

export const relu = (x: number): number => Math.max(0, x);
/** erf by its Taylor series / continued fraction (|error| < 1e-12 in the range used). */
function erf(x: number): number {
  if (Math.abs(x) > 5) return Math.sign(x);
  let sum = 0;
  let term = x;
  for (let n = 0; n < 80; n++) {
    sum += term / (2 * n + 1);
    term *= (-x * x) / (n + 1);
  }
  return (2 / Math.sqrt(Math.PI)) * sum;
}
export const gelu = (x: number): number => 0.5 * x * (1 + erf(x / Math.SQRT2));
export const geluTanh = (x: number): number =>
  0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));

function layerNorm(x: M, [gamma, beta]: [number[], number[]], eps: number): M {
  return x.map((row) => {
    const mean = row.reduce((a, b) => a + b, 0) / row.length;
    const variance = row.reduce((a, b) => a + (b - mean) ** 2, 0) / row.length;
    return row.map((v, j) => ((v - mean) / Math.sqrt(variance + eps)) * gamma[j] + beta[j]);
  });
}

function dense(x: M, [w, b]: [M, number[]], f: (v: number) => number = (v) => v): M {
  return x.map((row) => b.map((bias, o) => f(row.reduce((acc, v, i) => acc + v * w[i][o], bias))));
}

function project(x: M, k: number[][][], b: M): number[][][] {
  // [T, D] x [D, N, H] -> [T, N, H]
  return x.map((row) =>
    b.map((bn, n) => bn.map((bh, h) => row.reduce((a, v, i) => a + v * k[i][n][h], bh))),
  );
}

/** Multi-head attention; a fully masked query row attends uniformly to every key (Keras' fused path). */
export function mha(q: M, kv: M, w: MhaWeights, keep: (i: number, j: number) => boolean): M {
  const Q = project(q, w.qk, w.qb);
  const K = project(kv, w.kk, w.kb);
  const V = project(kv, w.vk, w.vb);
  const N = w.qb.length;
  const H = w.qb[0].length;
  const heads = Q.map((_, i) =>
    Array.from({length: N}, (_, n) => {
      const logits = K.map((kj, j) =>
        keep(i, j) ? Q[i][n].reduce((a, v, h) => a + v * kj[n][h], 0) / Math.sqrt(H) : -Infinity,
      );
      const max = Math.max(...logits);
      const e = max === -Infinity ? logits.map(() => 1) : logits.map((l) => Math.exp(l - max));
      const sum = e.reduce((a, b) => a + b, 0);
      return Array.from({length: H}, (_, h) =>
        e.reduce((a, p, j) => a + (p / sum) * V[j][n][h], 0),
      );
    }),
  ); // [T, N, H]
  return heads.map((hi) =>
    w.ob.map((bo, o) =>
      hi.reduce((a, hn, n) => a + hn.reduce((s, v, h) => s + v * w.ok[n][h][o], 0), bo),
    ),
  );
}

function add(a: M, b: M): M {
  return a.map((row, i) => row.map((v, j) => v + b[i][j]));
}

function residual(x: M, norm: [number[], number[]], o: BlockOptions, f: (y: M) => M): M {
  if (o.normalizeFirst) return add(x, f(layerNorm(x, norm, o.epsilon)));
  return layerNorm(add(x, f(x)), norm, o.epsilon);
}

function feedForward(x: M, w: BlockWeights, o: BlockOptions): M {
  return residual(x, w.ffNorm, o, (y) => dense(dense(y, w.ff1, o.activation), w.ff2));
}

/** One encoder row: `x [T, D]`, the self-attention mask (keys and queries). */
export function encoderRow(
  x: M,
  w: BlockWeights,
  o: BlockOptions,
  keep: (i: number, j: number) => boolean,
): M {
  const y = residual(x, w.selfNorm, o, (h) => mha(h, h, w.self, keep));
  return feedForward(y, w, o);
}

/** One decoder row: `x [T, D]`, optional encoder `[S, D]`, self and cross masks. */
export function decoderRow(
  x: M,
  w: BlockWeights,
  o: BlockOptions,
  keepSelf: (i: number, j: number) => boolean,
  encoder?: M,
  keepCross: (i: number, j: number) => boolean = () => true,
): M {
  let y = residual(x, w.selfNorm, o, (h) => mha(h, h, w.self, keepSelf));
  if (encoder != null && w.cross != null && w.crossNorm != null) {
    y = residual(y, w.crossNorm, o, (h) => mha(h, encoder, w.cross as MhaWeights, keepCross));
  }
  return feedForward(y, w, o);
}
