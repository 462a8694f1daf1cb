import {finish} from '../ops/activations';

// Keras 3's int4 Dense (and EinsumDense) on its packed kernel, read where it is: bytes
// `[k, ceil(n / 2)]`, row p holding the n int4 weights of input p two to a byte, column j in the
// low nibble of byte j >> 1 when j is even, in the high nibble when odd (two's complement, values
// in [-8, 7]; an odd n's last high nibble is padding). The layer is weight-only: Keras
// dequantizes the kernel and multiplies float32 x; x is not quantized here either (no int8 rows,
// as the int8 layers'), only held to 29 bits of each pass's largest value by the integer path.
//
// Unpacking: a byte XOR 0x88 holds u = q + 8 in [0, 15] in each nibble (the top bit of a
// two's-complement nibble flipped), so a nibble is an AND (low) or a shift (high) away from an
// unsigned integer. The sums are taken on u and the 8 folded with the zero point, once per pass:
// - grouped (block size bs along the input axis; scale float32 and zero int8 `[G, n]`, group of
//   row p: floor(p / bs)): Keras' `w = (q - zero) * scale`, so for group g
//   `Σ_p x[p] w[p, j] = scale[g, j] * (Σ_p x[p] u[p, j] - (zero[g, j] + 8) * Σ_p x[p])`;
// - per channel (scale float32 `[n]`, no zero): Keras' `f32(Σ_p x[p] q[p, j]) / scale[j]`, the sum
//   as `Σ_p x[p] u[p, j] - 8 * Σ_p x[p]`, divided once all of k is summed.
//
// Two paths for the sums Σ_p x[p] u[p, j] of a pass (rows of one group):
// - integers (passDots, all columns but the last 64 to 79): the pass's x split into two int16
//   halves, `x ~ 2^-E (hi 2^15 + lo)` with E from the pass's largest |x| (29 bits of it: float32
//   keeps 24 of each value), and the sums of u hi and u lo
//   taken exactly in int32 by i32x4.dot_i16x8_s, two rows a product (pairs of rows interleaved
//   in 16-bit lanes, as ../int8/dense_kn.ts), combined in float32 once a pass. The halves lie in
//   the output row's last 64 floats during the pass (the module has no memory of its own), which
//   is why those columns take the float32 path afterwards;
// - float32 (passInt4: those last columns, and a pass whose x holds a value that is not finite
//   or is below 2^-90 throughout, so NaN and Inf reach out as Keras' would): x times u in float32
//   multiply-adds.
// Scaling once per group instead of once per weight (Keras' order), and the integer sums (about
// 25 vector instructions for 32 weights, against the float32 path's 38: 0.7x to 0.8x its time at
// one row on bench/int4_kernels.mjs' shapes), at most 6e-7 of the largest output away from a
// float64 sum of Keras' dequantized products on random shapes (the float32 path alone: the same;
// Keras' order: 7e-7).
//
// float32 passes of at most PASS rows of one group: for each strip of 16 bytes (32 columns) the
// pass's rows are summed into eight f32x4 in registers (the even columns from the low nibbles,
// the odd from the high), then folded into out (interleaved back to column order, scaled) once;
// the pass's 64-byte lines serve four strips in a row, from L1 (or L2, when a kernel's rows are a
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

// rows of a pass of the integer sums (passDots), and the floats of out's tail that hold their
// split inputs meanwhile (four bytes a row): 64 (32 measured 3 to 9% slower, a fold every 32
// rows; 128 twice as slow at n 8192, as PASS)
const DOTS_PASS = 64;

// splitRows' results: the two halves' weights (2^(15 - E), 2^-E) and the sum of the split values
let splitHi: f32 = 0;
let splitLo: f32 = 0;
let splitSum: f32 = 0;

// x[0 .. cnt - 1] as t = x 2^E = hi 2^15 + lo (E from the largest |x|, so |t| < 2^29; hi, lo
// integers, |hi|, |lo| <= 2^14; lo rounded, 29 bits of the largest |x|), written at c as pairs
// of rows: per pair (rows 2i, 2i + 1) an i32 of the two hi (i16, row 2i low), then one of the
// two lo; an odd count's last pair with 0 for its second row. False (nothing written) where a
// value is not finite or the largest is below 2^-90 (the float32 path then).
function splitRows(cnt: i32, x: usize, c: usize): bool {
  let m: f32 = 0;
  for (let i = 0; i < cnt; i++) m = max(m, abs(load<f32>(x + <usize>i * 4)));
  if (!(m < Infinity)) return false;
  let e = 0;
  if (m != 0) {
    const em = <i32>((reinterpret<u64>(<f64>m) >> 52) & 0x7ff) - 1023;
    if (em < -90) return false;
    e = 28 - em;
  }
  const up = reinterpret<f64>((<u64>(1023 + e)) << 52);
  const down = reinterpret<f64>((<u64>(1023 - e)) << 52);
  let sum: f64 = 0;
  for (let i = 0; i < cnt; i += 2) {
    const ta = <f64>load<f32>(x + <usize>i * 4) * up;
    const tb = i + 1 < cnt ? <f64>load<f32>(x + <usize>i * 4 + 4) * up : 0;
    const ha = nearest<f64>(ta * (1.0 / 32768));
    const hb = nearest<f64>(tb * (1.0 / 32768));
    const la = nearest<f64>(ta - ha * 32768);
    const lb = nearest<f64>(tb - hb * 32768);
    sum += (ha + hb) * 32768 + (la + lb);
    const at = c + <usize>(i >> 1) * 8;
    store<i32>(at, ((<i32>ha) & 0xffff) | ((<i32>hb) << 16));
    store<i32>(at, ((<i32>la) & 0xffff) | ((<i32>lb) << 16), 4);
  }
  splitHi = <f32>(down * 32768);
  splitLo = <f32>down;
  splitSum = <f32>(sum * down);
  return true;
}

// passInt4 in integers: rows w, w + ldw, .. (cnt, one group) against x split by splitRows into
// the pairs at c, over `strips` strips of 16 columns (8 bytes a row). Two rows' 8 bytes
// interleaved (row a, row b per byte), XOR 0x88 and widened to i16 give each column's two u = q +
// 8 side by side, the even columns' (AND 15) and the odd ones' (shift by 4); one
// i32x4.dot_i16x8_s against the pair's hi and one against its lo sum four columns of two rows,
// exactly (|Σ u hi| <= 64 * 15 * 2^14 < 2^24, so exact in float32 too). Folded once a pass:
// hi 2^(15 - E) + lo 2^-E in float32, then fold8 (less (zero + 8) Σ x, scaled), Σ x the sum of
// the split values. Two pairs a step measured no faster (V8 spills accumulators).
function passDots(
  strips: i32,
  cnt: i32,
  w: usize,
  ldw: usize,
  c: usize,
  s: usize,
  z: usize,
  out: usize,
): void {
  const full = cnt >> 1;
  const pairs = (cnt + 1) >> 1;
  const m15 = i16x8.splat(15);
  const flip = i8x16.splat(-120); // 0x88
  const ch = f32x4.splat(splitHi);
  const cl = f32x4.splat(splitLo);
  const xs = f32x4.splat(splitSum);
  const ldp = ldw * 2;
  for (let t = 0; t < strips; t++) {
    const zero = i32x4.splat(0);
    let eh0 = zero,
      oh0 = zero,
      eh1 = zero,
      oh1 = zero,
      el0 = zero,
      ol0 = zero,
      el1 = zero,
      ol1 = zero;
    let wp = w + <usize>t * 8;
    let cp = c;
    // full pairs, then an odd count's last row against itself (its pair's second half 0)
    let ldb = ldw;
    let end = full;
    let i = 0;
    while (true) {
      for (; i < end; i++) {
        const a = v128.load64_zero(wp);
        const b = v128.load64_zero(wp + ldb);
        // prettier-ignore
        const v = v128.xor(i8x16.shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), flip);
        const hp = v128.load32_splat(cp);
        const lp = v128.load32_splat(cp, 4);
        const lo = i16x8.extend_low_i8x16_u(v);
        const hi = i16x8.extend_high_i8x16_u(v);
        let u = v128.and(lo, m15);
        eh0 = i32x4.add(eh0, i32x4.dot_i16x8_s(u, hp));
        el0 = i32x4.add(el0, i32x4.dot_i16x8_s(u, lp));
        u = i16x8.shr_u(lo, 4);
        oh0 = i32x4.add(oh0, i32x4.dot_i16x8_s(u, hp));
        ol0 = i32x4.add(ol0, i32x4.dot_i16x8_s(u, lp));
        u = v128.and(hi, m15);
        eh1 = i32x4.add(eh1, i32x4.dot_i16x8_s(u, hp));
        el1 = i32x4.add(el1, i32x4.dot_i16x8_s(u, lp));
        u = i16x8.shr_u(hi, 4);
        oh1 = i32x4.add(oh1, i32x4.dot_i16x8_s(u, hp));
        ol1 = i32x4.add(ol1, i32x4.dot_i16x8_s(u, lp));
        wp += ldp;
        cp += 8;
      }
      if (end == pairs) break;
      ldb = 0;
      end = pairs;
    }
    const j = <usize>t * 16;
    const sj = s == 0 ? 0 : s + j * 4;
    const e0 = f32x4.add(
      f32x4.mul(f32x4.convert_i32x4_s(eh0), ch),
      f32x4.mul(f32x4.convert_i32x4_s(el0), cl),
    );
    const o0 = f32x4.add(
      f32x4.mul(f32x4.convert_i32x4_s(oh0), ch),
      f32x4.mul(f32x4.convert_i32x4_s(ol0), cl),
    );
    fold8(e0, o0, sj, z + j, xs, out + j * 4);
    const e1 = f32x4.add(
      f32x4.mul(f32x4.convert_i32x4_s(eh1), ch),
      f32x4.mul(f32x4.convert_i32x4_s(el1), cl),
    );
    const o1 = f32x4.add(
      f32x4.mul(f32x4.convert_i32x4_s(oh1), ch),
      f32x4.mul(f32x4.convert_i32x4_s(ol1), cl),
    );
    fold8(e1, o1, s == 0 ? 0 : sj + 32, z + j + 8, xs, out + j * 4 + 32);
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
  const grouped = blockSize > 0;
  const bs = grouped ? min(blockSize, k) : k;
  const ldo = <usize>n * 4;
  // columns 0 .. nd - 1 in integers (passDots, the split inputs in each row's last DOTS_PASS
  // floats meanwhile), the rest in float32 (passInt4) once they are done
  const nd = n >= DOTS_PASS + 16 ? (n - DOTS_PASS) & ~15 : 0;
  memory.fill(out, 0, <usize>rows * ldo);
  if (nd > 0) {
    for (let g0 = 0, g = 0; g0 < k; g0 += bs, g++) {
      const g1 = min(k, g0 + bs);
      const s = grouped ? scale + <usize>g * ldo : 0;
      const z = grouped ? zero + <usize>g * <usize>n : 0;
      for (let p0 = g0; p0 < g1; p0 += DOTS_PASS) {
        const cnt = min(DOTS_PASS, g1 - p0);
        const wp = w + <usize>p0 * ldw;
        for (let r = 0; r < rows; r++) {
          const xr = x + <usize>(r * k + p0) * 4;
          const o = out + <usize>r * ldo;
          if (splitRows(cnt, xr, o + <usize>(n - DOTS_PASS) * 4)) {
            passDots(nd >> 4, cnt, wp, ldw, o + <usize>(n - DOTS_PASS) * 4, s, z, o);
          } else {
            passInt4(nd >> 5, cnt, wp, ldw, xr, s, z, o);
            passInt4Tail((nd >> 5) << 5, nd, cnt, wp, ldw, xr, s, z, o);
          }
        }
      }
    }
    const tail = <usize>nd * 4;
    for (let r = 0; r < rows; r++) memory.fill(out + <usize>r * ldo + tail, 0, ldo - tail);
  }
  const strips = (n - nd) >> 5;
  const wd = w + <usize>(nd >> 1);
  for (let g0 = 0, g = 0; g0 < k; g0 += bs, g++) {
    const g1 = min(k, g0 + bs);
    const s = grouped ? scale + <usize>g * ldo : 0;
    const z = grouped ? zero + <usize>g * <usize>n : 0;
    const sd = grouped ? s + <usize>nd * 4 : 0;
    for (let p0 = g0; p0 < g1; p0 += PASS) {
      const cnt = min(PASS, g1 - p0);
      const wp = w + <usize>p0 * ldw;
      for (let r = 0; r < rows; r++) {
        const xr = x + <usize>(r * k + p0) * 4;
        const o = out + <usize>r * ldo;
        passInt4(strips, cnt, wd + <usize>p0 * ldw, ldw, xr, sd, z + <usize>nd, o + <usize>nd * 4);
        passInt4Tail(nd + strips * 32, n, cnt, wp, ldw, xr, s, z, o);
      }
    }
  }
  if (!grouped) for (let r = 0; r < rows; r++) divideInt4(n, scale, out + <usize>r * ldo);
  finish(rows, n, bias, act, out);
}
