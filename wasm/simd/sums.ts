// Shared SIMD math: horizontal sums of f32x4 / i32x4 (the products, attention).

export function hsum(v: v128): f32 {
  return (
    f32x4.extract_lane(v, 0) +
    f32x4.extract_lane(v, 1) +
    (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3))
  );
}

export function hsumI(v: v128): i32 {
  return (
    i32x4.extract_lane(v, 0) +
    i32x4.extract_lane(v, 1) +
    i32x4.extract_lane(v, 2) +
    i32x4.extract_lane(v, 3)
  );
}
