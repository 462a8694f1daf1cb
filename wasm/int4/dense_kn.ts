import {finish} from '../ops/activations';

// Keras 3's int4 Dense (and EinsumDense) on its packed kernel, read where it is: bytes
// `[k, ceil(n / 2)]`, row p holding the n int4 weights of input p two to a byte, column j in the
// low nibble of byte j >> 1 when j is even, in the high nibble when odd (two's complement, values
// in [-8, 7]; an odd n's last high nibble is padding). The layer is weight-only: x stays float32
// and the products are float32, as Keras' (it dequantizes the kernel and multiplies).
//
// Unpacking: a byte XOR 0x88 holds u = q + 8 in [0, 15] in each nibble (the top bit of a
// two's-complement nibble flipped), so a nibble is an AND (low) or a shift (high) away from an
// unsigned integer that converts to float32 as it is. The sums are taken on u and the 8 folded
// with the zero point, once per pass:
// - grouped (block size bs along the input axis; scale float32 and zero int8 `[G, n]`, group of
//   row p: floor(p / bs)): Keras' `w = (q - zero) * scale`, so for group g
//   `Σ_p x[p] w[p, j] = scale[g, j] * (Σ_p x[p] u[p, j] - (zero[g, j] + 8) * Σ_p x[p])`;
// - per channel (scale float32 `[n]`, no zero): Keras' `f32(Σ_p x[p] q[p, j]) / scale[j]`, the sum
//   as `Σ_p x[p] u[p, j] - 8 * Σ_p x[p]`, divided once all of k is summed.
// Scaling once per group instead of once per weight (Keras' order) is one multiply-add per weight
// instead of two multiplies, a subtraction and an add: 1.6x to 1.9x faster at one row on the
// shapes of bench/int4_kernels.mjs, each at most 8e-7 of its largest output away from a float64
// sum of Keras' dequantized products (Keras' order: 7e-7).
//
// Passes of at most PASS rows of one group: for each strip of 16 bytes (32 columns) the pass's
// rows are summed into eight f32x4 in registers (the even columns from the low nibbles, the odd
// from the high), then folded into out (interleaved back to column order, scaled) once; the
// pass's 64-byte lines serve four strips in a row, from L1 (or L2, when a kernel's rows are a
// multiple of 4 KB wide and fall in one L1 set). The last n % 32 columns one at a time.

// rows of one pass: 32 (8 and 16 measured slower, a fold every 8 or 16 rows; 64 no faster; 128
// three times slower at n 8192, its lines evicting each other from their L1 set)
const PASS = 32;

// i8x16.swizzle masks: bytes 4t .. 4t + 3 of a strip, each into the low byte of an i32 lane (the
// other bytes 0: indices with the top bit set, which V8 compiles to one pshufb)
// prettier-ignore
const LANES0 = i8x16(0, -128, -128, -128, 1, -128, -128, -128, 2, -128, -128, -128, 3, -128, -128, -128);
// prettier-ignore
const LANES1 = i8x16(4, -128, -128, -128, 5, -128, -128, -128, 6, -128, -128, -128, 7, -128, -128, -128);
// prettier-ignore
const LANES2 = i8x16(8, -128, -128, -128, 9, -128, -128, -128, 10, -128, -128, -128, 11, -128, -128, -128);
// prettier-ignore
const LANES3 = i8x16(12, -128, -128, -128, 13, -128, -128, -128, 14, -128, -128, -128, 15, -128, -128, -128);

// the sums of eight columns, even e (columns 0, 2, 4, 6) and odd o (1, 3, 5, 7), in column order,
// less (zero + 8) * X, scaled (grouped: s the group's scale row, z its zero row at these columns),
// or less 8 * X (per channel: s = 0), added to out[0 .. 7]
function fold8(e: v128, o: v128, s: usize, z: usize, xs: v128, out: usize): void {
  let a = i32x4.shuffle(e, o, 0, 4, 1, 5);
  let b = i32x4.shuffle(e, o, 2, 6, 3, 7);
  if (s != 0) {
    // zero + 8 as float32: eight int8 widened
    const z16 = i16x8.add(i16x8.extend_low_i8x16_s(v128.load64_zero(z)), i16x8.splat(8));
    const za = f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(z16));
    const zb = f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(z16));
    a = f32x4.mul(f32x4.sub(a, f32x4.mul(za, xs)), v128.load(s));
    b = f32x4.mul(f32x4.sub(b, f32x4.mul(zb, xs)), v128.load(s, 16));
  } else {
    const x8 = f32x4.mul(xs, f32x4.splat(8));
    a = f32x4.sub(a, x8);
    b = f32x4.sub(b, x8);
  }
  v128.store(out, f32x4.add(v128.load(out), a));
  v128.store(out, f32x4.add(v128.load(out, 16), b), 16);
}

// one pass: rows w, w + ldw, .. (cnt of them, one group) against x[0 .. cnt - 1], over `strips`
// strips of 32 columns; s, z: the group's scale and zero rows (s = 0: per channel)
function passInt4(
  strips: i32,
  cnt: i32,
  w: usize,
  ldw: usize,
  x: usize,
  s: usize,
  z: usize,
  out: usize,
): void {
  let sum: f32 = 0;
  for (let i = 0; i < cnt; i++) sum += load<f32>(x + <usize>i * 4);
  const xs = f32x4.splat(sum);
  const low = i32x4.splat(15);
  const flip = i8x16.splat(-120); // 0x88
  for (let c = 0; c < strips; c++) {
    const zero = f32x4.splat(0);
    let e0 = zero,
      o0 = zero,
      e1 = zero,
      o1 = zero,
      e2 = zero,
      o2 = zero,
      e3 = zero,
      o3 = zero;
    let wp = w + <usize>c * 16;
    let xp = x;
    for (let i = 0; i < cnt; i++) {
      const b = v128.xor(v128.load(wp), flip);
      const xv = v128.load32_splat(xp);
      let t = i8x16.swizzle(b, LANES0);
      e0 = f32x4.add(e0, f32x4.mul(xv, f32x4.convert_i32x4_s(v128.and(t, low))));
      o0 = f32x4.add(o0, f32x4.mul(xv, f32x4.convert_i32x4_s(i32x4.shr_u(t, 4))));
      t = i8x16.swizzle(b, LANES1);
      e1 = f32x4.add(e1, f32x4.mul(xv, f32x4.convert_i32x4_s(v128.and(t, low))));
      o1 = f32x4.add(o1, f32x4.mul(xv, f32x4.convert_i32x4_s(i32x4.shr_u(t, 4))));
      t = i8x16.swizzle(b, LANES2);
      e2 = f32x4.add(e2, f32x4.mul(xv, f32x4.convert_i32x4_s(v128.and(t, low))));
      o2 = f32x4.add(o2, f32x4.mul(xv, f32x4.convert_i32x4_s(i32x4.shr_u(t, 4))));
      t = i8x16.swizzle(b, LANES3);
      e3 = f32x4.add(e3, f32x4.mul(xv, f32x4.convert_i32x4_s(v128.and(t, low))));
      o3 = f32x4.add(o3, f32x4.mul(xv, f32x4.convert_i32x4_s(i32x4.shr_u(t, 4))));
      wp += ldw;
      xp += 4;
    }
    const j = <usize>c * 32;
    const sj = s == 0 ? 0 : s + j * 4;
    fold8(e0, o0, sj, z + j, xs, out + j * 4);
    fold8(e1, o1, s == 0 ? 0 : sj + 32, z + j + 8, xs, out + j * 4 + 32);
    fold8(e2, o2, s == 0 ? 0 : sj + 64, z + j + 16, xs, out + j * 4 + 64);
    fold8(e3, o3, s == 0 ? 0 : sj + 96, z + j + 24, xs, out + j * 4 + 96);
  }
}

// passInt4 for columns j0 .. n - 1, one at a time (signed nibbles: Σ x q, less zero * Σ x)
function passInt4Tail(
  j0: i32,
  n: i32,
  cnt: i32,
  w: usize,
  ldw: usize,
  x: usize,
  s: usize,
  z: usize,
  out: usize,
): void {
  for (let j = j0; j < n; j++) {
    const at = w + <usize>(j >> 1);
    const shift = (j & 1) == 0 ? 28 : 24; // the nibble into the top of an i32, then down
    let acc: f32 = 0;
    let sum: f32 = 0;
    for (let i = 0; i < cnt; i++) {
      const v = load<f32>(x + <usize>i * 4);
      acc += v * <f32>(((<i32>load<u8>(at + <usize>i * ldw)) << shift) >> 28);
      sum += v;
    }
    const o = out + <usize>j * 4;
    if (s != 0) {
      const zj = <f32>load<i8>(z + <usize>j);
      acc = (acc - zj * sum) * load<f32>(s + <usize>j * 4);
    }
    store<f32>(o, load<f32>(o) + acc);
  }
}

// out[j] /= s[j] over n values (per channel: Keras' float32 division)
function divideInt4(n: i32, s: usize, out: usize): void {
  let j = 0;
  for (; j + 4 <= n; j += 4) {
    const o = out + <usize>j * 4;
    v128.store(o, f32x4.div(v128.load(o), v128.load(s + <usize>j * 4)));
  }
  for (; j < n; j++) {
    const o = out + <usize>j * 4;
    store<f32>(o, load<f32>(o) / load<f32>(s + <usize>j * 4));
  }
}

/**
 * Keras 3's int4 Dense: `out[r, j] = act(Σ_p x[r, p] w[p, j] + bias[j])` with x float32 `[rows, k]`
 * and the kernel packed as Keras holds it, bytes `[k, ceil(n / 2)]` (column j in the low nibble of
 * byte j >> 1 when even, the high when odd). blockSize > 0: grouped, `w[p, j] = (q[p, j] -
 * zero[g, j]) * scale[g, j]` with g = floor(p / blockSize), scale float32 and zero int8
 * `[ceil(k / blockSize), n]`; blockSize <= 0: per channel, `out[r, j] = f32(Σ_p x[r, p] q[p, j]) /
 * scale[j]` (scale `[n]`, zero unused). bias 0: none.
 */
export function denseInt4KN(
  rows: i32,
  k: i32,
  n: i32,
  x: usize,
  w: usize,
  scale: usize,
  zero: usize,
  blockSize: i32,
  bias: usize,
  act: i32,
  out: usize,
): void {
  const ldw = <usize>((n + 1) >> 1);
  const strips = n >> 5;
  const grouped = blockSize > 0;
  const bs = grouped ? min(blockSize, k) : k;
  const ldo = <usize>n * 4;
  memory.fill(out, 0, <usize>rows * ldo);
  for (let g0 = 0, g = 0; g0 < k; g0 += bs, g++) {
    const g1 = min(k, g0 + bs);
    const s = grouped ? scale + <usize>g * ldo : 0;
    const z = grouped ? zero + <usize>g * <usize>n : 0;
    for (let p0 = g0; p0 < g1; p0 += PASS) {
      const cnt = min(PASS, g1 - p0);
      const wp = w + <usize>p0 * ldw;
      for (let r = 0; r < rows; r++) {
        const xr = x + <usize>(r * k + p0) * 4;
        const o = out + <usize>r * ldo;
        passInt4(strips, cnt, wp, ldw, xr, s, z, o);
        passInt4Tail(strips * 32, n, cnt, wp, ldw, xr, s, z, o);
      }
    }
  }
  if (!grouped) for (let r = 0; r < rows; r++) divideInt4(n, scale, out + <usize>r * ldo);
  finish(rows, n, bias, act, out);
}
