import {finish} from '../ops/activations';
import {hsumI} from '../simd/sums';
import {dotInt8Relaxed, dotInt8RowRelaxed, dotInt8x4Relaxed} from './dots_relaxed';

// Keras 3's int8 quantization: rows quantized per row (abs max), and the products of int8 rows
// with int8 weights packed transposed (exact int32 sums, `i32x4.dot_i16x8_s`), descaled to float32.
// Built with relaxed SIMD (ASC_FEATURE_RELAXED_SIMD: wasm/step_int8_relaxed.ts), the same products
// take their sums from ./dots_relaxed (one relaxed dot per 16 weights), equal to these exactly.

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

// out (i32 sums in place) = f32(sum) / (qs * ws[j]) for one row of n (shared with ./dense_kn)
export function descale(n: i32, s: f32, ws: usize, out: usize): void {
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
 * the sums exact in int32. The kernel `[k, n]` is packed transposed (`transposeInt8`): w int8
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
    const wj = w + <usize>j * <usize>k;
    store<i32>(
      out + <usize>j * 4,
      ASC_FEATURE_RELAXED_SIMD ? dotInt8RowRelaxed(k, q, wj) : dotInt8Row(k, q, wj),
    );
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
      const qr = q + <usize>(r * k);
      const o = out + <usize>r * ldo + <usize>j * 4;
      if (ASC_FEATURE_RELAXED_SIMD) dotInt8x4Relaxed(k, qr, wj, o);
      else dotInt8x4(k, qr, wj, o);
    }
  }
  for (let j = n4; j < n; j++) {
    for (let r = 0; r < rows; r++) {
      const qr = q + <usize>(r * k);
      const wj = w + <usize>j * <usize>k;
      store<i32>(
        out + <usize>r * ldo + <usize>j * 4,
        ASC_FEATURE_RELAXED_SIMD ? dotInt8Relaxed(k, qr, wj) : dotInt8(k, qr, wj),
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
