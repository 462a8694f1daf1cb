// The 4 x 8 register tile of the packed float32 products, one source for both modules: the
// layers' sgemm (wasm/packed/sgemm.ts) and the decoding step's prefill (wasm/packed/dense_rows.ts).
// Eight f32x4 accumulators, sums in the order of a plain loop over the inner index.

/** Rows of a tile (a packed group of rows). */
export const MR: i32 = 4;
/** Columns of a tile (a packed weight panel: two f32x4). */
export const NR: i32 = 8;

// stores (first) or adds a tile row of NR values at c
function put(c: usize, v0: v128, v1: v128, first: bool): void {
  if (!first) {
    v0 = f32x4.add(v0, v128.load(c));
    v1 = f32x4.add(v1, v128.load(c, 16));
  }
  v128.store(c, v0);
  v128.store(c, v1, 16);
}

/**
 * A packed group of MR rows `a` ([kc, MR]: a[p * MR + i] = x[i, p]) times a packed panel
 * ([kc, NR]) into out rows (stride ldo bytes): the first `valid` rows stored (first) or added.
 */
export function tile4x8(
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
