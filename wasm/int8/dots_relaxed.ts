import {hsumI} from '../simd/sums';

// Keras' int8 sums on relaxed SIMD, for the step module's int8 products built a second time with
// relaxed-simd (wasm/step_int8_relaxed.ts; wasm/int8/dense.ts picks these where
// ASC_FEATURE_RELAXED_SIMD). `i16x8.relaxed_dot_i8x16_i7x16_s(a, b)` multiplies signed i8 lanes
// of a by b and sums adjacent pairs into i16 lanes: deterministic and exact only where every lane
// of b is in [0, 127] (pmaddubsw on x64). Keras' activations q are in [-127, 127], so the sign
// moves to the weight: w q = (sign(q) w) |q|, |q| in [0, 127] the i7 operand, sign(q) w in
// [-127, 127] (Keras' quantizer writes weights in [-127, 127]; a weight of -128, whose negation
// would wrap, is not refused here and sums otherwise than in the plain module). A pair stays
// within 2 · 127 · 127 = 32258 (no saturation) and is widened pairwise into i32 lanes: the sums
// equal the plain module's exactly, one relaxed dot per 16 weights instead of four widenings and
// two i16 dots.
//
// Measured on x64 (Node 20, V8 11.3): no faster than the plain module's widening, see
// docs/performance.md. The split the other way, q = q7 - 128 s (s = 1 where q < 0, q7 = q + 128 s
// in [0, 127], two relaxed dots per 16 weights), measured slower still. Not
// `i32x4.relaxed_dot_i8x16_i7x16_add_s`, the same on x64: Node 20's baseline compiler (Liftoff)
// returns twice the dot for it and drops the accumulator.

/** Where q < 0: -1 lanes (the sign moved to the weight, see above). */
function negative(q: v128): v128 {
  return i8x16.lt_s(q, i8x16.splat(0));
}

/**
 * `c + Σ (sign(q) w) |q|` in i32 lanes, four adjacent products each (w in [-127, 127]), given
 * q's `negative(q)` and `|q|` (made once where several rows of w meet the same q).
 */
function dotSigned(w: v128, neg: v128, abs: v128, c: v128): v128 {
  const ws = i8x16.sub(v128.xor(w, neg), neg); // -w where q < 0, w elsewhere
  return i32x4.add(c, i32x4.extadd_pairwise_i16x8_s(i16x8.relaxed_dot_i8x16_i7x16_s(ws, abs)));
}

/** `c + Σ q w` (one row of w against q). */
function dotQ(w: v128, q: v128, c: v128): v128 {
  return dotSigned(w, negative(q), i8x16.abs(q), c);
}

/** Σ_p q[p] w[p] over int8 rows of k: 16 at a time, one relaxed dot each. */
export function dotInt8Relaxed(k: i32, q: usize, w: usize): i32 {
  let c = i32x4.splat(0);
  let p = 0;
  for (; p + 16 <= k; p += 16) c = dotQ(v128.load(w + <usize>p), v128.load(q + <usize>p), c);
  let s = hsumI(c);
  for (; p < k; p++) s += <i32>load<i8>(q + <usize>p) * <i32>load<i8>(w + <usize>p);
  return s;
}

/** As {@link dotInt8Relaxed}, 32 at a time into two accumulators (one stream through w). */
export function dotInt8RowRelaxed(k: i32, q: usize, w: usize): i32 {
  let c0 = i32x4.splat(0),
    c1 = i32x4.splat(0);
  let p = 0;
  for (; p + 32 <= k; p += 32) {
    const o = <usize>p;
    c0 = dotQ(v128.load(w + o), v128.load(q + o), c0);
    c1 = dotQ(v128.load(w + o, 16), v128.load(q + o, 16), c1);
  }
  return hsumI(i32x4.add(c0, c1)) + dotInt8Relaxed(k - p, q + <usize>p, w + <usize>p);
}

/** Four rows of w int8 (stride k) against one row of q, sums into out[0..3] (i32). */
export function dotInt8x4Relaxed(k: i32, q: usize, w: usize, out: usize): void {
  const ld = <usize>k;
  const w1 = w + ld;
  const w2 = w1 + ld;
  const w3 = w2 + ld;
  let c0 = i32x4.splat(0),
    c1 = i32x4.splat(0),
    c2 = i32x4.splat(0),
    c3 = i32x4.splat(0);
  let p = 0;
  for (; p + 16 <= k; p += 16) {
    const o = <usize>p;
    // q's sign and magnitude once for the four rows
    const a = v128.load(q + o);
    const neg = negative(a);
    const abs = i8x16.abs(a);
    c0 = dotSigned(v128.load(w + o), neg, abs, c0);
    c1 = dotSigned(v128.load(w1 + o), neg, abs, c1);
    c2 = dotSigned(v128.load(w2 + o), neg, abs, c2);
    c3 = dotSigned(v128.load(w3 + o), neg, abs, c3);
  }
  const rest = <usize>p;
  store<i32>(out, hsumI(c0) + dotInt8Relaxed(k - p, q + rest, w + rest));
  store<i32>(out, hsumI(c1) + dotInt8Relaxed(k - p, q + rest, w1 + rest), 4);
  store<i32>(out, hsumI(c2) + dotInt8Relaxed(k - p, q + rest, w2 + rest), 8);
  store<i32>(out, hsumI(c3) + dotInt8Relaxed(k - p, q + rest, w3 + rest), 12);
}
