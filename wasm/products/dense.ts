import {finish} from '../ops/activations';
import {hsum} from '../simd/sums';

// Float32 products for few rows against large weights: one row (a decoding step) streams the
// weight once, sequentially, accumulating into the output row (which stays in L1); two or three
// rows stream it once per pair; more rows run a 4 x 8 register tile over blocks of KC inner
// indices, so each weight block is read from memory once and reused from cache by every row block.

/** Inner-dimension block of the tiled product: a [KC, 8] weight tile (8 KB) stays in L1. */
export const KC: i32 = 256;

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
