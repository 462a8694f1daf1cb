// int8 weights that tfjs holds as float32, packed once per call as int8 (as they are, or
// transposed for the int8 products), each value checked to be a whole number in [-127, 127].

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

// 16 rows of 16 bytes (x0: row 0) stored transposed: byte i of row r at dst[i * ldd + r]. Four
// rounds of byte interleaving transpose them in registers (shared by packInt8T and
// ../int8/dense_kn's transposeInt8)
export function storeTransposed16(
  x0: v128,
  x1: v128,
  x2: v128,
  x3: v128,
  x4: v128,
  x5: v128,
  x6: v128,
  x7: v128,
  x8: v128,
  x9: v128,
  x10: v128,
  x11: v128,
  x12: v128,
  x13: v128,
  x14: v128,
  x15: v128,
  dst: usize,
  ldd: i32,
): void {
  for (let round = 0; round < 4; round++) {
    const y0 = i8x16.shuffle(x0, x8, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const y1 = i8x16.shuffle(x0, x8, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const y2 = i8x16.shuffle(x1, x9, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const y3 = i8x16.shuffle(x1, x9, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const y4 = i8x16.shuffle(x2, x10, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const y5 = i8x16.shuffle(x2, x10, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const y6 = i8x16.shuffle(x3, x11, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const y7 = i8x16.shuffle(x3, x11, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const y8 = i8x16.shuffle(x4, x12, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const y9 = i8x16.shuffle(x4, x12, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
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
  v128.store(dst, x0);
  v128.store(dst + <usize>1 * <usize>ldd, x1);
  v128.store(dst + <usize>2 * <usize>ldd, x2);
  v128.store(dst + <usize>3 * <usize>ldd, x3);
  v128.store(dst + <usize>4 * <usize>ldd, x4);
  v128.store(dst + <usize>5 * <usize>ldd, x5);
  v128.store(dst + <usize>6 * <usize>ldd, x6);
  v128.store(dst + <usize>7 * <usize>ldd, x7);
  v128.store(dst + <usize>8 * <usize>ldd, x8);
  v128.store(dst + <usize>9 * <usize>ldd, x9);
  v128.store(dst + <usize>10 * <usize>ldd, x10);
  v128.store(dst + <usize>11 * <usize>ldd, x11);
  v128.store(dst + <usize>12 * <usize>ldd, x12);
  v128.store(dst + <usize>13 * <usize>ldd, x13);
  v128.store(dst + <usize>14 * <usize>ldd, x14);
  v128.store(dst + <usize>15 * <usize>ldd, x15);
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
      const x0 = int8Row(src + <usize>((p0 + 0) * n + j0) * 4);
      const x1 = int8Row(src + <usize>((p0 + 1) * n + j0) * 4);
      const x2 = int8Row(src + <usize>((p0 + 2) * n + j0) * 4);
      const x3 = int8Row(src + <usize>((p0 + 3) * n + j0) * 4);
      const x4 = int8Row(src + <usize>((p0 + 4) * n + j0) * 4);
      const x5 = int8Row(src + <usize>((p0 + 5) * n + j0) * 4);
      const x6 = int8Row(src + <usize>((p0 + 6) * n + j0) * 4);
      const x7 = int8Row(src + <usize>((p0 + 7) * n + j0) * 4);
      const x8 = int8Row(src + <usize>((p0 + 8) * n + j0) * 4);
      const x9 = int8Row(src + <usize>((p0 + 9) * n + j0) * 4);
      const x10 = int8Row(src + <usize>((p0 + 10) * n + j0) * 4);
      const x11 = int8Row(src + <usize>((p0 + 11) * n + j0) * 4);
      const x12 = int8Row(src + <usize>((p0 + 12) * n + j0) * 4);
      const x13 = int8Row(src + <usize>((p0 + 13) * n + j0) * 4);
      const x14 = int8Row(src + <usize>((p0 + 14) * n + j0) * 4);
      const x15 = int8Row(src + <usize>((p0 + 15) * n + j0) * 4);
      if (int8RowBad) return packInt8TScalar(ldd, n, p0, p0 + 16, j0, j0 + 16, src, dst);
      storeTransposed16(
        x0,
        x1,
        x2,
        x3,
        x4,
        x5,
        x6,
        x7,
        x8,
        x9,
        x10,
        x11,
        x12,
        x13,
        x14,
        x15,
        dst + <usize>j0 * <usize>ldd + <usize>p0,
        ldd,
      );
    }
  }
  let bad = packInt8TScalar(ldd, n, 0, k, n16, n, src, dst);
  if (bad < 0) bad = packInt8TScalar(ldd, n, k16, k, 0, n16, src, dst);
  return bad;
}
