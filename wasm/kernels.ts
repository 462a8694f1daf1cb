// WebAssembly SIMD kernels of tfjs-attention, in AssemblyScript (compiled by
// scripts/build_wasm.mjs into src/kernels/wasm_binary.ts). The memory is imported and the module
// has no data of its own: no allocator, the caller places every array (in a memory of the
// package's own from heapBase() on, or in tfjs-wasm's heap where its tensors are) and passes
// byte offsets.

import {expNeg1, expNeg4} from './exp_neg';

// sgemm micro-tile: MR rows x NR columns (4 x 8: eight f32x4 accumulators).
const MR: i32 = 4;
const NR: i32 = 8;
// cache blocks: KC of the inner dimension, MC rows of A, NC columns of B
const KC: i32 = 256;
const MC: i32 = 64;
const NC: i32 = 512;

/** First free byte after the module's static data, 16-aligned. */
export function heapBase(): usize {
  return (__heap_base + 15) & ~(<usize>15);
}

/** Scratch bytes sgemm needs at `work` (packed B block, packed A block, one edge tile). */
export function sgemmWorkBytes(): i32 {
  return (KC * NC + MC * KC + MR * NR) * 4;
}

// Packs B[p0:p0+kc, j0:j0+nc] into panels of NR columns: for each panel, kc rows of NR floats
// (zero past column nc).
function packB(
  b: usize,
  transB: bool,
  k: i32,
  n: i32,
  p0: i32,
  j0: i32,
  kc: i32,
  nc: i32,
  dst: usize,
): void {
  for (let jp = 0; jp < nc; jp += NR) {
    const w = min(NR, nc - jp);
    const panel = dst + <usize>(jp * kc) * 4;
    for (let p = 0; p < kc; p++) {
      const row = panel + <usize>(p * NR) * 4;
      if (!transB && w == NR) {
        const src = b + <usize>((p0 + p) * n + j0 + jp) * 4;
        v128.store(row, v128.load(src));
        v128.store(row, v128.load(src, 16), 16);
        continue;
      }
      for (let j = 0; j < NR; j++) {
        let v: f32 = 0;
        if (j < w) {
          const col = j0 + jp + j;
          v = transB
            ? load<f32>(b + <usize>(col * k + p0 + p) * 4)
            : load<f32>(b + <usize>((p0 + p) * n + col) * 4);
        }
        store<f32>(row + <usize>j * 4, v);
      }
    }
  }
}

// Packs A[i0:i0+mc, p0:p0+kc] into panels of MR rows: for each panel, kc columns of MR floats
// (zero past row mc).
function packA(
  a: usize,
  transA: bool,
  m: i32,
  k: i32,
  i0: i32,
  p0: i32,
  mc: i32,
  kc: i32,
  dst: usize,
): void {
  for (let ip = 0; ip < mc; ip += MR) {
    const h = min(MR, mc - ip);
    const panel = dst + <usize>(ip * kc) * 4;
    if (transA && h == MR) {
      for (let p = 0; p < kc; p++) {
        v128.store(panel + <usize>(p * MR) * 4, v128.load(a + <usize>((p0 + p) * m + i0 + ip) * 4));
      }
      continue;
    }
    let p = 0;
    if (!transA && h == MR) {
      // 4 rows x 4 columns at a time, transposed in registers
      const r0 = a + <usize>((i0 + ip) * k + p0) * 4;
      const ld = <usize>k * 4;
      for (; p + 4 <= kc; p += 4) {
        const src = r0 + <usize>p * 4;
        const x0 = v128.load(src);
        const x1 = v128.load(src + ld);
        const x2 = v128.load(src + 2 * ld);
        const x3 = v128.load(src + 3 * ld);
        const t0 = i32x4.shuffle(x0, x1, 0, 4, 1, 5);
        const t1 = i32x4.shuffle(x2, x3, 0, 4, 1, 5);
        const t2 = i32x4.shuffle(x0, x1, 2, 6, 3, 7);
        const t3 = i32x4.shuffle(x2, x3, 2, 6, 3, 7);
        const out = panel + <usize>(p * MR) * 4;
        v128.store(out, i64x2.shuffle(t0, t1, 0, 2));
        v128.store(out, i64x2.shuffle(t0, t1, 1, 3), 16);
        v128.store(out, i64x2.shuffle(t2, t3, 0, 2), 32);
        v128.store(out, i64x2.shuffle(t2, t3, 1, 3), 48);
      }
    }
    const pFrom = p;
    for (let i = 0; i < MR; i++) {
      const row = i0 + ip + i;
      for (let p = pFrom; p < kc; p++) {
        let v: f32 = 0;
        if (i < h) {
          v = transA
            ? load<f32>(a + <usize>((p0 + p) * m + row) * 4)
            : load<f32>(a + <usize>(row * k + p0 + p) * 4);
        }
        store<f32>(panel + <usize>(p * MR + i) * 4, v);
      }
    }
  }
}

// C[MR, NR] tile at c (row stride ldc floats) = (accumulate ? C : 0) + Apanel · Bpanel.
// A partial tile (h < MR or w < NR) goes through `tmp`. (Called once: binaryen inlines it.)
function micro(
  ap: usize,
  bp: usize,
  kc: i32,
  c: usize,
  ldc: i32,
  accumulate: bool,
  h: i32,
  w: i32,
  tmp: usize,
): void {
  let c00 = f32x4.splat(0),
    c01 = f32x4.splat(0);
  let c10 = f32x4.splat(0),
    c11 = f32x4.splat(0);
  let c20 = f32x4.splat(0),
    c21 = f32x4.splat(0);
  let c30 = f32x4.splat(0),
    c31 = f32x4.splat(0);
  for (let p = 0; p < kc; p++) {
    const b0 = v128.load(bp);
    const b1 = v128.load(bp, 16);
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
    ap += 16;
    bp += 32;
  }
  const full = h == MR && w == NR;
  const out = full ? c : tmp;
  const ld: usize = full ? <usize>ldc * 4 : <usize>NR * 4;
  if (full && accumulate) {
    c00 = f32x4.add(c00, v128.load(out));
    c01 = f32x4.add(c01, v128.load(out, 16));
    c10 = f32x4.add(c10, v128.load(out + ld));
    c11 = f32x4.add(c11, v128.load(out + ld, 16));
    c20 = f32x4.add(c20, v128.load(out + 2 * ld));
    c21 = f32x4.add(c21, v128.load(out + 2 * ld, 16));
    c30 = f32x4.add(c30, v128.load(out + 3 * ld));
    c31 = f32x4.add(c31, v128.load(out + 3 * ld, 16));
  }
  v128.store(out, c00);
  v128.store(out, c01, 16);
  v128.store(out + ld, c10);
  v128.store(out + ld, c11, 16);
  v128.store(out + 2 * ld, c20);
  v128.store(out + 2 * ld, c21, 16);
  v128.store(out + 3 * ld, c30);
  v128.store(out + 3 * ld, c31, 16);
  if (!full) {
    for (let i = 0; i < h; i++) {
      for (let j = 0; j < w; j++) {
        const dst = c + <usize>(i * ldc + j) * 4;
        const v = load<f32>(tmp + <usize>(i * NR + j) * 4);
        store<f32>(dst, accumulate ? load<f32>(dst) + v : v);
      }
    }
  }
}

/**
 * C = op(A) · op(B) for `batch` contiguous slices: A is [m, k] ([k, m] when transA), B is
 * [k, n] ([n, k] when transB), C is [m, n], all row-major f32 at byte offsets a, b, c.
 * `work` holds sgemmWorkBytes() bytes of scratch.
 */
export function sgemm(
  batch: i32,
  m: i32,
  n: i32,
  k: i32,
  a: usize,
  transA: bool,
  b: usize,
  transB: bool,
  c: usize,
  work: usize,
): void {
  const packedB = work;
  const packedA = work + <usize>(KC * NC) * 4;
  const tmp = packedA + <usize>(MC * KC) * 4;
  for (let s = 0; s < batch; s++) {
    const as = a + <usize>(s * m * k) * 4;
    const bs = b + <usize>(s * k * n) * 4;
    const cs = c + <usize>(s * m * n) * 4;
    if (k == 0) {
      memory.fill(cs, 0, <usize>(m * n) * 4);
      continue;
    }
    for (let j0 = 0; j0 < n; j0 += NC) {
      const nc = min(NC, n - j0);
      for (let p0 = 0; p0 < k; p0 += KC) {
        const kc = min(KC, k - p0);
        packB(bs, transB, k, n, p0, j0, kc, nc, packedB);
        for (let i0 = 0; i0 < m; i0 += MC) {
          const mc = min(MC, m - i0);
          packA(as, transA, m, k, i0, p0, mc, kc, packedA);
          for (let jr = 0; jr < nc; jr += NR) {
            const w = min(NR, nc - jr);
            const bp = packedB + <usize>(jr * kc) * 4;
            for (let ir = 0; ir < mc; ir += MR) {
              const h = min(MR, mc - ir);
              const ct = cs + <usize>((i0 + ir) * n + j0 + jr) * 4;
              micro(packedA + <usize>(ir * kc) * 4, bp, kc, ct, n, p0 > 0, h, w, tmp);
            }
          }
        }
      }
    }
  }
}

/**
 * Masked softmax over rows of `cols`: where the fill is 0 the logit is kept, elsewhere replaced
 * by the fill; then softmax. Row r's fill starts at float offset fillRows[r] (i32s at
 * `fillRows`) of `fill`: `cols` values when perElement, else one for the whole row.
 */
export function maskedSoftmax(
  rows: i32,
  cols: i32,
  x: usize,
  fill: usize,
  fillRows: usize,
  perElement: bool,
  out: usize,
): void {
  const zero = f32x4.splat(0);
  const vecEnd = cols & ~3;
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * cols) * 4;
    const yr = out + <usize>(r * cols) * 4;
    const fr = fill + <usize>load<i32>(fillRows + <usize>r * 4) * 4;
    let maxv = f32x4.splat(-Infinity);
    let maxs: f32 = -Infinity;
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      const f = perElement ? v128.load(fr + o) : v128.load32_splat(fr);
      const v = v128.bitselect(v128.load(xr + o), f, f32x4.eq(f, zero));
      v128.store(yr + o, v);
      maxv = f32x4.max(maxv, v);
    }
    for (let j = vecEnd; j < cols; j++) {
      const f = load<f32>(fr + (perElement ? <usize>j * 4 : 0));
      const v = f == 0 ? load<f32>(xr + <usize>j * 4) : f;
      store<f32>(yr + <usize>j * 4, v);
      maxs = max(maxs, v);
    }
    const m = max(
      max(
        max(f32x4.extract_lane(maxv, 0), f32x4.extract_lane(maxv, 1)),
        max(f32x4.extract_lane(maxv, 2), f32x4.extract_lane(maxv, 3)),
      ),
      maxs,
    );
    const mv = f32x4.splat(m);
    let sumv = f32x4.splat(0);
    let sums: f32 = 0;
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      const e = expNeg4(f32x4.sub(v128.load(yr + o), mv));
      v128.store(yr + o, e);
      sumv = f32x4.add(sumv, e);
    }
    for (let j = vecEnd; j < cols; j++) {
      const e = expNeg1(load<f32>(yr + <usize>j * 4) - m);
      store<f32>(yr + <usize>j * 4, e);
      sums += e;
    }
    const sum =
      f32x4.extract_lane(sumv, 0) +
      f32x4.extract_lane(sumv, 1) +
      f32x4.extract_lane(sumv, 2) +
      f32x4.extract_lane(sumv, 3) +
      sums;
    const inv: f32 = 1 / sum;
    const iv = f32x4.splat(inv);
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      v128.store(yr + o, f32x4.mul(v128.load(yr + o), iv));
    }
    for (let j = vecEnd; j < cols; j++)
      store<f32>(yr + <usize>j * 4, load<f32>(yr + <usize>j * 4) * inv);
  }
}

/**
 * The gradient of {@link maskedSoftmax}: out = y * (dy - Σ dy·y) where the fill is 0, else 0
 * (a replaced logit does not reach the output).
 */
export function maskedSoftmaxGrad(
  rows: i32,
  cols: i32,
  dy: usize,
  y: usize,
  fill: usize,
  fillRows: usize,
  perElement: bool,
  out: usize,
): void {
  const zero = f32x4.splat(0);
  const vecEnd = cols & ~3;
  for (let r = 0; r < rows; r++) {
    const base = <usize>(r * cols) * 4;
    const gr = dy + base;
    const pr = y + base;
    const or = out + base;
    const fr = fill + <usize>load<i32>(fillRows + <usize>r * 4) * 4;
    let dotv = f32x4.splat(0);
    let dots: f32 = 0;
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      dotv = f32x4.add(dotv, f32x4.mul(v128.load(gr + o), v128.load(pr + o)));
    }
    for (let j = vecEnd; j < cols; j++)
      dots += load<f32>(gr + <usize>j * 4) * load<f32>(pr + <usize>j * 4);
    const dot =
      f32x4.extract_lane(dotv, 0) +
      f32x4.extract_lane(dotv, 1) +
      f32x4.extract_lane(dotv, 2) +
      f32x4.extract_lane(dotv, 3) +
      dots;
    const dv = f32x4.splat(dot);
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      const f = perElement ? v128.load(fr + o) : v128.load32_splat(fr);
      const v = f32x4.mul(v128.load(pr + o), f32x4.sub(v128.load(gr + o), dv));
      v128.store(or + o, v128.and(v, f32x4.eq(f, zero)));
    }
    for (let j = vecEnd; j < cols; j++) {
      const f = load<f32>(fr + (perElement ? <usize>j * 4 : 0));
      store<f32>(
        or + <usize>j * 4,
        f == 0 ? load<f32>(pr + <usize>j * 4) * (load<f32>(gr + <usize>j * 4) - dot) : 0,
      );
    }
  }
}
