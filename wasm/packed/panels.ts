// Packing for the 4 x 8 tile (wasm/packed/tile_4x8.ts), one source for both modules: weight
// panels of NR contiguous columns, and 4 x 4 blocks of rows transposed in registers into a packed
// group of 4 rows.

import {NR} from './tile_4x8';

/**
 * w[0 .. kc, 0 .. cols] (row stride ld bytes) into panel [kc, NR], contiguous; columns past
 * `cols` (a last panel narrower than NR) are zeros.
 */
export function packPanel(kc: i32, cols: i32, w: usize, ld: usize, panel: usize): void {
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

/**
 * Four values of four rows (at x0 .. x3) transposed into `to` (16 floats: to[p * 4 + i] =
 * row i's value p), the packed group's layout.
 */
export function transpose4x4(x0: usize, x1: usize, x2: usize, x3: usize, to: usize): void {
  const v0 = v128.load(x0);
  const v1 = v128.load(x1);
  const v2 = v128.load(x2);
  const v3 = v128.load(x3);
  const t0 = i32x4.shuffle(v0, v1, 0, 4, 1, 5);
  const t1 = i32x4.shuffle(v2, v3, 0, 4, 1, 5);
  const t2 = i32x4.shuffle(v0, v1, 2, 6, 3, 7);
  const t3 = i32x4.shuffle(v2, v3, 2, 6, 3, 7);
  v128.store(to, i32x4.shuffle(t0, t1, 0, 1, 4, 5));
  v128.store(to, i32x4.shuffle(t0, t1, 2, 3, 6, 7), 16);
  v128.store(to, i32x4.shuffle(t2, t3, 0, 1, 4, 5), 32);
  v128.store(to, i32x4.shuffle(t2, t3, 2, 3, 6, 7), 48);
}
