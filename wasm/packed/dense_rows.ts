import {finish} from '../ops/activations';
import {dense, KC} from '../products/dense';
import {packPanel, transpose4x4} from './panels';
import {NR, tile4x8} from './tile_4x8';

// Float32 products of several rows (a prompt's prefill) on packed operands: the rows and each
// [KC, 8] weight panel packed into a scratch first, so the 4 x 8 tiles (wasm/packed/tile_4x8.ts,
// the layers' sgemm's too) read both contiguously.

/** Rows of x packed at a time (groups of 4 rows interleaved: [kc, 4] each). */
const MC: i32 = 128;

/** Bytes of the scratch `denseRows` needs: a packed [KC, NR] weight panel, MC packed rows of x. */
export function denseRowsWorkBytes(): i32 {
  return KC * NR * 4 + MC * KC * 4;
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
      transpose4x4(x0 + o, x1 + o, x2 + o, x3 + o, g + <usize>p * 16);
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
