// WebAssembly SIMD kernels of a compiled decoding step, in AssemblyScript (compiled by
// scripts/build_wasm.mjs into src/kernels/step_kernels_binary.ts). The interface, with every
// argument's meaning, is src/kernels/step_kernels_api.ts (`StepKernels`). As in wasm/kernels.ts
// the memory is imported and the module has no data, no start function and no allocator: the
// caller places every array (tfjs-wasm's heap, where the weights already are, or a memory of the
// package's own from heapBase() on) and passes byte offsets. Weight offsets of 0 mean "absent".
//
// Products are tuned for few rows against large weights: one row (a decoding step) streams the
// weight once, sequentially, accumulating into the output row (which stays in L1); more rows run a
// 4 x 8 register tile over blocks of KC inner indices, so each weight block is read from memory
// once and reused from cache by every row block; a prompt's prefill (denseRows) packs its rows and
// each [KC, 8] weight panel into a scratch first, so the tiles read both contiguously.

/** Rows of x up to which denseT streams the table row by row (above: 4-row tiles of it). */
const DENSET_STREAM_ROWS: i32 = 4;

/** Inner-dimension block of the tiled product: a [KC, 8] weight tile (8 KB) stays in L1. */
const KC: i32 = 256;

/** First free byte after the module's static data, 16-aligned. */
export function heapBase(): usize {
  return (__heap_base + 15) & ~(<usize>15);
}

// ---------------------------------------------------------------------------------------------
// scalar math in float64 (activations): no tables, so no data segment

// e^x for |x| <= 700: x = n ln2 + r, |r| <= ln2 / 2, a degree-13 Taylor polynomial of e^r
// (truncation < 1e-17), times 2^n built from its exponent bits.
function exp64(x: f64): f64 {
  if (x > 700) x = 700;
  if (x < -700) return 0;
  const n = Math.floor(x * 1.4426950408889634 + 0.5);
  const r = x - n * 0.6931471803691238 - n * 1.9082149292705877e-10;
  let p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return p * reinterpret<f64>((<i64>(<i32>n + 1023)) << 52);
}

// erf(x): the Maclaurin series for |x| < 1 (exact to double rounding), else 1 - erfc(|x|) with
// Numerical Recipes' Chebyshev erfc (relative error < 1.2e-7 of erfc <= 0.16: under 2e-8).
function erf64(x: f64): f64 {
  const a = Math.abs(x);
  if (a < 1) {
    const x2 = x * x;
    let term = x;
    let sum = x;
    for (let i = 1; i < 24; i++) {
      term *= -x2 / <f64>i;
      sum += term / <f64>(2 * i + 1);
    }
    return sum * 1.1283791670955126;
  }
  const t = 1 / (1 + 0.5 * a);
  const erfc =
    t *
    exp64(
      -a * a -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t *
                      (-0.18628806 +
                        t *
                          (0.27886807 +
                            t *
                              (-1.13520398 +
                                t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x < 0 ? erfc - 1 : 1 - erfc;
}

function tanh64(x: f64): f64 {
  const a = Math.abs(x);
  if (a > 20) return x < 0 ? -1 : 1;
  if (a < 1e-4) return x - (x * x * x) / 3;
  const e = exp64(2 * a);
  const t = (e - 1) / (e + 1);
  return x < 0 ? -t : t;
}

function act1(v: f32, act: i32): f32 {
  const x = <f64>v;
  switch (act) {
    case 1:
      return v > 0 ? v : 0;
    case 2:
      return <f32>(0.5 * x * (1 + erf64(x * 0.7071067811865476)));
    case 3:
      return <f32>(0.5 * x * (1 + tanh64(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    case 4:
      return <f32>(x / (1 + exp64(-x)));
    case 5:
      return <f32>tanh64(x);
    case 6:
      return <f32>(1 / (1 + exp64(-x)));
  }
  return v;
}

/** `out = act(x)` over n values (codes of `StepActivation`); out may alias x. */
export function activate(n: i32, x: usize, act: i32, out: usize): void {
  if (act == 0) {
    if (x != out) memory.copy(out, x, <usize>n * 4);
    return;
  }
  let i = 0;
  if (act == 1) {
    const zero = f32x4.splat(0);
    for (; i + 4 <= n; i += 4) {
      const o = <usize>i * 4;
      v128.store(out + o, f32x4.max(v128.load(x + o), zero));
    }
  } else if (act == 3 || act == 4 || act == 6) {
    // gelu tanh, silu, sigmoid: f32x4, each x / (1 + e^-z) or 1 / (1 + e^-z) (see act4)
    for (; i + 4 <= n; i += 4) {
      const o = <usize>i * 4;
      v128.store(out + o, act4(v128.load(x + o), act));
    }
  }
  const lanes = act == 3 || act == 4 || act == 6;
  for (; i < n; i++) {
    const o = <usize>i * 4;
    const v = load<f32>(x + o);
    // the last values as the lanes of act4 (the same value wherever it falls)
    store<f32>(out + o, lanes ? f32x4.extract_lane(act4(f32x4.splat(v), act), 0) : act1(v, act));
  }
}

// exp(x) for x <= 0 in f32x4 (softmax after subtracting the max): Cephes' expf polynomial, 0 below
// -87 (so -Infinity, a masked key, gives exactly 0); NaN stays NaN.
function expNeg4(x: v128): v128 {
  const tiny = f32x4.lt(x, f32x4.splat(-87.0));
  const n = f32x4.floor(
    f32x4.add(f32x4.mul(x, f32x4.splat(1.44269504088896341)), f32x4.splat(0.5)),
  );
  let r = f32x4.sub(x, f32x4.mul(n, f32x4.splat(0.693359375)));
  r = f32x4.sub(r, f32x4.mul(n, f32x4.splat(-2.1219444e-4)));
  const z = f32x4.mul(r, r);
  let y = f32x4.splat(1.98756915e-4);
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(1.3981999507e-3));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(8.3334519073e-3));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(4.1665795894e-2));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(1.6666665459e-1));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(5.0000001201e-1));
  y = f32x4.add(f32x4.add(f32x4.mul(y, z), r), f32x4.splat(1.0));
  const pow2n = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23);
  return v128.andnot(f32x4.mul(y, pow2n), tiny);
}

function expNeg1(x: f32): f32 {
  return f32x4.extract_lane(expNeg4(f32x4.splat(x)), 0);
}

// gelu tanh (3), silu (4) and sigmoid (6) of four values in float32, through the logistic
// function: 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)), so gelu tanh is x / (1 + e^(-2u)) with
// u = sqrt(2 / pi) (x + 0.044715 x^3), silu x / (1 + e^-x), sigmoid 1 / (1 + e^-x); no
// cancellation (each is a quotient of positive terms), a few float32 ulps. e^z for z > 88 is
// taken at 88 (1.7e38: the result is then within 1e-37 of 0); below -87 it is 0.
function act4(x: v128, act: i32): v128 {
  let z = f32x4.neg(x);
  if (act == 3) {
    const x3 = f32x4.mul(f32x4.mul(x, x), x);
    z = f32x4.mul(
      f32x4.add(x, f32x4.mul(x3, f32x4.splat(0.044715))),
      f32x4.splat(-1.5957691216057308),
    );
  }
  const e = expNeg4(f32x4.min(z, f32x4.splat(88.0)));
  const den = f32x4.add(e, f32x4.splat(1.0));
  return f32x4.div(act == 6 ? f32x4.splat(1.0) : x, den);
}

function hsum(v: v128): f32 {
  return (
    f32x4.extract_lane(v, 0) +
    f32x4.extract_lane(v, 1) +
    (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3))
  );
}

function hsumI(v: v128): i32 {
  return (
    i32x4.extract_lane(v, 0) +
    i32x4.extract_lane(v, 1) +
    i32x4.extract_lane(v, 2) +
    i32x4.extract_lane(v, 3)
  );
}

// ---------------------------------------------------------------------------------------------
// elementwise

/** `out = a + b` over n values; out may alias a or b. */
export function add(n: i32, a: usize, b: usize, out: usize): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i * 4;
    v128.store(out + o, f32x4.add(v128.load(a + o), v128.load(b + o)));
  }
  for (; i < n; i++) {
    const o = <usize>i * 4;
    store<f32>(out + o, load<f32>(a + o) + load<f32>(b + o));
  }
}

/** `out = a * b` over n values; out may alias a or b. */
export function mul(n: i32, a: usize, b: usize, out: usize): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i * 4;
    v128.store(out + o, f32x4.mul(v128.load(a + o), v128.load(b + o)));
  }
  for (; i < n; i++) {
    const o = <usize>i * 4;
    store<f32>(out + o, load<f32>(a + o) * load<f32>(b + o));
  }
}

// bias (0: none) added to each of `rows` rows of n, then the activation
function finish(rows: i32, n: i32, bias: usize, act: i32, out: usize): void {
  if (bias != 0) {
    for (let r = 0; r < rows; r++) add(n, out + <usize>(r * n) * 4, bias, out + <usize>(r * n) * 4);
  }
  if (act != 0) activate(rows * n, out, act, out);
}

// ---------------------------------------------------------------------------------------------
// float32 products

// out[n] = x[k] · w[k, n] for one row: w streamed once, row by row (four or eight at a time),
// into the output row (in L1). Sums in the order of a plain loop over k.
function gemvRow(k: i32, n: i32, x: usize, w: usize, out: usize): void {
  memory.fill(out, 0, <usize>n * 4);
  const ld = <usize>n * 4;
  const end = <usize>(n & ~7) * 4;
  const end4 = <usize>(n & ~3) * 4;
  const all = <usize>n * 4;
  let p = 0;
  // a weight of 2 MB or more (likely to come from memory, not the cache: a model's weights
  // together exceed it): eight rows of w per pass, so the output row is loaded and stored once per
  // eight weight vectors (20-30% faster from memory; from the L3 cache four rows are faster)
  const eight = <u64>k * <u64>n >= <u64>(1 << 19);
  for (; eight && p + 8 <= k; p += 8) {
    const xp = x + <usize>p * 4;
    const x0 = v128.load32_splat(xp);
    const x1 = v128.load32_splat(xp, 4);
    const x2 = v128.load32_splat(xp, 8);
    const x3 = v128.load32_splat(xp, 12);
    const x4 = v128.load32_splat(xp, 16);
    const x5 = v128.load32_splat(xp, 20);
    const x6 = v128.load32_splat(xp, 24);
    const x7 = v128.load32_splat(xp, 28);
    const w0 = w + <usize>p * ld;
    const w1 = w0 + ld;
    const w2 = w1 + ld;
    const w3 = w2 + ld;
    const w4 = w3 + ld;
    const w5 = w4 + ld;
    const w6 = w5 + ld;
    const w7 = w6 + ld;
    let j: usize = 0;
    for (; j < end4; j += 16) {
      let o = v128.load(out + j);
      o = f32x4.add(o, f32x4.mul(x0, v128.load(w0 + j)));
      o = f32x4.add(o, f32x4.mul(x1, v128.load(w1 + j)));
      o = f32x4.add(o, f32x4.mul(x2, v128.load(w2 + j)));
      o = f32x4.add(o, f32x4.mul(x3, v128.load(w3 + j)));
      o = f32x4.add(o, f32x4.mul(x4, v128.load(w4 + j)));
      o = f32x4.add(o, f32x4.mul(x5, v128.load(w5 + j)));
      o = f32x4.add(o, f32x4.mul(x6, v128.load(w6 + j)));
      o = f32x4.add(o, f32x4.mul(x7, v128.load(w7 + j)));
      v128.store(out + j, o);
    }
    for (; j < all; j += 4) {
      let o = load<f32>(out + j);
      o += f32x4.extract_lane(x0, 0) * load<f32>(w0 + j);
      o += f32x4.extract_lane(x1, 0) * load<f32>(w1 + j);
      o += f32x4.extract_lane(x2, 0) * load<f32>(w2 + j);
      o += f32x4.extract_lane(x3, 0) * load<f32>(w3 + j);
      o += f32x4.extract_lane(x4, 0) * load<f32>(w4 + j);
      o += f32x4.extract_lane(x5, 0) * load<f32>(w5 + j);
      o += f32x4.extract_lane(x6, 0) * load<f32>(w6 + j);
      o += f32x4.extract_lane(x7, 0) * load<f32>(w7 + j);
      store<f32>(out + j, o);
    }
  }
  for (; p + 4 <= k; p += 4) {
    const xp = x + <usize>p * 4;
    const x0 = v128.load32_splat(xp);
    const x1 = v128.load32_splat(xp, 4);
    const x2 = v128.load32_splat(xp, 8);
    const x3 = v128.load32_splat(xp, 12);
    const w0 = w + <usize>p * ld;
    const w1 = w0 + ld;
    const w2 = w1 + ld;
    const w3 = w2 + ld;
    let j: usize = 0;
    for (; j < end; j += 32) {
      let o0 = v128.load(out + j);
      let o1 = v128.load(out + j, 16);
      o0 = f32x4.add(o0, f32x4.mul(x0, v128.load(w0 + j)));
      o1 = f32x4.add(o1, f32x4.mul(x0, v128.load(w0 + j, 16)));
      o0 = f32x4.add(o0, f32x4.mul(x1, v128.load(w1 + j)));
      o1 = f32x4.add(o1, f32x4.mul(x1, v128.load(w1 + j, 16)));
      o0 = f32x4.add(o0, f32x4.mul(x2, v128.load(w2 + j)));
      o1 = f32x4.add(o1, f32x4.mul(x2, v128.load(w2 + j, 16)));
      o0 = f32x4.add(o0, f32x4.mul(x3, v128.load(w3 + j)));
      o1 = f32x4.add(o1, f32x4.mul(x3, v128.load(w3 + j, 16)));
      v128.store(out + j, o0);
      v128.store(out + j, o1, 16);
    }
    for (; j < end4; j += 16) {
      let o = v128.load(out + j);
      o = f32x4.add(o, f32x4.mul(x0, v128.load(w0 + j)));
      o = f32x4.add(o, f32x4.mul(x1, v128.load(w1 + j)));
      o = f32x4.add(o, f32x4.mul(x2, v128.load(w2 + j)));
      o = f32x4.add(o, f32x4.mul(x3, v128.load(w3 + j)));
      v128.store(out + j, o);
    }
    const s0 = f32x4.extract_lane(x0, 0);
    const s1 = f32x4.extract_lane(x1, 0);
    const s2 = f32x4.extract_lane(x2, 0);
    const s3 = f32x4.extract_lane(x3, 0);
    for (; j < all; j += 4) {
      let o = load<f32>(out + j);
      o += s0 * load<f32>(w0 + j);
      o += s1 * load<f32>(w1 + j);
      o += s2 * load<f32>(w2 + j);
      o += s3 * load<f32>(w3 + j);
      store<f32>(out + j, o);
    }
  }
  for (; p < k; p++) {
    const s = load<f32>(x + <usize>p * 4);
    const xs = f32x4.splat(s);
    const w0 = w + <usize>p * ld;
    let j: usize = 0;
    for (; j < end4; j += 16) {
      v128.store(out + j, f32x4.add(v128.load(out + j), f32x4.mul(xs, v128.load(w0 + j))));
    }
    for (; j < all; j += 4) store<f32>(out + j, load<f32>(out + j) + s * load<f32>(w0 + j));
  }
}

// out[2, n] = x[2, k] · w[k, n] (two new positions, or a batch of two): as gemvRow, w streamed
// row by row, four rows of w per pass, each w vector loaded once for both rows of x, in blocks
// of NB output columns so both output rows of a block stay in L1 while all of k passes. Sums in
// the order of a plain loop over k.
const NB: i32 = 1024;
function gemvRows2(k: i32, n: i32, x: usize, ldx: usize, w: usize, out: usize, ld: usize): void {
  const x1 = x + ldx;
  const o1 = out + ld;
  memory.fill(out, 0, <usize>n * 4);
  memory.fill(o1, 0, <usize>n * 4);
  const ldw = <usize>n * 4;
  for (let j0 = 0; j0 < n; j0 += NB) {
    const nb = min(NB, n - j0);
    const lo = <usize>j0 * 4;
    const end4 = lo + <usize>(nb & ~3) * 4;
    const all = lo + <usize>nb * 4;
    let p = 0;
    for (; p + 4 <= k; p += 4) {
      const xp = <usize>p * 4;
      const a0 = v128.load32_splat(x + xp);
      const a1 = v128.load32_splat(x + xp, 4);
      const a2 = v128.load32_splat(x + xp, 8);
      const a3 = v128.load32_splat(x + xp, 12);
      const b0 = v128.load32_splat(x1 + xp);
      const b1 = v128.load32_splat(x1 + xp, 4);
      const b2 = v128.load32_splat(x1 + xp, 8);
      const b3 = v128.load32_splat(x1 + xp, 12);
      const w0 = w + <usize>p * ldw;
      const w1 = w0 + ldw;
      const w2 = w1 + ldw;
      const w3 = w2 + ldw;
      let j = lo;
      for (; j < end4; j += 16) {
        const u0 = v128.load(w0 + j);
        const u1 = v128.load(w1 + j);
        const u2 = v128.load(w2 + j);
        const u3 = v128.load(w3 + j);
        let o = v128.load(out + j);
        o = f32x4.add(o, f32x4.mul(a0, u0));
        o = f32x4.add(o, f32x4.mul(a1, u1));
        o = f32x4.add(o, f32x4.mul(a2, u2));
        o = f32x4.add(o, f32x4.mul(a3, u3));
        v128.store(out + j, o);
        let q = v128.load(o1 + j);
        q = f32x4.add(q, f32x4.mul(b0, u0));
        q = f32x4.add(q, f32x4.mul(b1, u1));
        q = f32x4.add(q, f32x4.mul(b2, u2));
        q = f32x4.add(q, f32x4.mul(b3, u3));
        v128.store(o1 + j, q);
      }
      for (; j < all; j += 4) {
        const u0 = load<f32>(w0 + j);
        const u1 = load<f32>(w1 + j);
        const u2 = load<f32>(w2 + j);
        const u3 = load<f32>(w3 + j);
        let o = load<f32>(out + j);
        o += f32x4.extract_lane(a0, 0) * u0;
        o += f32x4.extract_lane(a1, 0) * u1;
        o += f32x4.extract_lane(a2, 0) * u2;
        o += f32x4.extract_lane(a3, 0) * u3;
        store<f32>(out + j, o);
        let q = load<f32>(o1 + j);
        q += f32x4.extract_lane(b0, 0) * u0;
        q += f32x4.extract_lane(b1, 0) * u1;
        q += f32x4.extract_lane(b2, 0) * u2;
        q += f32x4.extract_lane(b3, 0) * u3;
        store<f32>(o1 + j, q);
      }
    }
    for (; p < k; p++) {
      const w0 = w + <usize>p * ldw;
      const s = load<f32>(x + <usize>p * 4);
      const t = load<f32>(x1 + <usize>p * 4);
      const sv = f32x4.splat(s);
      const tv = f32x4.splat(t);
      let j = lo;
      for (; j < end4; j += 16) {
        const u = v128.load(w0 + j);
        v128.store(out + j, f32x4.add(v128.load(out + j), f32x4.mul(sv, u)));
        v128.store(o1 + j, f32x4.add(v128.load(o1 + j), f32x4.mul(tv, u)));
      }
      for (; j < all; j += 4) {
        const u = load<f32>(w0 + j);
        store<f32>(out + j, load<f32>(out + j) + s * u);
        store<f32>(o1 + j, load<f32>(o1 + j) + t * u);
      }
    }
  }
}

// out[rows, n] = x[rows, k] · w[k, n] for rows >= 2: 4 x 8 register tiles over KC-blocks of k
// (the [KC, 8] weight tile stays in L1 across the row blocks; a row block past the last row
// repeats the last row and stores nothing for it); columns past the last multiple of 8 by a
// plain loop.
function gemmTiled(rows: i32, k: i32, n: i32, x: usize, w: usize, out: usize): void {
  const ld = <usize>n * 4;
  const ldx = <usize>k * 4;
  const n8 = n & ~7;
  for (let p0 = 0; p0 < k; p0 += KC) {
    const kc = min(KC, k - p0);
    const first = p0 == 0;
    for (let j0 = 0; j0 < n8; j0 += 8) {
      const wt = w + <usize>p0 * ld + <usize>j0 * 4;
      for (let i0 = 0; i0 < rows; i0 += 4) {
        const last = rows - 1;
        const r0 = x + <usize>i0 * ldx + <usize>p0 * 4;
        const r1 = x + <usize>min(i0 + 1, last) * ldx + <usize>p0 * 4;
        const r2 = x + <usize>min(i0 + 2, last) * ldx + <usize>p0 * 4;
        const r3 = x + <usize>min(i0 + 3, last) * ldx + <usize>p0 * 4;
        let c00 = f32x4.splat(0),
          c01 = f32x4.splat(0);
        let c10 = f32x4.splat(0),
          c11 = f32x4.splat(0);
        let c20 = f32x4.splat(0),
          c21 = f32x4.splat(0);
        let c30 = f32x4.splat(0),
          c31 = f32x4.splat(0);
        let wp = wt;
        for (let p = 0; p < kc; p++) {
          const b0 = v128.load(wp);
          const b1 = v128.load(wp, 16);
          const o = <usize>p * 4;
          const a0 = v128.load32_splat(r0 + o);
          c00 = f32x4.add(c00, f32x4.mul(a0, b0));
          c01 = f32x4.add(c01, f32x4.mul(a0, b1));
          const a1 = v128.load32_splat(r1 + o);
          c10 = f32x4.add(c10, f32x4.mul(a1, b0));
          c11 = f32x4.add(c11, f32x4.mul(a1, b1));
          const a2 = v128.load32_splat(r2 + o);
          c20 = f32x4.add(c20, f32x4.mul(a2, b0));
          c21 = f32x4.add(c21, f32x4.mul(a2, b1));
          const a3 = v128.load32_splat(r3 + o);
          c30 = f32x4.add(c30, f32x4.mul(a3, b0));
          c31 = f32x4.add(c31, f32x4.mul(a3, b1));
          wp += ld;
        }
        const c0 = out + <usize>i0 * ld + <usize>j0 * 4;
        if (!first) {
          c00 = f32x4.add(c00, v128.load(c0));
          c01 = f32x4.add(c01, v128.load(c0, 16));
        }
        v128.store(c0, c00);
        v128.store(c0, c01, 16);
        if (i0 + 1 > last) continue;
        const c1 = c0 + ld;
        if (!first) {
          c10 = f32x4.add(c10, v128.load(c1));
          c11 = f32x4.add(c11, v128.load(c1, 16));
        }
        v128.store(c1, c10);
        v128.store(c1, c11, 16);
        if (i0 + 2 > last) continue;
        const c2 = c1 + ld;
        if (!first) {
          c20 = f32x4.add(c20, v128.load(c2));
          c21 = f32x4.add(c21, v128.load(c2, 16));
        }
        v128.store(c2, c20);
        v128.store(c2, c21, 16);
        if (i0 + 3 > last) continue;
        const c3 = c2 + ld;
        if (!first) {
          c30 = f32x4.add(c30, v128.load(c3));
          c31 = f32x4.add(c31, v128.load(c3, 16));
        }
        v128.store(c3, c30);
        v128.store(c3, c31, 16);
      }
    }
  }
  for (let j = n8; j < n; j++) {
    for (let r = 0; r < rows; r++) {
      let s: f32 = 0;
      const xr = x + <usize>r * ldx;
      for (let p = 0; p < k; p++)
        s += load<f32>(xr + <usize>p * 4) * load<f32>(w + <usize>p * ld + <usize>j * 4);
      store<f32>(out + <usize>r * ld + <usize>j * 4, s);
    }
  }
}

/** `out [rows, n] = act(x [rows, k] · w [k, n] + bias [n])`; bias 0 = none. */
export function dense(
  rows: i32,
  k: i32,
  n: i32,
  x: usize,
  w: usize,
  bias: usize,
  act: i32,
  out: usize,
): void {
  if (rows <= 0 || n <= 0) return;
  if (k <= 0) memory.fill(out, 0, <usize>(rows * n) * 4);
  else if (rows == 1) gemvRow(k, n, x, w, out);
  else if (rows <= 3) {
    // two rows (and a third alone): w streamed once per pair, not through the tiles
    gemvRows2(k, n, x, <usize>k * 4, w, out, <usize>n * 4);
    if (rows == 3) gemvRow(k, n, x + <usize>(2 * k) * 4, w, out + <usize>(2 * n) * 4);
  } else gemmTiled(rows, k, n, x, w, out);
  finish(rows, n, bias, act, out);
}

// ---------------------------------------------------------------------------------------------
// products of several rows (a prompt's prefill) on packed operands

/** Columns of a packed weight panel (two f32x4). */
const NR: i32 = 8;
/** Rows of x packed at a time (groups of 4 rows interleaved: [kc, 4] each). */
const MC: i32 = 128;

/** Bytes of the scratch `denseRows` needs: a packed [KC, NR] weight panel, MC packed rows of x. */
export function denseRowsWorkBytes(): i32 {
  return KC * NR * 4 + MC * KC * 4;
}

// w[0 .. kc, 0 .. cols] (row stride ld bytes) into panel [kc, NR], contiguous; columns past
// `cols` (a last panel narrower than NR) are zeros
function packPanel(kc: i32, cols: i32, w: usize, ld: usize, panel: usize): void {
  if (cols == NR) {
    for (let p = 0; p < kc; p++) {
      const from = w + <usize>p * ld;
      const to = panel + <usize>(p * NR) * 4;
      v128.store(to, v128.load(from));
      v128.store(to, v128.load(from, 16), 16);
    }
    return;
  }
  for (let p = 0; p < kc; p++) {
    const from = w + <usize>p * ld;
    const to = panel + <usize>(p * NR) * 4;
    v128.store(to, f32x4.splat(0));
    v128.store(to, f32x4.splat(0), 16);
    for (let c = 0; c < cols; c++) store<f32>(to + <usize>c * 4, load<f32>(from + <usize>c * 4));
  }
}

// rows x[0 .. rows, 0 .. kc] (row stride ldx bytes) into groups of 4 rows, each [kc, 4]
// (a[p * 4 + i] = x[i, p]); a last group of fewer rows repeats its last row
function packRows(rows: i32, kc: i32, x: usize, ldx: usize, a: usize): void {
  const last = rows - 1;
  const kc4 = kc & ~3;
  for (let i0 = 0; i0 < rows; i0 += 4) {
    const x0 = x + <usize>i0 * ldx;
    const x1 = x + <usize>min(i0 + 1, last) * ldx;
    const x2 = x + <usize>min(i0 + 2, last) * ldx;
    const x3 = x + <usize>min(i0 + 3, last) * ldx;
    const g = a + <usize>(i0 * kc) * 4;
    let p = 0;
    for (; p < kc4; p += 4) {
      const o = <usize>p * 4;
      const v0 = v128.load(x0 + o);
      const v1 = v128.load(x1 + o);
      const v2 = v128.load(x2 + o);
      const v3 = v128.load(x3 + o);
      const t0 = i32x4.shuffle(v0, v1, 0, 4, 1, 5);
      const t1 = i32x4.shuffle(v2, v3, 0, 4, 1, 5);
      const t2 = i32x4.shuffle(v0, v1, 2, 6, 3, 7);
      const t3 = i32x4.shuffle(v2, v3, 2, 6, 3, 7);
      const to = g + <usize>p * 16;
      v128.store(to, i32x4.shuffle(t0, t1, 0, 1, 4, 5));
      v128.store(to, i32x4.shuffle(t0, t1, 2, 3, 6, 7), 16);
      v128.store(to, i32x4.shuffle(t2, t3, 0, 1, 4, 5), 32);
      v128.store(to, i32x4.shuffle(t2, t3, 2, 3, 6, 7), 48);
    }
    for (; p < kc; p++) {
      const o = <usize>p * 4;
      const to = g + <usize>p * 16;
      store<f32>(to, load<f32>(x0 + o));
      store<f32>(to, load<f32>(x1 + o), 4);
      store<f32>(to, load<f32>(x2 + o), 8);
      store<f32>(to, load<f32>(x3 + o), 12);
    }
  }
}

// stores (first) or adds a tile row of NR values at c
function put(c: usize, v0: v128, v1: v128, first: bool): void {
  if (!first) {
    v0 = f32x4.add(v0, v128.load(c));
    v1 = f32x4.add(v1, v128.load(c, 16));
  }
  v128.store(c, v0);
  v128.store(c, v1, 16);
}

// a packed group of 4 rows [kc, 4] times a packed panel [kc, NR] into out rows (stride ldo
// bytes): the first `valid` rows stored (first) or added
function tile4x8(
  kc: i32,
  a: usize,
  panel: usize,
  out: usize,
  ldo: usize,
  valid: i32,
  first: bool,
): void {
  let c00 = f32x4.splat(0),
    c01 = f32x4.splat(0),
    c10 = f32x4.splat(0),
    c11 = f32x4.splat(0),
    c20 = f32x4.splat(0),
    c21 = f32x4.splat(0),
    c30 = f32x4.splat(0),
    c31 = f32x4.splat(0);
  let bp = panel;
  let ap = a;
  const end = a + <usize>kc * 16;
  for (; ap < end; ap += 16) {
    const b0 = v128.load(bp);
    const b1 = v128.load(bp, 16);
    bp += NR * 4;
    const a0 = v128.load32_splat(ap);
    c00 = f32x4.add(c00, f32x4.mul(a0, b0));
    c01 = f32x4.add(c01, f32x4.mul(a0, b1));
    const a1 = v128.load32_splat(ap, 4);
    c10 = f32x4.add(c10, f32x4.mul(a1, b0));
    c11 = f32x4.add(c11, f32x4.mul(a1, b1));
    const a2 = v128.load32_splat(ap, 8);
    c20 = f32x4.add(c20, f32x4.mul(a2, b0));
    c21 = f32x4.add(c21, f32x4.mul(a2, b1));
    const a3 = v128.load32_splat(ap, 12);
    c30 = f32x4.add(c30, f32x4.mul(a3, b0));
    c31 = f32x4.add(c31, f32x4.mul(a3, b1));
  }
  put(out, c00, c01, first);
  if (valid < 2) return;
  put(out + ldo, c10, c11, first);
  if (valid < 3) return;
  put(out + 2 * ldo, c20, c21, first);
  if (valid < 4) return;
  put(out + 3 * ldo, c30, c31, first);
}

// out[rows, n] = x[rows, k] · w[k, n]: for each KC-block of k and each group of up to MC rows,
// the rows packed into `work` once (4 rows interleaved), then for each NR-wide column panel the
// panel packed once (contiguous, in L1 for every row group of 4) and multiplied by every group;
// a last panel narrower than NR is zero-padded and summed column by column
function gemmPacked(rows: i32, k: i32, n: i32, x: usize, w: usize, out: usize, work: usize): void {
  const ld = <usize>n * 4;
  const ldx = <usize>k * 4;
  const panel = work;
  const a = work + <usize>(KC * NR) * 4;
  const nFull = n - (n % NR);
  const cols = n - nFull;
  for (let p0 = 0; p0 < k; p0 += KC) {
    const kc = min(KC, k - p0);
    const first = p0 == 0;
    const wb = w + <usize>p0 * ld;
    for (let m0 = 0; m0 < rows; m0 += MC) {
      const mc = min(MC, rows - m0);
      packRows(mc, kc, x + <usize>m0 * ldx + <usize>p0 * 4, ldx, a);
      const ob = out + <usize>m0 * ld;
      for (let j0 = 0; j0 < nFull; j0 += NR) {
        packPanel(kc, NR, wb + <usize>j0 * 4, ld, panel);
        for (let i0 = 0; i0 < mc; i0 += 4) {
          const o = ob + <usize>i0 * ld + <usize>j0 * 4;
          tile4x8(kc, a + <usize>(i0 * kc) * 4, panel, o, ld, min(4, mc - i0), first);
        }
      }
      if (cols == 0) continue;
      // the last columns (fewer than NR): a zero-padded panel, plain sums per column
      packPanel(kc, cols, wb + <usize>nFull * 4, ld, panel);
      for (let i0 = 0; i0 < mc; i0 += 4) {
        const valid = min(4, mc - i0);
        tailTile(
          kc,
          a + <usize>(i0 * kc) * 4,
          panel,
          cols,
          ob + <usize>i0 * ld + <usize>nFull * 4,
          ld,
          valid,
          first,
        );
      }
    }
  }
}

// a packed group of 4 rows times a zero-padded panel of `cols` < NR real columns: plain sums of
// its first `cols` columns, stored (first) or added
function tailTile(
  kc: i32,
  a: usize,
  panel: usize,
  cols: i32,
  out: usize,
  ldo: usize,
  valid: i32,
  first: bool,
): void {
  for (let i = 0; i < valid; i++) {
    const to = out + <usize>i * ldo;
    for (let c = 0; c < cols; c++) {
      let s: f32 = 0;
      for (let p = 0; p < kc; p++) {
        s += load<f32>(a + <usize>(p * 4 + i) * 4) * load<f32>(panel + <usize>(p * NR + c) * 4);
      }
      const o = <usize>c * 4;
      store<f32>(to + o, first ? s : s + load<f32>(to + o));
    }
  }
}

/**
 * `out [rows, n] = act(x [rows, k] · w [k, n] + bias [n])` as `dense`, for several rows (a
 * prompt's prefill): rows and weight panels packed into `work` (denseRowsWorkBytes() bytes,
 * 16-aligned) once per call, 4 x 8 register tiles; fewer than 4 rows as `dense`.
 */
export function denseRows(
  rows: i32,
  k: i32,
  n: i32,
  x: usize,
  w: usize,
  bias: usize,
  act: i32,
  out: usize,
  work: usize,
): void {
  if (rows < 4 || k <= 0 || n <= 0) {
    dense(rows, k, n, x, w, bias, act, out);
    return;
  }
  gemmPacked(rows, k, n, x, w, out, work);
  finish(rows, n, bias, act, out);
}

// dot products of x[k] with four rows of w (stride ldw bytes) into out[0..3]
function dot4(k: i32, x: usize, w: usize, ldw: usize, out: usize): void {
  const k4 = <usize>(k & ~3) * 4;
  const w1 = w + ldw;
  const w2 = w1 + ldw;
  const w3 = w2 + ldw;
  let a0 = f32x4.splat(0),
    a1 = f32x4.splat(0),
    a2 = f32x4.splat(0),
    a3 = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k4; p += 16) {
    const xv = v128.load(x + p);
    a0 = f32x4.add(a0, f32x4.mul(xv, v128.load(w + p)));
    a1 = f32x4.add(a1, f32x4.mul(xv, v128.load(w1 + p)));
    a2 = f32x4.add(a2, f32x4.mul(xv, v128.load(w2 + p)));
    a3 = f32x4.add(a3, f32x4.mul(xv, v128.load(w3 + p)));
  }
  let s0 = hsum(a0),
    s1 = hsum(a1),
    s2 = hsum(a2),
    s3 = hsum(a3);
  const all = <usize>k * 4;
  for (; p < all; p += 4) {
    const xs = load<f32>(x + p);
    s0 += xs * load<f32>(w + p);
    s1 += xs * load<f32>(w1 + p);
    s2 += xs * load<f32>(w2 + p);
    s3 += xs * load<f32>(w3 + p);
  }
  store<f32>(out, s0);
  store<f32>(out, s1, 4);
  store<f32>(out, s2, 8);
  store<f32>(out, s3, 12);
}

// two rows of x against four rows of w: out rows (stride ldo bytes), columns 0..3
function dot2x4(k: i32, x: usize, ldx: usize, w: usize, ldw: usize, out: usize, ldo: usize): void {
  const k4 = <usize>(k & ~3) * 4;
  const x1 = x + ldx;
  const w1 = w + ldw;
  const w2 = w1 + ldw;
  const w3 = w2 + ldw;
  let a0 = f32x4.splat(0),
    a1 = f32x4.splat(0),
    a2 = f32x4.splat(0),
    a3 = f32x4.splat(0);
  let b0 = f32x4.splat(0),
    b1 = f32x4.splat(0),
    b2 = f32x4.splat(0),
    b3 = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k4; p += 16) {
    const xa = v128.load(x + p);
    const xb = v128.load(x1 + p);
    const v0 = v128.load(w + p);
    a0 = f32x4.add(a0, f32x4.mul(xa, v0));
    b0 = f32x4.add(b0, f32x4.mul(xb, v0));
    const v1 = v128.load(w1 + p);
    a1 = f32x4.add(a1, f32x4.mul(xa, v1));
    b1 = f32x4.add(b1, f32x4.mul(xb, v1));
    const v2 = v128.load(w2 + p);
    a2 = f32x4.add(a2, f32x4.mul(xa, v2));
    b2 = f32x4.add(b2, f32x4.mul(xb, v2));
    const v3 = v128.load(w3 + p);
    a3 = f32x4.add(a3, f32x4.mul(xa, v3));
    b3 = f32x4.add(b3, f32x4.mul(xb, v3));
  }
  let s0 = hsum(a0),
    s1 = hsum(a1),
    s2 = hsum(a2),
    s3 = hsum(a3);
  let t0 = hsum(b0),
    t1 = hsum(b1),
    t2 = hsum(b2),
    t3 = hsum(b3);
  const all = <usize>k * 4;
  for (; p < all; p += 4) {
    const xs = load<f32>(x + p);
    const ys = load<f32>(x1 + p);
    const u0 = load<f32>(w + p);
    const u1 = load<f32>(w1 + p);
    const u2 = load<f32>(w2 + p);
    const u3 = load<f32>(w3 + p);
    s0 += xs * u0;
    s1 += xs * u1;
    s2 += xs * u2;
    s3 += xs * u3;
    t0 += ys * u0;
    t1 += ys * u1;
    t2 += ys * u2;
    t3 += ys * u3;
  }
  store<f32>(out, s0);
  store<f32>(out, s1, 4);
  store<f32>(out, s2, 8);
  store<f32>(out, s3, 12);
  const o1 = out + ldo;
  store<f32>(o1, t0);
  store<f32>(o1, t1, 4);
  store<f32>(o1, t2, 8);
  store<f32>(o1, t3, 12);
}

function dot1(k: i32, x: usize, w: usize): f32 {
  const k4 = <usize>(k & ~3) * 4;
  let a = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k4; p += 16) a = f32x4.add(a, f32x4.mul(v128.load(x + p), v128.load(w + p)));
  let s = hsum(a);
  const all = <usize>k * 4;
  for (; p < all; p += 4) s += load<f32>(x + p) * load<f32>(w + p);
  return s;
}

// x[k] · w[k] with four accumulators of 16 floats per pass (one sequential stream through w; the
// row of x stays in L1), the horizontal adds at the end
function dotRow(k: i32, x: usize, w: usize): f32 {
  const k16 = <usize>(k & ~15) * 4;
  let a0 = f32x4.splat(0),
    a1 = f32x4.splat(0),
    a2 = f32x4.splat(0),
    a3 = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k16; p += 64) {
    a0 = f32x4.add(a0, f32x4.mul(v128.load(x + p), v128.load(w + p)));
    a1 = f32x4.add(a1, f32x4.mul(v128.load(x + p, 16), v128.load(w + p, 16)));
    a2 = f32x4.add(a2, f32x4.mul(v128.load(x + p, 32), v128.load(w + p, 32)));
    a3 = f32x4.add(a3, f32x4.mul(v128.load(x + p, 48), v128.load(w + p, 48)));
  }
  const all = <usize>k * 4;
  const k4 = <usize>(k & ~3) * 4;
  for (; p < k4; p += 16) a0 = f32x4.add(a0, f32x4.mul(v128.load(x + p), v128.load(w + p)));
  let s = hsum(f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, a3)));
  for (; p < all; p += 4) s += load<f32>(x + p) * load<f32>(w + p);
  return s;
}

// x[k] · w[k] and y[k] · w[k] (two rows of x against one row of w), two accumulators each of 8
// floats per pass, into out and out + ldo
function dotRow2(k: i32, x: usize, y: usize, w: usize, out: usize, ldo: usize): void {
  const k8 = <usize>(k & ~7) * 4;
  let a0 = f32x4.splat(0),
    a1 = f32x4.splat(0),
    b0 = f32x4.splat(0),
    b1 = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k8; p += 32) {
    const u0 = v128.load(w + p);
    const u1 = v128.load(w + p, 16);
    a0 = f32x4.add(a0, f32x4.mul(v128.load(x + p), u0));
    a1 = f32x4.add(a1, f32x4.mul(v128.load(x + p, 16), u1));
    b0 = f32x4.add(b0, f32x4.mul(v128.load(y + p), u0));
    b1 = f32x4.add(b1, f32x4.mul(v128.load(y + p, 16), u1));
  }
  const all = <usize>k * 4;
  const k4 = <usize>(k & ~3) * 4;
  for (; p < k4; p += 16) {
    const u = v128.load(w + p);
    a0 = f32x4.add(a0, f32x4.mul(v128.load(x + p), u));
    b0 = f32x4.add(b0, f32x4.mul(v128.load(y + p), u));
  }
  let s = hsum(f32x4.add(a0, a1));
  let t = hsum(f32x4.add(b0, b1));
  for (; p < all; p += 4) {
    const u = load<f32>(w + p);
    s += load<f32>(x + p) * u;
    t += load<f32>(y + p) * u;
  }
  store<f32>(out, s);
  store<f32>(out + ldo, t);
}

// rows of x against every row of w [n, k]: the table read once, front to back, each of its rows
// (in L1) against every row of x, two at a time
function denseTStream(rows: i32, k: i32, n: i32, x: usize, w: usize, out: usize): void {
  const ldw = <usize>k * 4;
  const ldo = <usize>n * 4;
  const rows2 = rows & ~1;
  for (let j = 0; j < n; j++) {
    const wj = w + <usize>j * ldw;
    const oj = out + <usize>j * 4;
    let r = 0;
    for (; r < rows2; r += 2) {
      const xr = x + <usize>r * ldw;
      dotRow2(k, xr, xr + ldw, wj, oj + <usize>r * ldo, ldo);
    }
    if (r < rows) store<f32>(oj + <usize>r * ldo, dotRow(k, x + <usize>r * ldw, wj));
  }
}

/**
 * `out [rows, n] = x [rows, k] · wᵀ` with w `[n, k]`: four rows of w at a time (in L1 while every
 * row of x passes, two rows of x at a time), so w is read from memory once.
 */
export function denseT(rows: i32, k: i32, n: i32, x: usize, w: usize, out: usize): void {
  if (rows <= DENSET_STREAM_ROWS) {
    denseTStream(rows, k, n, x, w, out);
    return;
  }
  const ldx = <usize>k * 4;
  const ldo = <usize>n * 4;
  const n4 = n & ~3;
  const rows2 = rows & ~1;
  for (let j = 0; j < n4; j += 4) {
    const wj = w + <usize>j * ldx;
    let r = 0;
    for (; r < rows2; r += 2) {
      dot2x4(k, x + <usize>r * ldx, ldx, wj, ldx, out + <usize>r * ldo + <usize>j * 4, ldo);
    }
    if (r < rows) dot4(k, x + <usize>r * ldx, wj, ldx, out + <usize>r * ldo + <usize>j * 4);
  }
  for (let j = n4; j < n; j++) {
    for (let r = 0; r < rows; r++) {
      store<f32>(
        out + <usize>r * ldo + <usize>j * 4,
        dot1(k, x + <usize>r * ldx, w + <usize>j * ldx),
      );
    }
  }
}

// ---------------------------------------------------------------------------------------------
// int8 (Keras 3's quantization)

/**
 * Keras' abs_max_quantize per row, in float32: `qs[r] = 127 / (max |x[r, :]| + 1e-7)`,
 * `q = clip(round_half_even(x * qs[r]), -127, 127)` as int8.
 */
export function quantizeRows(rows: i32, k: i32, x: usize, q: usize, qs: usize): void {
  const lo = f32x4.splat(-127);
  const hi = f32x4.splat(127);
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * k) * 4;
    const qr = q + <usize>(r * k);
    let mv = f32x4.splat(0);
    let j = 0;
    for (; j + 4 <= k; j += 4) mv = f32x4.max(mv, f32x4.abs(v128.load(xr + <usize>j * 4)));
    let m = max(
      max(f32x4.extract_lane(mv, 0), f32x4.extract_lane(mv, 1)),
      max(f32x4.extract_lane(mv, 2), f32x4.extract_lane(mv, 3)),
    );
    for (; j < k; j++) m = max(m, abs<f32>(load<f32>(xr + <usize>j * 4)));
    const s: f32 = <f32>127 / (m + <f32>1e-7);
    store<f32>(qs + <usize>r * 4, s);
    const sv = f32x4.splat(s);
    j = 0;
    for (; j + 16 <= k; j += 16) {
      const o = xr + <usize>j * 4;
      const v0 = i32x4.trunc_sat_f32x4_s(
        f32x4.min(f32x4.max(f32x4.nearest(f32x4.mul(v128.load(o), sv)), lo), hi),
      );
      const v1 = i32x4.trunc_sat_f32x4_s(
        f32x4.min(f32x4.max(f32x4.nearest(f32x4.mul(v128.load(o, 16), sv)), lo), hi),
      );
      const v2 = i32x4.trunc_sat_f32x4_s(
        f32x4.min(f32x4.max(f32x4.nearest(f32x4.mul(v128.load(o, 32), sv)), lo), hi),
      );
      const v3 = i32x4.trunc_sat_f32x4_s(
        f32x4.min(f32x4.max(f32x4.nearest(f32x4.mul(v128.load(o, 48), sv)), lo), hi),
      );
      v128.store(
        qr + <usize>j,
        i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(v0, v1), i16x8.narrow_i32x4_s(v2, v3)),
      );
    }
    for (; j < k; j++) {
      const v = min(max(nearest<f32>(load<f32>(xr + <usize>j * 4) * s), <f32>-127), <f32>127);
      store<i8>(qr + <usize>j, <i8>(<i32>v));
    }
  }
}

// out (i32 sums in place) = f32(sum) / (qs * ws[j]) for one row of n
function descale(n: i32, s: f32, ws: usize, out: usize): void {
  const sv = f32x4.splat(s);
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = out + <usize>j * 4;
    v128.store(
      o,
      f32x4.div(f32x4.convert_i32x4_s(v128.load(o)), f32x4.mul(sv, v128.load(ws + <usize>j * 4))),
    );
  }
  for (; j < n; j++) {
    const o = out + <usize>j * 4;
    store<f32>(o, <f32>load<i32>(o) / (s * load<f32>(ws + <usize>j * 4)));
  }
}

/**
 * Keras 3's int8 Dense: `out[r, j] = act(f32(Σ_p q[r, p] w[j, p]) / (qs[r] * ws[j]) + bias[j])`,
 * the sums exact in int32. The kernel `[k, n]` is packed transposed (`packInt8T`): w int8
 * `[n, k]`, each output's k weights contiguous, so one row streams w once, four weight rows a
 * pass (the i8 -> i16 widening of q shared by four), with no partial sums in memory.
 */
export function denseInt8(
  rows: i32,
  k: i32,
  n: i32,
  q: usize,
  qs: usize,
  w: usize,
  ws: usize,
  bias: usize,
  act: i32,
  out: usize,
): void {
  sumsT(rows, k, n, q, w, out);
  const ldo = <usize>n * 4;
  for (let r = 0; r < rows; r++) descale(n, load<f32>(qs + <usize>r * 4), ws, out + <usize>r * ldo);
  finish(rows, n, bias, act, out);
}

// Σ_p q[p] w[p] over int8 rows of k: 16 at a time, widened to i16, i32x4.dot_i16x8_s
function dotInt8(k: i32, q: usize, w: usize): i32 {
  let acc = i32x4.splat(0);
  let p = 0;
  for (; p + 16 <= k; p += 16) {
    const a = v128.load(q + <usize>p);
    const b = v128.load(w + <usize>p);
    acc = i32x4.add(
      acc,
      i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(a), i16x8.extend_low_i8x16_s(b)),
    );
    acc = i32x4.add(
      acc,
      i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(a), i16x8.extend_high_i8x16_s(b)),
    );
  }
  let s = hsumI(acc);
  for (; p < k; p++) s += <i32>load<i8>(q + <usize>p) * <i32>load<i8>(w + <usize>p);
  return s;
}

// Σ_p q[p] w[p] over int8 rows of k, 32 at a time into two accumulators (one sequential stream
// through w)
function dotInt8Row(k: i32, q: usize, w: usize): i32 {
  let a0 = i32x4.splat(0),
    a1 = i32x4.splat(0);
  let p = 0;
  for (; p + 32 <= k; p += 32) {
    const o = <usize>p;
    const x0 = v128.load(q + o);
    const x1 = v128.load(q + o, 16);
    const b0 = v128.load(w + o);
    const b1 = v128.load(w + o, 16);
    a0 = i32x4.add(
      a0,
      i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(x0), i16x8.extend_low_i8x16_s(b0)),
    );
    a1 = i32x4.add(
      a1,
      i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(x0), i16x8.extend_high_i8x16_s(b0)),
    );
    a0 = i32x4.add(
      a0,
      i32x4.dot_i16x8_s(i16x8.extend_low_i8x16_s(x1), i16x8.extend_low_i8x16_s(b1)),
    );
    a1 = i32x4.add(
      a1,
      i32x4.dot_i16x8_s(i16x8.extend_high_i8x16_s(x1), i16x8.extend_high_i8x16_s(b1)),
    );
  }
  return hsumI(i32x4.add(a0, a1)) + dotInt8(k - p, q + <usize>p, w + <usize>p);
}

// four rows of w int8 (stride k) against one row of q: sums into out[0..3] (i32)
function dotInt8x4(k: i32, q: usize, w: usize, out: usize): void {
  const ld = <usize>k;
  const w1 = w + ld;
  const w2 = w1 + ld;
  const w3 = w2 + ld;
  let c0 = i32x4.splat(0),
    c1 = i32x4.splat(0),
    c2 = i32x4.splat(0),
    c3 = i32x4.splat(0);
  let p = 0;
  for (; p + 16 <= k; p += 16) {
    const o = <usize>p;
    const a = v128.load(q + o);
    const al = i16x8.extend_low_i8x16_s(a);
    const ah = i16x8.extend_high_i8x16_s(a);
    const b0 = v128.load(w + o);
    c0 = i32x4.add(c0, i32x4.dot_i16x8_s(al, i16x8.extend_low_i8x16_s(b0)));
    c0 = i32x4.add(c0, i32x4.dot_i16x8_s(ah, i16x8.extend_high_i8x16_s(b0)));
    const b1 = v128.load(w1 + o);
    c1 = i32x4.add(c1, i32x4.dot_i16x8_s(al, i16x8.extend_low_i8x16_s(b1)));
    c1 = i32x4.add(c1, i32x4.dot_i16x8_s(ah, i16x8.extend_high_i8x16_s(b1)));
    const b2 = v128.load(w2 + o);
    c2 = i32x4.add(c2, i32x4.dot_i16x8_s(al, i16x8.extend_low_i8x16_s(b2)));
    c2 = i32x4.add(c2, i32x4.dot_i16x8_s(ah, i16x8.extend_high_i8x16_s(b2)));
    const b3 = v128.load(w3 + o);
    c3 = i32x4.add(c3, i32x4.dot_i16x8_s(al, i16x8.extend_low_i8x16_s(b3)));
    c3 = i32x4.add(c3, i32x4.dot_i16x8_s(ah, i16x8.extend_high_i8x16_s(b3)));
  }
  let s0 = hsumI(c0),
    s1 = hsumI(c1),
    s2 = hsumI(c2),
    s3 = hsumI(c3);
  for (; p < k; p++) {
    const a = <i32>load<i8>(q + <usize>p);
    s0 += a * <i32>load<i8>(w + <usize>p);
    s1 += a * <i32>load<i8>(w1 + <usize>p);
    s2 += a * <i32>load<i8>(w2 + <usize>p);
    s3 += a * <i32>load<i8>(w3 + <usize>p);
  }
  store<i32>(out, s0);
  store<i32>(out, s1, 4);
  store<i32>(out, s2, 8);
  store<i32>(out, s3, 12);
}

// one row (a decoding step): `out[j] = Σ_p q[p] w[j, p]` (as i32), w read once, front to back,
// one stream (four rows of w a pass, dotInt8x4, measured slower here: qkv 0.53 against 0.33 ms)
function sumsRow(k: i32, n: i32, q: usize, w: usize, out: usize): void {
  for (let j = 0; j < n; j++) {
    store<i32>(out + <usize>j * 4, dotInt8Row(k, q, w + <usize>j * <usize>k));
  }
}

// the int32 sums `out[r, j] = Σ_p q[r, p] w[j, p]` (as i32 in out), w int8 [n, k]; several rows
// of q: four rows of w a pass against each (the four rows' k bytes stay in L1 across them)
function sumsT(rows: i32, k: i32, n: i32, q: usize, w: usize, out: usize): void {
  if (rows == 1) {
    sumsRow(k, n, q, w, out);
    return;
  }
  const ldo = <usize>n * 4;
  const n4 = n & ~3;
  for (let j = 0; j < n4; j += 4) {
    const wj = w + <usize>j * <usize>k;
    for (let r = 0; r < rows; r++) {
      dotInt8x4(k, q + <usize>(r * k), wj, out + <usize>r * ldo + <usize>j * 4);
    }
  }
  for (let j = n4; j < n; j++) {
    for (let r = 0; r < rows; r++) {
      store<i32>(
        out + <usize>r * ldo + <usize>j * 4,
        dotInt8(k, q + <usize>(r * k), w + <usize>j * <usize>k),
      );
    }
  }
}

/** The int8 tied logits: `out[r, j] = f32(Σ_p q[r, p] w[j, p]) / (qs[r] * ws[j])`, w int8 [n, k]. */
export function denseTInt8(
  rows: i32,
  k: i32,
  n: i32,
  q: usize,
  qs: usize,
  w: usize,
  ws: usize,
  out: usize,
): void {
  sumsT(rows, k, n, q, w, out);
  const ldo = <usize>n * 4;
  for (let r = 0; r < rows; r++) descale(n, load<f32>(qs + <usize>r * 4), ws, out + <usize>r * ldo);
}

// ---------------------------------------------------------------------------------------------
// normalization

// The sums of the norms in float64 (as tfjs' cpu backend sums float32 values in JavaScript
// numbers): the mean stays exact to float32 even where it is large against the spread.
function sumOf(dim: i32, x: usize): f64 {
  let a = f64x2.splat(0),
    b = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= dim; j += 4) {
    const v = v128.load(x + <usize>j * 4);
    a = f64x2.add(a, f64x2.promote_low_f32x4(v));
    b = f64x2.add(b, f64x2.promote_low_f32x4(i64x2.shuffle(v, v, 1, 0)));
  }
  let s = f64x2.extract_lane(a, 0) + f64x2.extract_lane(a, 1);
  s += f64x2.extract_lane(b, 0) + f64x2.extract_lane(b, 1);
  for (; j < dim; j++) s += <f64>load<f32>(x + <usize>j * 4);
  return s;
}

// Σ (x - c)^2 over dim values: each square in float32 (tfjs' square of x - mean), summed in
// float64
function squaresOf(dim: i32, x: usize, c: f32): f64 {
  const cv = f32x4.splat(c);
  let a = f64x2.splat(0),
    b = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= dim; j += 4) {
    const d = f32x4.sub(v128.load(x + <usize>j * 4), cv);
    const sq = f32x4.mul(d, d);
    a = f64x2.add(a, f64x2.promote_low_f32x4(sq));
    b = f64x2.add(b, f64x2.promote_low_f32x4(i64x2.shuffle(sq, sq, 1, 0)));
  }
  let s = f64x2.extract_lane(a, 0) + f64x2.extract_lane(a, 1);
  s += f64x2.extract_lane(b, 0) + f64x2.extract_lane(b, 1);
  for (; j < dim; j++) {
    const d = load<f32>(x + <usize>j * 4) - c;
    s += <f64>(d * d);
  }
  return s;
}

// out = (x - c) * inv * gamma + beta over dim values (gamma / beta 0: absent)
function normalize(
  dim: i32,
  x: usize,
  c: f32,
  inv: f32,
  gamma: usize,
  beta: usize,
  out: usize,
): void {
  const cv = f32x4.splat(c);
  const iv = f32x4.splat(inv);
  let j = 0;
  for (; j + 4 <= dim; j += 4) {
    const o = <usize>j * 4;
    let v = f32x4.mul(f32x4.sub(v128.load(x + o), cv), iv);
    if (gamma != 0) v = f32x4.mul(v, v128.load(gamma + o));
    if (beta != 0) v = f32x4.add(v, v128.load(beta + o));
    v128.store(out + o, v);
  }
  for (; j < dim; j++) {
    const o = <usize>j * 4;
    let v = (load<f32>(x + o) - c) * inv;
    if (gamma != 0) v *= load<f32>(gamma + o);
    if (beta != 0) v += load<f32>(beta + o);
    store<f32>(out + o, v);
  }
}

/**
 * Layer normalization over the last axis, as tfjs' LayerNormalization: two passes (the mean, then
 * the biased variance of x - mean, each square in float32), sums in float64; out may alias x.
 */
export function layerNorm(
  rows: i32,
  dim: i32,
  x: usize,
  gamma: usize,
  beta: usize,
  epsilon: f32,
  out: usize,
): void {
  const d = <f64>dim;
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * dim) * 4;
    const mean = <f32>(sumOf(dim, xr) / d);
    const variance = <f32>(squaresOf(dim, xr, mean) / d);
    const inv = <f32>1 / sqrt<f32>(variance + epsilon);
    normalize(dim, xr, mean, inv, gamma, beta, out + <usize>(r * dim) * 4);
  }
}

/** RMS normalization: `out = x / sqrt(mean(x^2) + epsilon) * gamma`; out may alias x. */
export function rmsNorm(
  rows: i32,
  dim: i32,
  x: usize,
  gamma: usize,
  epsilon: f32,
  out: usize,
): void {
  const d = <f64>dim;
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * dim) * 4;
    const inv = <f32>1 / sqrt<f32>(<f32>(squaresOf(dim, xr, 0) / d) + epsilon);
    normalize(dim, xr, 0, inv, gamma, 0, out + <usize>(r * dim) * 4);
  }
}

// ---------------------------------------------------------------------------------------------
// embeddings and the cache

/** `out[r, :] = table[ids[r], :]`; ids int32. */
export function gather(rows: i32, dim: i32, ids: usize, table: usize, out: usize): void {
  const bytes = <usize>dim * 4;
  for (let r = 0; r < rows; r++) {
    const id = <usize>load<i32>(ids + <usize>r * 4);
    memory.copy(out + <usize>r * bytes, table + id * bytes, bytes);
  }
}

/**
 * int8 weights that tfjs holds as float32: `dst[i] = src[i]` as int8 where every value is a whole
 * number in [-127, 127]; returns the index of the first other value (a fraction, NaN, an
 * infinity, -128 or beyond), or -1. dst may not overlap src.
 */
export function packInt8(n: i32, src: usize, dst: usize): i32 {
  const lo = i32x4.splat(-127);
  const hi = i32x4.splat(127);
  let i = 0;
  for (; i + 16 <= n; i += 16) {
    const at = src + <usize>i * 4;
    const a = v128.load(at);
    const b = v128.load(at, 16);
    const c = v128.load(at, 32);
    const d = v128.load(at, 48);
    const ia = i32x4.trunc_sat_f32x4_s(a);
    const ib = i32x4.trunc_sat_f32x4_s(b);
    const ic = i32x4.trunc_sat_f32x4_s(c);
    const id = i32x4.trunc_sat_f32x4_s(d);
    // whole: converting back gives the value (NaN never equals); then the range
    const whole = v128.and(
      v128.and(f32x4.eq(f32x4.convert_i32x4_s(ia), a), f32x4.eq(f32x4.convert_i32x4_s(ib), b)),
      v128.and(f32x4.eq(f32x4.convert_i32x4_s(ic), c), f32x4.eq(f32x4.convert_i32x4_s(id), d)),
    );
    const min = i32x4.min_s(i32x4.min_s(ia, ib), i32x4.min_s(ic, id));
    const max = i32x4.max_s(i32x4.max_s(ia, ib), i32x4.max_s(ic, id));
    const ok = v128.and(whole, v128.and(i32x4.ge_s(min, lo), i32x4.le_s(max, hi)));
    if (!i32x4.all_true(ok)) break; // the scalar loop below finds which value
    const ab = i16x8.narrow_i32x4_s(ia, ib);
    const cd = i16x8.narrow_i32x4_s(ic, id);
    v128.store(dst + <usize>i, i8x16.narrow_i16x8_s(ab, cd));
  }
  for (; i < n; i++) {
    const v = load<f32>(src + <usize>i * 4);
    if (!(v >= -127 && v <= 127)) return i; // NaN fails both
    const q = <i32>v;
    if (<f32>q != v) return i;
    store<i8>(dst + <usize>i, <i8>q);
  }
  return -1;
}

// set by int8Row when a value of its 16 is not a whole number in [-127, 127]
let int8RowBad = false;

// 16 float32 at `at`, whole numbers in [-127, 127], as 16 int8 (int8RowBad set when not)
function int8Row(at: usize): v128 {
  const a = v128.load(at);
  const b = v128.load(at, 16);
  const c = v128.load(at, 32);
  const d = v128.load(at, 48);
  const ia = i32x4.trunc_sat_f32x4_s(a);
  const ib = i32x4.trunc_sat_f32x4_s(b);
  const ic = i32x4.trunc_sat_f32x4_s(c);
  const id = i32x4.trunc_sat_f32x4_s(d);
  const whole = v128.and(
    v128.and(f32x4.eq(f32x4.convert_i32x4_s(ia), a), f32x4.eq(f32x4.convert_i32x4_s(ib), b)),
    v128.and(f32x4.eq(f32x4.convert_i32x4_s(ic), c), f32x4.eq(f32x4.convert_i32x4_s(id), d)),
  );
  const min = i32x4.min_s(i32x4.min_s(ia, ib), i32x4.min_s(ic, id));
  const max = i32x4.max_s(i32x4.max_s(ia, ib), i32x4.max_s(ic, id));
  const ok = v128.and(
    whole,
    v128.and(i32x4.ge_s(min, i32x4.splat(-127)), i32x4.le_s(max, i32x4.splat(127))),
  );
  if (!i32x4.all_true(ok)) int8RowBad = true;
  return i8x16.narrow_i16x8_s(i16x8.narrow_i32x4_s(ia, ib), i16x8.narrow_i32x4_s(ic, id));
}

// src[p * n + j] (float32) as int8 at dst[j * ldd + p]; the index in src of a value that is not a
// whole number in [-127, 127], or -1
function packInt8TScalar(
  ldd: i32,
  n: i32,
  p0: i32,
  p1: i32,
  j0: i32,
  j1: i32,
  src: usize,
  dst: usize,
): i32 {
  for (let p = p0; p < p1; p++) {
    for (let j = j0; j < j1; j++) {
      const v = load<f32>(src + <usize>(p * n + j) * 4);
      if (!(v >= -127 && v <= 127)) return p * n + j; // NaN fails both
      const q = <i32>v;
      if (<f32>q != v) return p * n + j;
      store<i8>(dst + <usize>j * <usize>ldd + <usize>p, <i8>q);
    }
  }
  return -1;
}

/**
 * An int8 Dense kernel that tfjs holds as float32 `[k, n]`, packed transposed for `denseInt8`:
 * `dst[j * ldd + p] = src[p * n + j]` as int8 (ldd = k for the whole kernel; a block of its rows
 * packs into its place with ldd the kernel's k), where every value is a whole number in [-127, 127];
 * returns the index in src of a value that is not (a fraction, NaN, an infinity, -128 or
 * beyond), or -1. 16 x 16 tiles: 16 rows checked and narrowed, transposed in registers by four
 * rounds of byte interleaving, stored as 16 rows of dst.
 */
export function packInt8T(k: i32, n: i32, src: usize, dst: usize, ldd: i32): i32 {
  const k16 = k & ~15;
  const n16 = n & ~15;
  for (let p0 = 0; p0 < k16; p0 += 16) {
    for (let j0 = 0; j0 < n16; j0 += 16) {
      int8RowBad = false;
      let x0 = int8Row(src + <usize>((p0 + 0) * n + j0) * 4);
      let x1 = int8Row(src + <usize>((p0 + 1) * n + j0) * 4);
      let x2 = int8Row(src + <usize>((p0 + 2) * n + j0) * 4);
      let x3 = int8Row(src + <usize>((p0 + 3) * n + j0) * 4);
      let x4 = int8Row(src + <usize>((p0 + 4) * n + j0) * 4);
      let x5 = int8Row(src + <usize>((p0 + 5) * n + j0) * 4);
      let x6 = int8Row(src + <usize>((p0 + 6) * n + j0) * 4);
      let x7 = int8Row(src + <usize>((p0 + 7) * n + j0) * 4);
      let x8 = int8Row(src + <usize>((p0 + 8) * n + j0) * 4);
      let x9 = int8Row(src + <usize>((p0 + 9) * n + j0) * 4);
      let x10 = int8Row(src + <usize>((p0 + 10) * n + j0) * 4);
      let x11 = int8Row(src + <usize>((p0 + 11) * n + j0) * 4);
      let x12 = int8Row(src + <usize>((p0 + 12) * n + j0) * 4);
      let x13 = int8Row(src + <usize>((p0 + 13) * n + j0) * 4);
      let x14 = int8Row(src + <usize>((p0 + 14) * n + j0) * 4);
      let x15 = int8Row(src + <usize>((p0 + 15) * n + j0) * 4);
      if (int8RowBad) return packInt8TScalar(ldd, n, p0, p0 + 16, j0, j0 + 16, src, dst);
      for (let round = 0; round < 4; round++) {
        const y0 = i8x16.shuffle(x0, x8, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const y1 = i8x16.shuffle(
          x0,
          x8,
          8,
          24,
          9,
          25,
          10,
          26,
          11,
          27,
          12,
          28,
          13,
          29,
          14,
          30,
          15,
          31,
        );
        const y2 = i8x16.shuffle(x1, x9, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const y3 = i8x16.shuffle(
          x1,
          x9,
          8,
          24,
          9,
          25,
          10,
          26,
          11,
          27,
          12,
          28,
          13,
          29,
          14,
          30,
          15,
          31,
        );
        const y4 = i8x16.shuffle(x2, x10, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const y5 = i8x16.shuffle(
          x2,
          x10,
          8,
          24,
          9,
          25,
          10,
          26,
          11,
          27,
          12,
          28,
          13,
          29,
          14,
          30,
          15,
          31,
        );
        const y6 = i8x16.shuffle(x3, x11, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const y7 = i8x16.shuffle(
          x3,
          x11,
          8,
          24,
          9,
          25,
          10,
          26,
          11,
          27,
          12,
          28,
          13,
          29,
          14,
          30,
          15,
          31,
        );
        const y8 = i8x16.shuffle(x4, x12, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const y9 = i8x16.shuffle(
          x4,
          x12,
          8,
          24,
          9,
          25,
          10,
          26,
          11,
          27,
          12,
          28,
          13,
          29,
          14,
          30,
          15,
          31,
        );
        const y10 = i8x16.shuffle(x5, x13, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const y11 = i8x16.shuffle(
          x5,
          x13,
          8,
          24,
          9,
          25,
          10,
          26,
          11,
          27,
          12,
          28,
          13,
          29,
          14,
          30,
          15,
          31,
        );
        const y12 = i8x16.shuffle(x6, x14, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const y13 = i8x16.shuffle(
          x6,
          x14,
          8,
          24,
          9,
          25,
          10,
          26,
          11,
          27,
          12,
          28,
          13,
          29,
          14,
          30,
          15,
          31,
        );
        const y14 = i8x16.shuffle(x7, x15, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        const y15 = i8x16.shuffle(
          x7,
          x15,
          8,
          24,
          9,
          25,
          10,
          26,
          11,
          27,
          12,
          28,
          13,
          29,
          14,
          30,
          15,
          31,
        );
        x0 = y0;
        x1 = y1;
        x2 = y2;
        x3 = y3;
        x4 = y4;
        x5 = y5;
        x6 = y6;
        x7 = y7;
        x8 = y8;
        x9 = y9;
        x10 = y10;
        x11 = y11;
        x12 = y12;
        x13 = y13;
        x14 = y14;
        x15 = y15;
      }
      v128.store(dst + <usize>(j0 + 0) * <usize>ldd + <usize>p0, x0);
      v128.store(dst + <usize>(j0 + 1) * <usize>ldd + <usize>p0, x1);
      v128.store(dst + <usize>(j0 + 2) * <usize>ldd + <usize>p0, x2);
      v128.store(dst + <usize>(j0 + 3) * <usize>ldd + <usize>p0, x3);
      v128.store(dst + <usize>(j0 + 4) * <usize>ldd + <usize>p0, x4);
      v128.store(dst + <usize>(j0 + 5) * <usize>ldd + <usize>p0, x5);
      v128.store(dst + <usize>(j0 + 6) * <usize>ldd + <usize>p0, x6);
      v128.store(dst + <usize>(j0 + 7) * <usize>ldd + <usize>p0, x7);
      v128.store(dst + <usize>(j0 + 8) * <usize>ldd + <usize>p0, x8);
      v128.store(dst + <usize>(j0 + 9) * <usize>ldd + <usize>p0, x9);
      v128.store(dst + <usize>(j0 + 10) * <usize>ldd + <usize>p0, x10);
      v128.store(dst + <usize>(j0 + 11) * <usize>ldd + <usize>p0, x11);
      v128.store(dst + <usize>(j0 + 12) * <usize>ldd + <usize>p0, x12);
      v128.store(dst + <usize>(j0 + 13) * <usize>ldd + <usize>p0, x13);
      v128.store(dst + <usize>(j0 + 14) * <usize>ldd + <usize>p0, x14);
      v128.store(dst + <usize>(j0 + 15) * <usize>ldd + <usize>p0, x15);
    }
  }
  let bad = packInt8TScalar(ldd, n, 0, k, n16, n, src, dst);
  if (bad < 0) bad = packInt8TScalar(ldd, n, k16, k, 0, n16, src, dst);
  return bad;
}

/** Keras 3's int8 Embedding: `out[r, :] = f32(table[ids[r], :]) / scale[ids[r]]`, table int8. */
export function gatherInt8(
  rows: i32,
  dim: i32,
  ids: usize,
  table: usize,
  scale: usize,
  out: usize,
): void {
  for (let r = 0; r < rows; r++) {
    const id = <usize>load<i32>(ids + <usize>r * 4);
    const src = table + id * <usize>dim;
    const dst = out + <usize>(r * dim) * 4;
    const s = load<f32>(scale + id * 4);
    const sv = f32x4.splat(s);
    let j = 0;
    for (; j + 16 <= dim; j += 16) {
      const b = v128.load(src + <usize>j);
      const l = i16x8.extend_low_i8x16_s(b);
      const h = i16x8.extend_high_i8x16_s(b);
      const o = dst + <usize>j * 4;
      v128.store(o, f32x4.div(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(l)), sv));
      v128.store(o, f32x4.div(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(l)), sv), 16);
      v128.store(o, f32x4.div(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h)), sv), 32);
      v128.store(o, f32x4.div(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h)), sv), 48);
    }
    for (; j < dim; j++) {
      store<f32>(dst + <usize>j * 4, <f32>load<i8>(src + <usize>j) / s);
    }
  }
}

/** In place: `out[b * t + i, :] += table[start + i, :]` for each batch row b. */
export function addPositions(B: i32, t: i32, dim: i32, start: i32, table: usize, out: usize): void {
  const bytes = <usize>dim * 4;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < t; i++) {
      const o = out + <usize>(b * t + i) * bytes;
      add(dim, o, table + <usize>(start + i) * bytes, o);
    }
  }
}

/** Copies `src [B * t, width]` into `cache [B, maxLength, width]` at positions start .. start + t - 1. */
export function writeCache(
  B: i32,
  t: i32,
  width: i32,
  maxLength: i32,
  start: i32,
  src: usize,
  cache: usize,
): void {
  const row = <usize>width * 4;
  for (let b = 0; b < B; b++) {
    memory.copy(
      cache + (<usize>b * <usize>maxLength + <usize>start) * row,
      src + <usize>(b * t) * row,
      <usize>t * row,
    );
  }
}

// ---------------------------------------------------------------------------------------------
// attention over the cache

/**
 * Causal attention of t new queries per batch row over the cache (see StepKernels.attend): per
 * query head the scores `scale * q · k` of positions 0 .. start + i (a masked key: -Infinity),
 * their softmax after subtracting the largest (a masked key's weight is exactly 0), and the
 * weighted sum of the values. `work`: maxLength floats.
 */
export function attend(
  B: i32,
  t: i32,
  heads: i32,
  kvHeads: i32,
  headDim: i32,
  maxLength: i32,
  start: i32,
  q: usize,
  kCache: usize,
  vCache: usize,
  keyMask: usize,
  scale: f32,
  work: usize,
  out: usize,
): void {
  const group = heads / kvHeads;
  const kvRow = <usize>(kvHeads * headDim) * 4;
  const qRow = <usize>(heads * headDim) * 4;
  const hBytes = <usize>headDim * 4;
  const hd4 = <usize>(headDim & ~3) * 4;
  for (let b = 0; b < B; b++) {
    const kb = kCache + <usize>b * <usize>maxLength * kvRow;
    const vb = vCache + <usize>b * <usize>maxLength * kvRow;
    const mb = keyMask + <usize>b * <usize>maxLength;
    for (let i = 0; i < t; i++) {
      const count = start + i + 1;
      const qr = q + <usize>(b * t + i) * qRow;
      const or = out + <usize>(b * t + i) * qRow;
      for (let h = 0; h < heads; h++) {
        const kvOff = <usize>(h / group) * hBytes;
        const qh = qr + <usize>h * hBytes;
        // scores
        let m: f32 = -Infinity;
        for (let pos = 0; pos < count; pos++) {
          let s: f32 = -Infinity;
          if (keyMask == 0 || load<u8>(mb + <usize>pos) != 0) {
            const kp = kb + <usize>pos * kvRow + kvOff;
            let a = f32x4.splat(0);
            let d: usize = 0;
            for (; d < hd4; d += 16)
              a = f32x4.add(a, f32x4.mul(v128.load(qh + d), v128.load(kp + d)));
            let dot = hsum(a);
            for (; d < hBytes; d += 4) dot += load<f32>(qh + d) * load<f32>(kp + d);
            s = scale * dot;
            m = max(m, s);
          }
          store<f32>(work + <usize>pos * 4, s);
        }
        // exp(s - max), masked keys exactly 0
        const mv = f32x4.splat(m);
        let sv = f32x4.splat(0);
        let pos = 0;
        for (; pos + 4 <= count; pos += 4) {
          const o = work + <usize>pos * 4;
          const e = expNeg4(f32x4.sub(v128.load(o), mv));
          v128.store(o, e);
          sv = f32x4.add(sv, e);
        }
        let sum = hsum(sv);
        for (; pos < count; pos++) {
          const o = work + <usize>pos * 4;
          const e = expNeg1(load<f32>(o) - m);
          store<f32>(o, e);
          sum += e;
        }
        // weights · values
        const oh = or + <usize>h * hBytes;
        memory.fill(oh, 0, hBytes);
        for (pos = 0; pos < count; pos++) {
          if (keyMask != 0 && load<u8>(mb + <usize>pos) == 0) continue;
          const wgt = load<f32>(work + <usize>pos * 4) / sum;
          const wv = f32x4.splat(wgt);
          const vp = vb + <usize>pos * kvRow + kvOff;
          let d: usize = 0;
          for (; d < hd4; d += 16) {
            v128.store(oh + d, f32x4.add(v128.load(oh + d), f32x4.mul(wv, v128.load(vp + d))));
          }
          for (; d < hBytes; d += 4)
            store<f32>(oh + d, load<f32>(oh + d) + wgt * load<f32>(vp + d));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

/** `out[r]` (int32) = the first index of the largest of `x[r, :]` (NaN never wins). */
export function argmax(rows: i32, cols: i32, x: usize, out: usize): void {
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * cols) * 4;
    // the largest value (f32x4.max would let NaN win: pmax keeps the first unless the second is
    // larger, so NaN lanes are skipped)
    let mv = f32x4.splat(-Infinity);
    let j = 0;
    for (; j + 4 <= cols; j += 4) mv = f32x4.pmax(mv, v128.load(xr + <usize>j * 4));
    let m = f32x4.extract_lane(mv, 0);
    if (f32x4.extract_lane(mv, 1) > m) m = f32x4.extract_lane(mv, 1);
    if (f32x4.extract_lane(mv, 2) > m) m = f32x4.extract_lane(mv, 2);
    if (f32x4.extract_lane(mv, 3) > m) m = f32x4.extract_lane(mv, 3);
    for (; j < cols; j++) {
      const v = load<f32>(xr + <usize>j * 4);
      if (v > m) m = v;
    }
    // its first index
    let at = 0;
    const target = f32x4.splat(m);
    j = 0;
    for (; j + 4 <= cols; j += 4) {
      if (v128.any_true(f32x4.eq(v128.load(xr + <usize>j * 4), target))) break;
    }
    for (; j < cols; j++) {
      if (load<f32>(xr + <usize>j * 4) == m) {
        at = j;
        break;
      }
    }
    store<i32>(out + <usize>r * 4, at);
  }
}
