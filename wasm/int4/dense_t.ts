import {descale} from '../int8/dense';
import {hsumI} from '../simd/sums';

// Keras 3's int4 tied logits (keras-hub's ReversibleEmbedding called with reverse=True, on an int4
// table reloaded from a file): the rows x quantized per row to int8 (`quantizeRows`: q, qs), the
// table's bytes `[n, ceil(k / 2)]` packed along k (value d of output v in the low nibble of byte
// d >> 1 when even, the high when odd), each output's weights contiguous as denseTInt8's.
// - per channel (scale `[n]`): Keras' `f32(Σ_d q[d] w[v, d]) / (qs * scale[v])`, the sum exact in
//   int32, then int8/dense's descale: equal to Keras bit for bit;
// - grouped (scale float32 and zero int8 `[n, G]`, G = ceil(k / blockSize)): Keras multiplies q by
//   the dequantized table, `Σ_d q[d] f32((w[v, d] - zero[v, g]) * scale[v, g]) / qs`. Within a
//   group `Σ_d q[d] (w - zero)` is an exact integer (|127 * 15 * blockSize| fits int32), so here
//   `f32(Σ_g scale[v, g] * f32(isum_g)) / qs`: one float32 multiply-add per group instead of one
//   per weight, within 2e-7 of the largest logit of a float64 sum of Keras' products
//   (bench/int4_kernels.mjs).
// Sums on u = w + 8 (a byte XOR 0x88, as ../int4/dense_kn): `Σ q w = Σ q u - 8 Σ q`. Four
// outputs a pass over one row of q (its even / odd split and Σ q shared), 16 values a step: the
// 8 bytes of each output widened to i16, the low nibbles against q's even values and the high
// against its odd ones (i32x4.dot_i16x8_s); a group's last values (and every group of an odd
// block size, whose groups start inside a byte) one at a time.

// the four sums of a0 .. a3 (i32x4 each) as one i32x4
function hsum4(a0: v128, a1: v128, a2: v128, a3: v128): v128 {
  const t01 = i32x4.add(i32x4.shuffle(a0, a1, 0, 4, 1, 5), i32x4.shuffle(a0, a1, 2, 6, 3, 7));
  const t23 = i32x4.add(i32x4.shuffle(a2, a3, 0, 4, 1, 5), i32x4.shuffle(a2, a3, 2, 6, 3, 7));
  return i32x4.add(i32x4.shuffle(t01, t23, 0, 1, 4, 5), i32x4.shuffle(t01, t23, 2, 3, 6, 7));
}

// the float32 values at v, v + c1, v + c2, v + c3 (four outputs' scales; c1 .. c3 in values)
function lanes4f(v: usize, c1: usize, c2: usize, c3: usize): v128 {
  let r = f32x4.splat(load<f32>(v));
  r = f32x4.replace_lane(r, 1, load<f32>(v + c1 * 4));
  r = f32x4.replace_lane(r, 2, load<f32>(v + c2 * 4));
  return f32x4.replace_lane(r, 3, load<f32>(v + c3 * 4));
}

// the int8 values at v, v + c1, v + c2, v + c3 as i32 (four outputs' zero points)
function lanes4i8(v: usize, c1: usize, c2: usize, c3: usize): v128 {
  let r = i32x4.splat(<i32>load<i8>(v));
  r = i32x4.replace_lane(r, 1, <i32>load<i8>(v + c1));
  r = i32x4.replace_lane(r, 2, <i32>load<i8>(v + c2));
  return i32x4.replace_lane(r, 3, <i32>load<i8>(v + c3));
}

// four outputs' sums over one row of q (k values): at w, w + kb, .. (cnt of them; the others
// repeat the last), their scale and zero rows `groups` apart from s and z. Per channel (grouped
// false): the int32 sums into out[0 .. cnt - 1]; grouped: f32(Σ_g scale * f32(isum_g)) / qsr.
// A group's sums are added across lanes for the four outputs at once, then scaled four at once.
function tiedInt4x4(
  k: i32,
  bs: i32,
  grouped: bool,
  q: usize,
  w: usize,
  kb: usize,
  cnt: i32,
  s: usize,
  z: usize,
  groups: i32,
  qsr: f32,
  out: usize,
): void {
  // outputs 1 .. 3, or the last of the cnt again: their rows of weights, scales and zero points
  const i1 = <usize>min(1, cnt - 1);
  const i2 = <usize>min(2, cnt - 1);
  const i3 = <usize>min(3, cnt - 1);
  const w1 = w + i1 * kb;
  const w2 = w + i2 * kb;
  const w3 = w + i3 * kb;
  const c1 = i1 * <usize>groups;
  const c2 = i2 * <usize>groups;
  const c3 = i3 * <usize>groups;
  const flip = i16x8.splat(0x88);
  const low = i16x8.splat(15);
  const eight = i32x4.splat(8);
  let f = f32x4.splat(0); // grouped: Σ_g scale * isum_g
  let t = i32x4.splat(0); // per channel: the int32 sums
  for (let g = 0, d0 = 0; d0 < k; d0 += bs, g++) {
    const d1 = min(k, d0 + bs);
    let a0 = i32x4.splat(0),
      a1 = a0,
      a2 = a0,
      a3 = a0,
      qa = a0;
    let d = d0;
    if ((d0 & 1) == 0) {
      for (; d + 16 <= d1; d += 16) {
        const qv = v128.load(q + <usize>d);
        const qq = i8x16.shuffle(qv, qv, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        const qe = i16x8.extend_low_i8x16_s(qq);
        const qo = i16x8.extend_high_i8x16_s(qq);
        qa = i32x4.add(qa, i32x4.extadd_pairwise_i16x8_s(i16x8.add(qe, qo)));
        const o = <usize>(d >> 1);
        let b = v128.xor(v128.load8x8_u(w + o), flip);
        a0 = i32x4.add(a0, i32x4.dot_i16x8_s(v128.and(b, low), qe));
        a0 = i32x4.add(a0, i32x4.dot_i16x8_s(i16x8.shr_u(b, 4), qo));
        b = v128.xor(v128.load8x8_u(w1 + o), flip);
        a1 = i32x4.add(a1, i32x4.dot_i16x8_s(v128.and(b, low), qe));
        a1 = i32x4.add(a1, i32x4.dot_i16x8_s(i16x8.shr_u(b, 4), qo));
        b = v128.xor(v128.load8x8_u(w2 + o), flip);
        a2 = i32x4.add(a2, i32x4.dot_i16x8_s(v128.and(b, low), qe));
        a2 = i32x4.add(a2, i32x4.dot_i16x8_s(i16x8.shr_u(b, 4), qo));
        b = v128.xor(v128.load8x8_u(w3 + o), flip);
        a3 = i32x4.add(a3, i32x4.dot_i16x8_s(v128.and(b, low), qe));
        a3 = i32x4.add(a3, i32x4.dot_i16x8_s(i16x8.shr_u(b, 4), qo));
      }
    }
    let sums = hsum4(a0, a1, a2, a3);
    let sq = hsumI(qa);
    if (d < d1) {
      // the group's last values one at a time (u: the nibble of value d, XOR 8)
      let s0 = 0,
        s1 = 0,
        s2 = 0,
        s3 = 0;
      for (; d < d1; d++) {
        const o = <usize>(d >> 1);
        const shift = (d & 1) << 2;
        const qd = <i32>load<i8>(q + <usize>d);
        s0 += qd * ((((<i32>load<u8>(w + o)) >> shift) & 15) ^ 8);
        s1 += qd * ((((<i32>load<u8>(w1 + o)) >> shift) & 15) ^ 8);
        s2 += qd * ((((<i32>load<u8>(w2 + o)) >> shift) & 15) ^ 8);
        s3 += qd * ((((<i32>load<u8>(w3 + o)) >> shift) & 15) ^ 8);
        sq += qd;
      }
      let tail = i32x4.splat(s0);
      tail = i32x4.replace_lane(tail, 1, s1);
      tail = i32x4.replace_lane(tail, 2, s2);
      sums = i32x4.add(sums, i32x4.replace_lane(tail, 3, s3));
    }
    // Σ q (w - zero) = Σ q u - (zero + 8) Σ q, exact (per channel: zero 0)
    const sqv = i32x4.splat(sq);
    if (grouped) {
      const at = <usize>g;
      const zs = i32x4.add(lanes4i8(z + at, c1, c2, c3), eight);
      const isum = i32x4.sub(sums, i32x4.mul(zs, sqv));
      f = f32x4.add(f, f32x4.mul(lanes4f(s + at * 4, c1, c2, c3), f32x4.convert_i32x4_s(isum)));
    } else {
      t = i32x4.add(t, i32x4.sub(sums, i32x4.mul(eight, sqv)));
    }
  }
  const r = grouped ? f32x4.div(f, f32x4.splat(qsr)) : t;
  if (cnt == 4) {
    v128.store(out, r);
  } else {
    store<i32>(out, i32x4.extract_lane(r, 0));
    if (cnt > 1) store<i32>(out, i32x4.extract_lane(r, 1), 4);
    if (cnt > 2) store<i32>(out, i32x4.extract_lane(r, 2), 8);
  }
}

/**
 * Keras 3's int4 tied logits: q int8 `[rows, k]` and qs `[rows]` from `quantizeRows`, the table's
 * bytes `[n, ceil(k / 2)]` (packed along k). blockSize > 0: `out[r, v] = f32(Σ_g scale[v, g] *
 * Σ_{d in g} q[r, d] (w[v, d] - zero[v, g])) / qs[r]` (scale float32, zero int8 `[n, ceil(k /
 * blockSize)]`); blockSize <= 0: `out[r, v] = f32(Σ_d q[r, d] w[v, d]) / (qs[r] * scale[v])`
 * (scale `[n]`, zero unused), bit for bit Keras'.
 */
export function denseTInt4(
  rows: i32,
  k: i32,
  n: i32,
  q: usize,
  qs: usize,
  w: usize,
  scale: usize,
  zero: usize,
  blockSize: i32,
  out: usize,
): void {
  const kb = <usize>((k + 1) >> 1);
  const grouped = blockSize > 0;
  const bs = grouped ? min(blockSize, k) : k;
  const groups = grouped ? (k + bs - 1) / bs : 1;
  const ldo = <usize>n * 4;
  for (let v = 0; v < n; v += 4) {
    const cnt = min(4, n - v);
    const at = <usize>v * <usize>groups;
    for (let r = 0; r < rows; r++) {
      tiedInt4x4(
        k,
        bs,
        grouped,
        q + <usize>(r * k),
        w + <usize>v * kb,
        kb,
        cnt,
        scale + at * 4,
        zero + at,
        groups,
        load<f32>(qs + <usize>r * 4),
        out + <usize>r * ldo + <usize>v * 4,
      );
    }
  }
  if (!grouped)
    for (let r = 0; r < rows; r++)
      descale(n, load<f32>(qs + <usize>r * 4), scale, out + <usize>r * ldo);
}
