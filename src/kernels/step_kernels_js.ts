/**
 * The kernels of a compiled decoding step (step_kernels_api.ts) as plain JavaScript loops over
 * Float32Array / Int32Array / Int8Array / Uint8Array views of the memory: where WebAssembly SIMD
 * is missing, and the reference the SIMD module is tested against. The views are made again
 * whenever the memory has grown (a grown WebAssembly memory detaches its old buffer).
 */
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
      throw new Error(`step kernels: expected an activation code 0 to 6, received ${String(act)}`);
  }
}

/** Rounds half to even, as Keras' `round` (numpy's). */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
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
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * dim;
        const oo = f(out) + r * dim;
        let mean = 0;
        for (let i = 0; i < dim; i++) mean += f32[xo + i];
        mean /= dim;
        let variance = 0;
        for (let i = 0; i < dim; i++) {
          const d = f32[xo + i] - mean;
          variance += d * d;
        }
        const inv = 1 / Math.sqrt(variance / dim + epsilon);
        for (let i = 0; i < dim; i++) {
          let y = (f32[xo + i] - mean) * inv;
          if (gamma !== 0) y *= f32[f(gamma) + i];
          if (beta !== 0) y += f32[f(beta) + i];
          f32[oo + i] = y;
        }
      }
    },
    rmsNorm(rows, dim, x, gamma, epsilon, out) {
      views();
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * dim;
        const oo = f(out) + r * dim;
        let ms = 0;
        for (let i = 0; i < dim; i++) ms += f32[xo + i] * f32[xo + i];
        const inv = 1 / Math.sqrt(ms / dim + epsilon);
        for (let i = 0; i < dim; i++) {
          f32[oo + i] = f32[xo + i] * inv * (gamma !== 0 ? f32[f(gamma) + i] : 1);
        }
      }
    },
    dense(rows, k, n, x, w, bias, a, out) {
      views();
      const wo = f(w);
      for (let r = 0; r < rows; r++) {
        const oo = f(out) + r * n;
        const xo = f(x) + r * k;
        if (bias !== 0) f32.copyWithin(oo, f(bias), f(bias) + n);
        else f32.fill(0, oo, oo + n);
        for (let i = 0; i < k; i++) {
          const xv = f32[xo + i];
          if (xv === 0) continue;
          const base = wo + i * n;
          for (let j = 0; j < n; j++) f32[oo + j] += xv * f32[base + j];
        }
        act(n, oo, a);
      }
    },
    denseT(rows, k, n, x, w, out) {
      views();
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * k;
        const oo = f(out) + r * n;
        for (let j = 0; j < n; j++) {
          const wo = f(w) + j * k;
          let s = 0;
          for (let i = 0; i < k; i++) s += f32[xo + i] * f32[wo + i];
          f32[oo + j] = s;
        }
      }
    },
    quantizeRows(rows, k, x, q, qs) {
      views();
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * k;
        let max = 0;
        for (let i = 0; i < k; i++) max = Math.max(max, Math.abs(f32[xo + i]));
        const scale = Math.fround(127 / Math.fround(max + 1e-7));
        f32[f(qs) + r] = scale;
        for (let i = 0; i < k; i++) {
          const v = roundHalfEven(Math.fround(f32[xo + i] * scale));
          i8[q + r * k + i] = Math.max(-127, Math.min(127, v));
        }
      }
    },
    denseInt8(rows, k, n, q, qs, w, ws, bias, a, out) {
      views();
      unscale(rows, n, qs, ws, out, (r, j) => {
        let s = 0;
        for (let i = 0; i < k; i++) s += i8[q + r * k + i] * i8[w + i * n + j];
        return s;
      });
      for (let r = 0; r < rows; r++) {
        const oo = f(out) + r * n;
        if (bias !== 0) for (let j = 0; j < n; j++) f32[oo + j] += f32[f(bias) + j];
        act(n, oo, a);
      }
    },
    denseTInt8(rows, k, n, q, qs, w, ws, out) {
      views();
      unscale(rows, n, qs, ws, out, (r, j) => {
        let s = 0;
        for (let i = 0; i < k; i++) s += i8[q + r * k + i] * i8[w + j * k + i];
        return s;
      });
    },
    add(n, a, b, out) {
      views();
      const [ao, bo, oo] = [f(a), f(b), f(out)];
      for (let i = 0; i < n; i++) f32[oo + i] = f32[ao + i] + f32[bo + i];
    },
    mul(n, a, b, out) {
      views();
      const [ao, bo, oo] = [f(a), f(b), f(out)];
      for (let i = 0; i < n; i++) f32[oo + i] = f32[ao + i] * f32[bo + i];
    },
    activate(n, x, a, out) {
      views();
      if (x !== out) f32.copyWithin(f(out), f(x), f(x) + n);
      act(n, f(out), a);
    },
    gather(rows, dim, ids, table, out) {
      views();
      for (let r = 0; r < rows; r++) {
        const from = f(table) + i32[f(ids) + r] * dim;
        f32.copyWithin(f(out) + r * dim, from, from + dim);
      }
    },
    gatherInt8(rows, dim, ids, table, scale, out) {
      views();
      for (let r = 0; r < rows; r++) {
        const id = i32[f(ids) + r];
        const s = f32[f(scale) + id];
        for (let i = 0; i < dim; i++) f32[f(out) + r * dim + i] = i8[table + id * dim + i] / s;
      }
    },
    addPositions(B, t, dim, start, table, out) {
      views();
      for (let b = 0; b < B; b++) {
        for (let i = 0; i < t; i++) {
          const oo = f(out) + (b * t + i) * dim;
          const to = f(table) + (start + i) * dim;
          for (let j = 0; j < dim; j++) f32[oo + j] += f32[to + j];
        }
      }
    },
    writeCache(B, t, width, maxLength, start, src, cache) {
      views();
      for (let b = 0; b < B; b++) {
        const from = f(src) + b * t * width;
        f32.copyWithin(f(cache) + (b * maxLength + start) * width, from, from + t * width);
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
    ) {
      views();
      const group = heads / kvHeads;
      const width = heads * headDim;
      const kvWidth = kvHeads * headDim;
      const w = f(work);
      for (let b = 0; b < B; b++) {
        for (let i = 0; i < t; i++) {
          const last = start + i; // the query's position: keys 0 .. last
          const qRow = f(q) + (b * t + i) * width;
          const oRow = f(out) + (b * t + i) * width;
          for (let h = 0; h < heads; h++) {
            const kvh = Math.floor(h / group);
            const qo = qRow + h * headDim;
            let max = -Infinity;
            for (let j = 0; j <= last; j++) {
              if (keyMask !== 0 && u8[keyMask + b * maxLength + j] === 0) continue;
              const ko = f(kCache) + (b * maxLength + j) * kvWidth + kvh * headDim;
              let s = 0;
              for (let d = 0; d < headDim; d++) s += f32[qo + d] * f32[ko + d];
              s *= scale;
              f32[w + j] = s;
              if (s > max) max = s;
            }
            let total = 0;
            for (let j = 0; j <= last; j++) {
              if (keyMask !== 0 && u8[keyMask + b * maxLength + j] === 0) {
                f32[w + j] = 0;
                continue;
              }
              const e = Math.exp(f32[w + j] - max);
              f32[w + j] = e;
              total += e;
            }
            const oo = oRow + h * headDim;
            f32.fill(0, oo, oo + headDim);
            for (let j = 0; j <= last; j++) {
              const p = f32[w + j] / total;
              if (p === 0) continue;
              const vo = f(vCache) + (b * maxLength + j) * kvWidth + kvh * headDim;
              for (let d = 0; d < headDim; d++) f32[oo + d] += p * f32[vo + d];
            }
          }
        }
      }
    },
    argmax(rows, cols, x, out) {
      views();
      for (let r = 0; r < rows; r++) {
        const xo = f(x) + r * cols;
        let best = 0;
        for (let j = 1; j < cols; j++) if (f32[xo + j] > f32[xo + best]) best = j;
        i32[f(out) + r] = best;
      }
    },
  };
}
