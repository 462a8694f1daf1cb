import {finish} from '../ops/activations';
import {dense, KC} from '../products/dense';

// Float32 products of several rows (a prompt's prefill) on packed operands: the rows and each
// [KC, 8] weight panel packed into a scratch first, so the 4 x 8 tiles read both contiguously.

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
