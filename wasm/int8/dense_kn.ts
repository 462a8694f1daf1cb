import {finish} from '../ops/activations';
import {storeTransposed16} from '../repack/int8';
import {descale} from './dense';

// Keras 3's int8 Dense on the kernel in Keras' own layout, int8 `[k, n]` (row p: the n outputs'
// weights for input p), read where it is (tfjs-wasm's heap) with no transposed copy. The int32
// sums of all n outputs are kept in `out` and grown by passes over eight rows of the kernel;
// then the same descale and epilogue as ./dense's denseInt8, so the results equal its, bit for bit.

// Σ over eight rows of w (ldw bytes apart) of q * w, added to the n int32 sums at acc. c01 ..
// c67: the eight rows' q as four pairs of i16, each pair in every i32 lane (the first row's q in
// the low half). Eight columns of two rows, widened to i16 and interleaved (row a, row b per
// column), give four columns' two products summed by one i32x4.dot_i16x8_s; eight columns a step
// (sixteen, measured 15% slower: V8 spills their registers), the sums loaded and stored once per
// eight rows; the last n % 8 columns one at a time.
function pass8(
  n: i32,
  w0: usize,
  ldw: usize,
  c01: v128,
  c23: v128,
  c45: v128,
  c67: v128,
  acc: usize,
): void {
  const w1 = w0 + ldw;
  const w2 = w1 + ldw;
  const w3 = w2 + ldw;
  const w4 = w3 + ldw;
  const w5 = w4 + ldw;
  const w6 = w5 + ldw;
  const w7 = w6 + ldw;
  let j = 0;
  for (; j + 8 <= n; j += 8) {
    const o = acc + <usize>j * 4;
    const x = <usize>j;
    let s0 = v128.load(o);
    let s1 = v128.load(o, 16);
    let a = v128.load8x8_s(w0 + x);
    let b = v128.load8x8_s(w1 + x);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11), c01));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15), c01));
    a = v128.load8x8_s(w2 + x);
    b = v128.load8x8_s(w3 + x);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11), c23));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15), c23));
    a = v128.load8x8_s(w4 + x);
    b = v128.load8x8_s(w5 + x);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11), c45));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15), c45));
    a = v128.load8x8_s(w6 + x);
    b = v128.load8x8_s(w7 + x);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11), c67));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15), c67));
    v128.store(o, s0);
    v128.store(o, s1, 16);
  }
  if (j < n) {
    const q0 = <i32>i16x8.extract_lane_s(c01, 0);
    const q1 = <i32>i16x8.extract_lane_s(c01, 1);
    const q2 = <i32>i16x8.extract_lane_s(c23, 0);
    const q3 = <i32>i16x8.extract_lane_s(c23, 1);
    const q4 = <i32>i16x8.extract_lane_s(c45, 0);
    const q5 = <i32>i16x8.extract_lane_s(c45, 1);
    const q6 = <i32>i16x8.extract_lane_s(c67, 0);
    const q7 = <i32>i16x8.extract_lane_s(c67, 1);
    for (; j < n; j++) {
      const x = <usize>j;
      const o = acc + x * 4;
      store<i32>(
        o,
        load<i32>(o) +
          q0 * <i32>load<i8>(w0 + x) +
          q1 * <i32>load<i8>(w1 + x) +
          q2 * <i32>load<i8>(w2 + x) +
          q3 * <i32>load<i8>(w3 + x) +
          q4 * <i32>load<i8>(w4 + x) +
          q5 * <i32>load<i8>(w5 + x) +
          q6 * <i32>load<i8>(w6 + x) +
          q7 * <i32>load<i8>(w7 + x),
      );
    }
  }
}

// pass8 for two rows of q at once, over n8 columns (a multiple of 8): a01 .. a67 and b01 .. b67
// the two rows' pairs, their sums at acc0 and acc1; each interleaved pair of weight rows serves
// both (measured 25% faster than two pass8 at 32 rows)
function pass8x2(
  n8: i32,
  w0: usize,
  ldw: usize,
  a01: v128,
  a23: v128,
  a45: v128,
  a67: v128,
  b01: v128,
  b23: v128,
  b45: v128,
  b67: v128,
  acc0: usize,
  acc1: usize,
): void {
  const w1 = w0 + ldw;
  const w2 = w1 + ldw;
  const w3 = w2 + ldw;
  const w4 = w3 + ldw;
  const w5 = w4 + ldw;
  const w6 = w5 + ldw;
  const w7 = w6 + ldw;
  for (let j = 0; j < n8; j += 8) {
    const x = <usize>j;
    const o0 = acc0 + x * 4;
    const o1 = acc1 + x * 4;
    let s0 = v128.load(o0);
    let s1 = v128.load(o0, 16);
    let t0 = v128.load(o1);
    let t1 = v128.load(o1, 16);
    let a: v128, b: v128, lo: v128, hi: v128;
    a = v128.load8x8_s(w0 + x);
    b = v128.load8x8_s(w1 + x);
    lo = i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    hi = i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(lo, a01));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(hi, a01));
    t0 = i32x4.add(t0, i32x4.dot_i16x8_s(lo, b01));
    t1 = i32x4.add(t1, i32x4.dot_i16x8_s(hi, b01));
    a = v128.load8x8_s(w2 + x);
    b = v128.load8x8_s(w3 + x);
    lo = i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    hi = i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(lo, a23));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(hi, a23));
    t0 = i32x4.add(t0, i32x4.dot_i16x8_s(lo, b23));
    t1 = i32x4.add(t1, i32x4.dot_i16x8_s(hi, b23));
    a = v128.load8x8_s(w4 + x);
    b = v128.load8x8_s(w5 + x);
    lo = i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    hi = i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(lo, a45));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(hi, a45));
    t0 = i32x4.add(t0, i32x4.dot_i16x8_s(lo, b45));
    t1 = i32x4.add(t1, i32x4.dot_i16x8_s(hi, b45));
    a = v128.load8x8_s(w6 + x);
    b = v128.load8x8_s(w7 + x);
    lo = i16x8.shuffle(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    hi = i16x8.shuffle(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
    s0 = i32x4.add(s0, i32x4.dot_i16x8_s(lo, a67));
    s1 = i32x4.add(s1, i32x4.dot_i16x8_s(hi, a67));
    t0 = i32x4.add(t0, i32x4.dot_i16x8_s(lo, b67));
    t1 = i32x4.add(t1, i32x4.dot_i16x8_s(hi, b67));
    v128.store(o0, s0);
    v128.store(o0, s1, 16);
    v128.store(o1, t0);
    v128.store(o1, t1, 16);
  }
}

// the rows of a pass lie at least this many bytes apart (measured: 4096 to 16384, 16384 best)
const SPREAD = 16384;

// the pair (q[p], q[p + m]) of int8 at qr as two i16 in an i32
function qPair(qr: usize, p: i32, m: i32): i32 {
  return ((<i32>load<i8>(qr + <usize>p)) & 0xffff) | ((<i32>load<i8>(qr + <usize>(p + m))) << 16);
}

// the int32 sums `out[r, j] = Σ_p q[r, p] w[p, j]` (as i32 in out), w int8 [k, n]. A pass takes
// eight rows m apart (rows p, p + m, .. p + 7m, at least SPREAD bytes apart), and the next pass
// the next row of each (p + 1, ..): eight streams through w, each sequential and in pages of its
// own, as the hardware prefetchers follow them (eight adjacent rows of a narrow kernel share
// pages, and read 40% slower: 4.6 against 7.5 GB/s at k 3072, n 768). Each pass runs against
// every row of q in turn, two at a time (its 8 n bytes stay in cache across the rows). The last
// k % 8 rows one a pass (row p eight times, seven of them with a weight of 0 in q's place).
function sumsKN(rows: i32, k: i32, n: i32, q: usize, w: usize, out: usize): void {
  memory.fill(out, 0, <usize>rows * <usize>n * 4);
  const ldw = <usize>n;
  const ldo = <usize>n * 4;
  const n8 = n & ~7;
  const spread = n >= SPREAD ? 1 : (SPREAD + n - 1) / n;
  let p0 = 0;
  while (p0 + 8 <= k) {
    // eight blocks of m rows, the pass at row i of each
    const m = min(spread, (k - p0) >> 3);
    const ld = <usize>m * ldw;
    for (let i = 0; i < m; i++) {
      const p = p0 + i;
      const wp = w + <usize>p * ldw;
      let r = 0;
      for (; r + 2 <= rows; r += 2) {
        const qa = q + <usize>(r * k);
        const qb = qa + <usize>k;
        const a01 = i32x4.splat(qPair(qa, p, m));
        const a23 = i32x4.splat(qPair(qa, p + 2 * m, m));
        const a45 = i32x4.splat(qPair(qa, p + 4 * m, m));
        const a67 = i32x4.splat(qPair(qa, p + 6 * m, m));
        const b01 = i32x4.splat(qPair(qb, p, m));
        const b23 = i32x4.splat(qPair(qb, p + 2 * m, m));
        const b45 = i32x4.splat(qPair(qb, p + 4 * m, m));
        const b67 = i32x4.splat(qPair(qb, p + 6 * m, m));
        const oa = out + <usize>r * ldo;
        const ob = oa + ldo;
        pass8x2(n8, wp, ld, a01, a23, a45, a67, b01, b23, b45, b67, oa, ob);
        if (n8 < n) {
          const t = <usize>n8;
          pass8(n - n8, wp + t, ld, a01, a23, a45, a67, oa + t * 4);
          pass8(n - n8, wp + t, ld, b01, b23, b45, b67, ob + t * 4);
        }
      }
      if (r < rows) {
        const qr = q + <usize>(r * k);
        pass8(
          n,
          wp,
          ld,
          i32x4.splat(qPair(qr, p, m)),
          i32x4.splat(qPair(qr, p + 2 * m, m)),
          i32x4.splat(qPair(qr, p + 4 * m, m)),
          i32x4.splat(qPair(qr, p + 6 * m, m)),
          out + <usize>r * ldo,
        );
      }
    }
    p0 += 8 * m;
  }
  const zero = i32x4.splat(0);
  for (let p = p0; p < k; p++) {
    const wp = w + <usize>p * ldw;
    for (let r = 0; r < rows; r++) {
      const c = i32x4.splat((<i32>load<i8>(q + <usize>(r * k + p))) & 0xffff);
      pass8(n, wp, 0, c, zero, zero, zero, out + <usize>r * ldo);
    }
  }
}

/**
 * Keras 3's int8 Dense with the kernel in Keras' layout: `out[r, j] = act(f32(Σ_p q[r, p] w[p, j])
 * / (qs[r] * ws[j]) + bias[j])`, w int8 `[k, n]` row-major, the sums exact in int32; then the
 * float32 steps of denseInt8 (its descale, the shared epilogue), so the results equal denseInt8's
 * on the transposed kernel bit for bit.
 */
export function denseInt8KN(
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
  sumsKN(rows, k, n, q, w, out);
  const ldo = <usize>n * 4;
  for (let r = 0; r < rows; r++) descale(n, load<f32>(qs + <usize>r * 4), ws, out + <usize>r * ldo);
  finish(rows, n, bias, act, out);
}

/**
 * int8 bytes transposed: `dst[j * ldd + p] = src[p * n + j]` for p < k, j < n (a kernel `[k, n]`
 * as denseInt8's `[n, k]`; ldd = k for a whole kernel, larger to pack k rows into their place).
 * 16 x 16 tiles transposed in registers (../repack/int8's storeTransposed16), the edges a byte at
 * a time.
 */
export function transposeInt8(k: i32, n: i32, src: usize, dst: usize, ldd: i32): void {
  const k16 = k & ~15;
  const n16 = n & ~15;
  const ls = <usize>n;
  for (let p0 = 0; p0 < k16; p0 += 16) {
    const s = src + <usize>p0 * ls;
    for (let j0 = 0; j0 < n16; j0 += 16) {
      const at = s + <usize>j0;
      storeTransposed16(
        v128.load(at),
        v128.load(at + ls),
        v128.load(at + 2 * ls),
        v128.load(at + 3 * ls),
        v128.load(at + 4 * ls),
        v128.load(at + 5 * ls),
        v128.load(at + 6 * ls),
        v128.load(at + 7 * ls),
        v128.load(at + 8 * ls),
        v128.load(at + 9 * ls),
        v128.load(at + 10 * ls),
        v128.load(at + 11 * ls),
        v128.load(at + 12 * ls),
        v128.load(at + 13 * ls),
        v128.load(at + 14 * ls),
        v128.load(at + 15 * ls),
        dst + <usize>j0 * <usize>ldd + <usize>p0,
        ldd,
      );
    }
  }
  transposeBytes(0, k, n16, n, n, src, dst, ldd);
  transposeBytes(k16, k, 0, n16, n, src, dst, ldd);
}

// dst[j * ldd + p] = src[p * n + j] for p0 <= p < p1, j0 <= j < j1, a byte at a time
function transposeBytes(
  p0: i32,
  p1: i32,
  j0: i32,
  j1: i32,
  n: i32,
  src: usize,
  dst: usize,
  ldd: i32,
): void {
  for (let p = p0; p < p1; p++) {
    for (let j = j0; j < j1; j++) {
      store<i8>(
        dst + <usize>j * <usize>ldd + <usize>p,
        load<i8>(src + <usize>p * <usize>n + <usize>j),
      );
    }
  }
}
