// int8 weights repacked: the 16 x 16 byte transpose in registers of ../int8/dense_kn's
// transposeInt8 (a kernel [k, n] packed as denseInt8's [n, k]).

// 16 rows of 16 bytes (x0: row 0) stored transposed: byte i of row r at dst[i * ldd + r]. Four
// rounds of byte interleaving transpose them in registers
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
