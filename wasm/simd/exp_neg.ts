// Shared SIMD math: exp(x) for x <= 0, used by the masked softmax (wasm/attention/masked_softmax.ts),
// attention's softmax over the cache (wasm/attention/attend.ts) and the logistic activations.

// exp(x) for x <= 0 (softmax after subtracting the row max), f32x4: Cephes' expf polynomial,
// 0 below -87 (where 2^n would be subnormal; so -Infinity, a masked key, gives exactly 0); NaN
// stays NaN.
export function expNeg4(x: v128): v128 {
  const tiny = f32x4.lt(x, f32x4.splat(-87.0));
  const n = f32x4.floor(
    f32x4.add(f32x4.mul(x, f32x4.splat(1.44269504088896341)), f32x4.splat(0.5)),
  );
  let r = f32x4.sub(x, f32x4.mul(n, f32x4.splat(0.693359375)));
  r = f32x4.sub(r, f32x4.mul(n, f32x4.splat(-2.1219444e-4)));
  const z = f32x4.mul(r, r);
  let y = f32x4.splat(1.98756915e-4);
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(1.3981999507e-3));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(8.3334519073e-3));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(4.1665795894e-2));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(1.6666665459e-1));
  y = f32x4.add(f32x4.mul(y, r), f32x4.splat(5.0000001201e-1));
  y = f32x4.add(f32x4.add(f32x4.mul(y, z), r), f32x4.splat(1.0));
  // 2^n from the exponent bits (n >= -126 here, or the lane is replaced by 0)
  const pow2n = i32x4.shl(i32x4.add(i32x4.trunc_sat_f32x4_s(n), i32x4.splat(127)), 23);
  return v128.andnot(f32x4.mul(y, pow2n), tiny);
}

// The same for one value (row tails), so every element goes through one formula.
export function expNeg1(x: f32): f32 {
  return f32x4.extract_lane(expNeg4(f32x4.splat(x)), 0);
}
