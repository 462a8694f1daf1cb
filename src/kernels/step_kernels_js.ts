/**
 * The kernels of a compiled decoding step (step_kernels_api.ts) as plain JavaScript loops over
 * Float32Array / Int32Array / Int8Array / Uint8Array views of the memory: where WebAssembly SIMD
 * is missing, and the reference the SIMD module is tested against. The views are made again
 * whenever the memory has grown (a grown WebAssembly memory detaches its old buffer).
 */
import {assertNever} from './assert_never';
import {StepActivation, StepKernels} from './step_kernels_api';

/** erf as tfjs-core computes it (Abramowitz and Stegun 7.1.26, error below 1.5e-7). */
function erf(x: number): number {
  const sign = x < 0 ? -1 : 1;
  const v = Math.abs(x);
  const t = 1 / (1 + 0.3275911 * v);
  const poly =
    t *
    (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign * (1 - poly * Math.exp(-v * v));
}

const SQRT_HALF = Math.SQRT1_2;
const GELU_C = Math.sqrt(2 / Math.PI);

/** One activation on one value. */
export function activateValue(x: number, act: StepActivation): number {
  switch (act) {
    case StepActivation.None:
      return x;
    case StepActivation.Relu:
      return x > 0 ? x : 0;
    case StepActivation.GeluErf:
      return 0.5 * x * (1 + erf(x * SQRT_HALF));
    case StepActivation.GeluTanh:
      return 0.5 * x * (1 + Math.tanh(GELU_C * (x + 0.044715 * x * x * x)));
    case StepActivation.Silu:
      return x / (1 + Math.exp(-x));
    case StepActivation.Tanh:
      return Math.tanh(x);
    case StepActivation.Sigmoid:
      return 1 / (1 + Math.exp(-x));
    default:
      return assertNever(act, 'step kernels: expected an activation code 0 to 6');
  }
}

/** Rounds half to even, as Keras' `round` (numpy's). */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/**
 * Value i of int4 values packed two a byte (Keras' `pack_int4`: the even index in the low nibble,
 * two's complement) whose byte is `byte`.
 */
function int4(byte: number, i: number): number {
  return ((((i & 1) === 0 ? byte : byte >> 4) & 15) ^ 8) - 8;
}

/** The plain-JavaScript kernels on `memory`. */
export function jsStepKernels(memory: WebAssembly.Memory): StepKernels {
  let buffer: ArrayBuffer | null = null;
  let f32 = new Float32Array(0);
  let i32 = new Int32Array(0);
  let i8 = new Int8Array(0);
  let u8 = new Uint8Array(0);
  /** Refreshes the views after the memory grew. */
  const views = () => {
    if (memory.buffer !== buffer) {
      buffer = memory.buffer;
      f32 = new Float32Array(buffer);
      i32 = new Int32Array(buffer);
      i8 = new Int8Array(buffer);
      u8 = new Uint8Array(buffer);
    }
  };
  const f = (offset: number) => offset >>> 2;
  const act = (n: number, at: number, a: StepActivation) => {
    if (a === StepActivation.None) return;
    for (let i = at; i < at + n; i++) f32[i] = activateValue(f32[i], a);
  };
  /** `out[r, j] = sum(r, j) / (qs[r] * ws[j])` in float32: the int8 products' scaling. */
  const unscale = (
    rows: number,
    n: number,
    qs: number,
    ws: number,
    out: number,
    sum: (r: number, j: number) => number,
  ) => {
    for (let r = 0; r < rows; r++) {
      for (let j = 0; j < n; j++) {
        const scale = Math.fround(f32[f(qs) + r] * f32[f(ws) + j]);
        f32[f(out) + r * n + j] = Math.fround(sum(r, j) / scale);
      }
    }
  };
  return {
    memory,
    kind: 'js',
    layerNorm(rows, dim, x, gamma, beta, epsilon, out) {
      views();
      const F = f32;
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * dim;
        const oo = f(out) + r * dim;
        let mean = 0;
        for (let i = 0; i < dim; i++) mean += F[xo + i];
        mean /= dim;
        let variance = 0;
        for (let i = 0; i < dim; i++) {
          const d = F[xo + i] - mean;
          variance += d * d;
        }
        const inv = 1 / Math.sqrt(variance / dim + epsilon);
        for (let i = 0; i < dim; i++) {
          let y = (F[xo + i] - mean) * inv;
          if (gamma !== 0) y *= F[f(gamma) + i];
          if (beta !== 0) y += F[f(beta) + i];
          F[oo + i] = y;
        }
      }
    },
    rmsNorm(rows, dim, x, gamma, epsilon, out, offset = 0) {
      views();
      const F = f32;
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * dim;
        const oo = f(out) + r * dim;
        let ms = 0;
        for (let i = 0; i < dim; i++) ms += F[xo + i] * F[xo + i];
        const inv = 1 / Math.sqrt(ms / dim + epsilon);
        for (let i = 0; i < dim; i++) {
          const g = gamma !== 0 ? Math.fround(offset + F[f(gamma) + i]) : 1;
          F[oo + i] = F[xo + i] * inv * g;
        }
      }
    },
    rope(B, t, start, heads, headDim, x, freqs, out) {
      views();
      const F = f32;
      const fr = Math.fround;
      const half = headDim / 2;
      const width = heads * headDim;
      for (let r = 0; r < B * t; r++) {
        const position = start + (r % t);
        const [xo, oo] = [f(x) + r * width, f(out) + r * width];
        for (let j = 0; j < half; j++) {
          const angle = fr(position * F[f(freqs) + j]);
          const [c, s] = [fr(Math.cos(angle)), fr(Math.sin(angle))];
          for (let h = 0; h < heads; h++) {
            const i1 = h * headDim + j;
            const [x1, x2] = [F[xo + i1], F[xo + i1 + half]];
            F[oo + i1] = fr(x1 * c) - fr(x2 * s);
            F[oo + i1 + half] = fr(x2 * c) + fr(x1 * s);
          }
        }
      }
    },
    scale(n, x, factor, out) {
      views();
      const F = f32;
      const [xo, oo] = [f(x), f(out)];
      const k = Math.fround(factor);
      for (let i = 0; i < n; i++) F[oo + i] = F[xo + i] * k;
    },
    dense(rows, k, n, x, w, bias, a, out) {
      views();
      const F = f32;
      const wo = f(w);
      for (let r = 0; r < rows; r++) {
        const oo = f(out) + r * n;
        if (bias !== 0) F.copyWithin(oo, f(bias), f(bias) + n);
        else F.fill(0, oo, oo + n);
      }
      // four rows per pass over the weight (a prefill's rows), then the rest one by one
      let r = 0;
      for (; r + 4 <= rows; r += 4) {
        const [o0, x0] = [f(out) + r * n, f(x) + r * k];
        const [o1, o2, o3] = [o0 + n, o0 + 2 * n, o0 + 3 * n];
        for (let i = 0; i < k; i++) {
          const [a0, a1, a2, a3] = [F[x0 + i], F[x0 + k + i], F[x0 + 2 * k + i], F[x0 + 3 * k + i]];
          const base = wo + i * n;
          for (let j = 0; j < n; j++) {
            const v = F[base + j];
            F[o0 + j] += a0 * v;
            F[o1 + j] += a1 * v;
            F[o2 + j] += a2 * v;
            F[o3 + j] += a3 * v;
          }
        }
      }
      for (; r < rows; r++) {
        const oo = f(out) + r * n;
        const xo = f(x) + r * k;
        // four weight rows per pass over the output row
        let i = 0;
        for (; i + 4 <= k; i += 4) {
          const [a0, a1, a2, a3] = [F[xo + i], F[xo + i + 1], F[xo + i + 2], F[xo + i + 3]];
          const b0 = wo + i * n;
          const [b1, b2, b3] = [b0 + n, b0 + 2 * n, b0 + 3 * n];
          for (let j = 0; j < n; j++) {
            F[oo + j] += a0 * F[b0 + j] + a1 * F[b1 + j] + a2 * F[b2 + j] + a3 * F[b3 + j];
          }
        }
        for (; i < k; i++) {
          const xv = F[xo + i];
          const base = wo + i * n;
          for (let j = 0; j < n; j++) F[oo + j] += xv * F[base + j];
        }
      }
      for (let q = 0; q < rows; q++) act(n, f(out) + q * n, a);
    },
    // as `dense` (no scratch needed): called as a method, so that an object built on these
    // kernels with its own `dense` (generate/step_kernels_choice.ts: the SIMD sgemm for several
    // rows) runs that one
    denseRows(rows, k, n, x, w, bias, a, out) {
      this.dense(rows, k, n, x, w, bias, a, out);
    },
    denseRowsWorkBytes: 16,
    denseT(rows, k, n, x, w, out) {
      views();
      const F = f32;
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * k;
        const oo = f(out) + r * n;
        for (let j = 0; j < n; j++) {
          const wo = f(w) + j * k;
          let s = 0;
          for (let i = 0; i < k; i++) s += F[xo + i] * F[wo + i];
          F[oo + j] = s;
        }
      }
    },
    quantizeRows(rows, k, x, q, qs) {
      views();
      const F = f32;
      const I8 = i8;
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * k;
        let max = 0;
        for (let i = 0; i < k; i++) max = Math.max(max, Math.abs(F[xo + i]));
        const scale = Math.fround(127 / Math.fround(max + 1e-7));
        F[f(qs) + r] = scale;
        for (let i = 0; i < k; i++) {
          const v = roundHalfEven(Math.fround(F[xo + i] * scale));
          I8[q + r * k + i] = Math.max(-127, Math.min(127, v));
        }
      }
    },
    denseInt8(rows, k, n, q, qs, w, ws, bias, a, out) {
      views();
      const F = f32;
      const I8 = i8;
      unscale(rows, n, qs, ws, out, (r, j) => {
        let s = 0;
        for (let i = 0; i < k; i++) s += I8[q + r * k + i] * I8[w + j * k + i];
        return s;
      });
      for (let r = 0; r < rows; r++) {
        const oo = f(out) + r * n;
        if (bias !== 0) for (let j = 0; j < n; j++) F[oo + j] += F[f(bias) + j];
        act(n, oo, a);
      }
    },
    denseInt8KN(rows, k, n, q, qs, w, ws, bias, a, out) {
      views();
      const F = f32;
      const I8 = i8;
      unscale(rows, n, qs, ws, out, (r, j) => {
        let s = 0;
        for (let i = 0; i < k; i++) s += I8[q + r * k + i] * I8[w + i * n + j];
        return s;
      });
      for (let r = 0; r < rows; r++) {
        const oo = f(out) + r * n;
        if (bias !== 0) for (let j = 0; j < n; j++) F[oo + j] += F[f(bias) + j];
        act(n, oo, a);
      }
    },
    denseTInt8(rows, k, n, q, qs, w, ws, out) {
      views();
      const I8 = i8;
      unscale(rows, n, qs, ws, out, (r, j) => {
        let s = 0;
        for (let i = 0; i < k; i++) s += I8[q + r * k + i] * I8[w + j * k + i];
        return s;
      });
    },
    denseInt4KN(rows, k, n, x, w, scale, zero, blockSize, bias, a, out) {
      views();
      const F = f32;
      const I8 = i8;
      const U8 = u8;
      const nb = (n + 1) >> 1;
      const grouped = blockSize > 0;
      // Keras' order: each weight dequantized in float32, the products summed (in float64 here)
      const sum = new Float64Array(n);
      for (let r = 0; r < rows; r++) {
        sum.fill(0);
        for (let p = 0; p < k; p++) {
          const xv = F[f(x) + r * k + p];
          const g = grouped ? Math.floor(p / blockSize) * n : 0;
          for (let j = 0; j < n; j++) {
            const q = int4(U8[w + p * nb + (j >> 1)], j);
            const v = grouped ? Math.fround((q - I8[zero + g + j]) * F[f(scale) + g + j]) : q;
            sum[j] += xv * v;
          }
        }
        const oo = f(out) + r * n;
        for (let j = 0; j < n; j++) {
          F[oo + j] = grouped ? sum[j] : Math.fround(sum[j]) / F[f(scale) + j];
          if (bias !== 0) F[oo + j] += F[f(bias) + j];
        }
        act(n, oo, a);
      }
    },
    denseTInt4(rows, k, n, q, qs, w, scale, zero, blockSize, out) {
      views();
      const F = f32;
      const I8 = i8;
      const U8 = u8;
      const kb = (k + 1) >> 1;
      if (blockSize <= 0) {
        // per channel: an exact integer sum, then Keras' float32 descale (as the int8 products)
        unscale(rows, n, qs, scale, out, (r, v) => {
          let s = 0;
          for (let d = 0; d < k; d++) s += I8[q + r * k + d] * int4(U8[w + v * kb + (d >> 1)], d);
          return s;
        });
        return;
      }
      // grouped: q times the dequantized table (Keras' order, summed in float64), over qs
      const groups = Math.ceil(k / blockSize);
      for (let r = 0; r < rows; r++) {
        for (let v = 0; v < n; v++) {
          let s = 0;
          for (let d = 0; d < k; d++) {
            const g = v * groups + Math.floor(d / blockSize);
            const wv = int4(U8[w + v * kb + (d >> 1)], d);
            s += I8[q + r * k + d] * Math.fround((wv - I8[zero + g]) * F[f(scale) + g]);
          }
          F[f(out) + r * n + v] = s / F[f(qs) + r];
        }
      }
    },
    add(n, a, b, out) {
      views();
      const F = f32;
      const [ao, bo, oo] = [f(a), f(b), f(out)];
      for (let i = 0; i < n; i++) F[oo + i] = F[ao + i] + F[bo + i];
    },
    mul(n, a, b, out) {
      views();
      const F = f32;
      const [ao, bo, oo] = [f(a), f(b), f(out)];
      for (let i = 0; i < n; i++) F[oo + i] = F[ao + i] * F[bo + i];
    },
    activate(n, x, a, out) {
      views();
      const F = f32;
      if (x !== out) F.copyWithin(f(out), f(x), f(x) + n);
      act(n, f(out), a);
    },
    gather(rows, dim, ids, table, out) {
      views();
      const F = f32;
      const I = i32;
      for (let r = 0; r < rows; r++) {
        const from = f(table) + I[f(ids) + r] * dim;
        F.copyWithin(f(out) + r * dim, from, from + dim);
      }
    },
    transposeInt8(k, n, src, dst, ldd) {
      views();
      const I8 = i8;
      for (let p = 0; p < k; p++) {
        for (let j = 0; j < n; j++) I8[dst + j * ldd + p] = I8[src + p * n + j];
      }
    },
    gatherInt8(rows, dim, ids, table, scale, out) {
      views();
      const F = f32;
      const I = i32;
      const I8 = i8;
      for (let r = 0; r < rows; r++) {
        const id = I[f(ids) + r];
        const s = F[f(scale) + id];
        for (let i = 0; i < dim; i++) F[f(out) + r * dim + i] = I8[table + id * dim + i] / s;
      }
    },
    gatherInt4(rows, dim, ids, table, scale, zero, blockSize, out) {
      views();
      const F = f32;
      const I = i32;
      const I8 = i8;
      const U8 = u8;
      const db = (dim + 1) >> 1;
      const groups = blockSize > 0 ? Math.ceil(dim / blockSize) : 1;
      for (let r = 0; r < rows; r++) {
        const id = I[f(ids) + r];
        for (let d = 0; d < dim; d++) {
          const q = int4(U8[table + id * db + (d >> 1)], d);
          const g = id * groups + (blockSize > 0 ? Math.floor(d / blockSize) : 0);
          F[f(out) + r * dim + d] =
            blockSize > 0 ? (q - I8[zero + g]) * F[f(scale) + g] : q / F[f(scale) + g];
        }
      }
    },
    addPositions(B, t, dim, start, table, out) {
      views();
      const F = f32;
      for (let b = 0; b < B; b++) {
        for (let i = 0; i < t; i++) {
          const oo = f(out) + (b * t + i) * dim;
          const to = f(table) + (start + i) * dim;
          for (let j = 0; j < dim; j++) F[oo + j] += F[to + j];
        }
      }
    },
    writeCache(B, t, width, maxLength, start, src, cache) {
      views();
      const F = f32;
      for (let b = 0; b < B; b++) {
        const from = f(src) + b * t * width;
        F.copyWithin(f(cache) + (b * maxLength + start) * width, from, from + t * width);
      }
    },
    attend(
      B,
      t,
      heads,
      kvHeads,
      headDim,
      maxLength,
      start,
      q,
      kCache,
      vCache,
      keyMask,
      scale,
      work,
      out,
      window = 0,
      softCap = 0,
    ) {
      views();
      const F = f32;
      const U8 = u8;
      const fr = Math.fround;
      const cap = fr(softCap);
      const group = heads / kvHeads;
      const width = heads * headDim;
      const kvWidth = kvHeads * headDim;
      const w = f(work);
      for (let b = 0; b < B; b++) {
        for (let i = 0; i < t; i++) {
          const last = start + i; // the query's position: keys first .. last
          const first = window > 0 ? Math.max(0, last - window + 1) : 0;
          const qRow = f(q) + (b * t + i) * width;
          const oRow = f(out) + (b * t + i) * width;
          for (let h = 0; h < heads; h++) {
            const kvh = Math.floor(h / group);
            const qo = qRow + h * headDim;
            let max = -Infinity;
            for (let j = first; j <= last; j++) {
              if (keyMask !== 0 && U8[keyMask + b * maxLength + j] === 0) continue;
              const ko = f(kCache) + (b * maxLength + j) * kvWidth + kvh * headDim;
              let s = 0;
              for (let d = 0; d < headDim; d++) s += F[qo + d] * F[ko + d];
              s *= scale;
              if (cap > 0) s = fr(cap * fr(Math.tanh(fr(fr(s) / cap))));
              F[w + j] = s;
              if (s > max) max = s;
            }
            let total = 0;
            for (let j = first; j <= last; j++) {
              if (keyMask !== 0 && U8[keyMask + b * maxLength + j] === 0) {
                F[w + j] = 0;
                continue;
              }
              const e = Math.exp(F[w + j] - max);
              F[w + j] = e;
              total += e;
            }
            const oo = oRow + h * headDim;
            F.fill(0, oo, oo + headDim);
            for (let j = first; j <= last; j++) {
              const p = F[w + j] / total;
              if (p === 0) continue;
              const vo = f(vCache) + (b * maxLength + j) * kvWidth + kvh * headDim;
              for (let d = 0; d < headDim; d++) F[oo + d] += p * F[vo + d];
            }
          }
        }
      }
    },
    argmax(rows, cols, x, out) {
      views();
      const F = f32;
      const I = i32;
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * cols;
        let best = 0;
        for (let j = 1; j < cols; j++) if (F[xo + j] > F[xo + best]) best = j;
        I[f(out) + r] = best;
      }
    },
  };
}
