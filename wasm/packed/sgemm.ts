// The layers' batched float32 product (src/kernels/matmul.ts): C = op(A) · op(B) with transposes,
// in cache blocks of packed A and B panels and 4 x 8 register tiles (wasm/packed/tile_4x8.ts).

import {packPanel, transpose4x4} from './panels';
import {MR, NR, tile4x8} from './tile_4x8';

// cache blocks: KC of the inner dimension, MC rows of A, NC columns of B
const KC: i32 = 256;
const MC: i32 = 64;
const NC: i32 = 512;

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
    if (!transB) {
      packPanel(kc, w, b + <usize>(p0 * n + j0 + jp) * 4, <usize>n * 4, panel);
      continue;
    }
    for (let p = 0; p < kc; p++) {
      const row = panel + <usize>(p * NR) * 4;
      for (let j = 0; j < NR; j++) {
        let v: f32 = 0;
        if (j < w) v = load<f32>(b + <usize>((j0 + jp + j) * k + p0 + p) * 4);
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
        transpose4x4(src, src + ld, src + 2 * ld, src + 3 * ld, panel + <usize>(p * MR) * 4);
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

// C[MR, NR] tile at c (row stride ldc floats) = (accumulate ? C : 0) + Apanel · Bpanel, by the
// shared 4 x 8 tile. A partial tile (h < MR or w < NR) goes through `tmp`.
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
  const full = h == MR && w == NR;
  const ld: usize = full ? <usize>ldc * 4 : <usize>NR * 4;
  tile4x8(kc, ap, bp, full ? c : tmp, ld, MR, !(full && accumulate));
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
