import {hsumI} from '../simd/sums';

// Keras' int8 sums on relaxed SIMD, for the step module's int8 products built a second time with
// relaxed-simd (wasm/step_int8_relaxed.ts; wasm/int8/dense.ts picks these where
// ASC_FEATURE_RELAXED_SIMD). `i16x8.relaxed_dot_i8x16_i7x16_s(w, b)` multiplies signed i8 lanes
// of w by b and sums adjacent pairs into i16 lanes: deterministic and exact only where every lane
// of b is in [0, 127]. Keras' activations q are in [-127, 127], so each is split as
// q = q7 - 128 s, s = 1 where q < 0 (else 0) and q7 = q + 128 s in [0, 127] (the low seven bits
// of q's byte): Σ w q = Σ w q7 - 128 Σ w s, two relaxed dots per 16 weights instead of four
// widenings and two i16 dots. A pair stays within 2 · 127 · 127 = 32258 (no saturation: pmaddubsw
// on x64), widened pairwise into i32 lanes (`i32x4.extadd_pairwise_i16x8_s`): the sums equal the
// plain module's exactly. Not `i32x4.relaxed_dot_i8x16_i7x16_add_s`, the same on x64 in one
// instruction: Node 20's baseline compiler (V8 11.3, Liftoff) returns twice the dot for it and
// drops the accumulator.

/** The low seven bits of each int8 lane: q + 128 where q < 0, q elsewhere (in [0, 127]). */
function low7(q: v128): v128 {
  return v128.and(q, i8x16.splat(0x7f));
}

/** 1 in each int8 lane where q < 0, else 0 (its sign bit). */
function signBit(q: v128): v128 {
  return i8x16.shr_u(q, 7);
}

/** `c + Σ w b` in i32 lanes, four adjacent products each; b's lanes in [0, 127]. */
function dotAdd(w: v128, b: v128, c: v128): v128 {
  return i32x4.add(c, i32x4.extadd_pairwise_i16x8_s(i16x8.relaxed_dot_i8x16_i7x16_s(w, b)));
}

/** The i32 lanes' `Σ w q7 - 128 Σ w s` of the split, summed. */
function joinSplit(c7: v128, cs: v128): i32 {
  return hsumI(i32x4.sub(c7, i32x4.shl(cs, 7)));
}

/** Σ_p q[p] w[p] over int8 rows of k: 16 at a time, each q split once, two relaxed dots. */
export function dotInt8Relaxed(k: i32, q: usize, w: usize): i32 {
  let c7 = i32x4.splat(0),
    cs = i32x4.splat(0);
  let p = 0;
  for (; p + 16 <= k; p += 16) {
    const a = v128.load(q + <usize>p);
    const b = v128.load(w + <usize>p);
    c7 = dotAdd(b, low7(a), c7);
    cs = dotAdd(b, signBit(a), cs);
  }
  let s = joinSplit(c7, cs);
  for (; p < k; p++) s += <i32>load<i8>(q + <usize>p) * <i32>load<i8>(w + <usize>p);
  return s;
}

/** As {@link dotInt8Relaxed}, 32 at a time into two pairs of accumulators (one stream through w). */
export function dotInt8RowRelaxed(k: i32, q: usize, w: usize): i32 {
  let c7 = i32x4.splat(0),
    cs = i32x4.splat(0),
    d7 = i32x4.splat(0),
    ds = i32x4.splat(0);
  let p = 0;
  for (; p + 32 <= k; p += 32) {
    const o = <usize>p;
    const x0 = v128.load(q + o);
    const x1 = v128.load(q + o, 16);
    const b0 = v128.load(w + o);
    const b1 = v128.load(w + o, 16);
    c7 = dotAdd(b0, low7(x0), c7);
    cs = dotAdd(b0, signBit(x0), cs);
    d7 = dotAdd(b1, low7(x1), d7);
    ds = dotAdd(b1, signBit(x1), ds);
  }
  return (
    joinSplit(i32x4.add(c7, d7), i32x4.add(cs, ds)) +
    dotInt8Relaxed(k - p, q + <usize>p, w + <usize>p)
  );
}

/**
 * Four rows of w int8 (stride k) against one row of q, sums into out[0..3] (i32): each 16 of q
 * split once for the four rows.
 */
export function dotInt8x4Relaxed(k: i32, q: usize, w: usize, out: usize): void {
  const ld = <usize>k;
  const w1 = w + ld;
  const w2 = w1 + ld;
  const w3 = w2 + ld;
  let c0 = i32x4.splat(0),
    c1 = i32x4.splat(0),
    c2 = i32x4.splat(0),
    c3 = i32x4.splat(0);
  let s0 = i32x4.splat(0),
    s1 = i32x4.splat(0),
    s2 = i32x4.splat(0),
    s3 = i32x4.splat(0);
  let p = 0;
  for (; p + 16 <= k; p += 16) {
    const o = <usize>p;
    const a = v128.load(q + o);
    const a7 = low7(a);
    const as = signBit(a);
    const b0 = v128.load(w + o);
    c0 = dotAdd(b0, a7, c0);
    s0 = dotAdd(b0, as, s0);
    const b1 = v128.load(w1 + o);
    c1 = dotAdd(b1, a7, c1);
    s1 = dotAdd(b1, as, s1);
    const b2 = v128.load(w2 + o);
    c2 = dotAdd(b2, a7, c2);
    s2 = dotAdd(b2, as, s2);
    const b3 = v128.load(w3 + o);
    c3 = dotAdd(b3, a7, c3);
    s3 = dotAdd(b3, as, s3);
  }
  const rest = <usize>p;
  store<i32>(out, joinSplit(c0, s0) + dotInt8Relaxed(k - p, q + rest, w + rest));
  store<i32>(out, joinSplit(c1, s1) + dotInt8Relaxed(k - p, q + rest, w1 + rest), 4);
  store<i32>(out, joinSplit(c2, s2) + dotInt8Relaxed(k - p, q + rest, w2 + rest), 8);
  store<i32>(out, joinSplit(c3, s3) + dotInt8Relaxed(k - p, q + rest, w3 + rest), 12);
}
