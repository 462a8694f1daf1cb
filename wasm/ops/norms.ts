// Normalization of rows: layer norm and RMS norm.

// The sums of the norms in float64 (as tfjs' cpu backend sums float32 values in JavaScript
// numbers): the mean stays exact to float32 even where it is large against the spread.
function sumOf(dim: i32, x: usize): f64 {
  let a = f64x2.splat(0),
    b = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= dim; j += 4) {
    const v = v128.load(x + <usize>j * 4);
    a = f64x2.add(a, f64x2.promote_low_f32x4(v));
    b = f64x2.add(b, f64x2.promote_low_f32x4(i64x2.shuffle(v, v, 1, 0)));
  }
  let s = f64x2.extract_lane(a, 0) + f64x2.extract_lane(a, 1);
  s += f64x2.extract_lane(b, 0) + f64x2.extract_lane(b, 1);
  for (; j < dim; j++) s += <f64>load<f32>(x + <usize>j * 4);
  return s;
}

// Σ (x - c)^2 over dim values: each square in float32 (tfjs' square of x - mean), summed in
// float64
function squaresOf(dim: i32, x: usize, c: f32): f64 {
  const cv = f32x4.splat(c);
  let a = f64x2.splat(0),
    b = f64x2.splat(0);
  let j = 0;
  for (; j + 4 <= dim; j += 4) {
    const d = f32x4.sub(v128.load(x + <usize>j * 4), cv);
    const sq = f32x4.mul(d, d);
    a = f64x2.add(a, f64x2.promote_low_f32x4(sq));
    b = f64x2.add(b, f64x2.promote_low_f32x4(i64x2.shuffle(sq, sq, 1, 0)));
  }
  let s = f64x2.extract_lane(a, 0) + f64x2.extract_lane(a, 1);
  s += f64x2.extract_lane(b, 0) + f64x2.extract_lane(b, 1);
  for (; j < dim; j++) {
    const d = load<f32>(x + <usize>j * 4) - c;
    s += <f64>(d * d);
  }
  return s;
}

// out = (x - c) * inv * gamma + beta over dim values (gamma / beta 0: absent)
function normalize(
  dim: i32,
  x: usize,
  c: f32,
  inv: f32,
  gamma: usize,
  beta: usize,
  out: usize,
): void {
  const cv = f32x4.splat(c);
  const iv = f32x4.splat(inv);
  let j = 0;
  for (; j + 4 <= dim; j += 4) {
    const o = <usize>j * 4;
    let v = f32x4.mul(f32x4.sub(v128.load(x + o), cv), iv);
    if (gamma != 0) v = f32x4.mul(v, v128.load(gamma + o));
    if (beta != 0) v = f32x4.add(v, v128.load(beta + o));
    v128.store(out + o, v);
  }
  for (; j < dim; j++) {
    const o = <usize>j * 4;
    let v = (load<f32>(x + o) - c) * inv;
    if (gamma != 0) v *= load<f32>(gamma + o);
    if (beta != 0) v += load<f32>(beta + o);
    store<f32>(out + o, v);
  }
}

/**
 * Layer normalization over the last axis, as tfjs' LayerNormalization: two passes (the mean, then
 * the biased variance of x - mean, each square in float32), sums in float64; out may alias x.
 */
export function layerNorm(
  rows: i32,
  dim: i32,
  x: usize,
  gamma: usize,
  beta: usize,
  epsilon: f32,
  out: usize,
): void {
  const d = <f64>dim;
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * dim) * 4;
    const mean = <f32>(sumOf(dim, xr) / d);
    const variance = <f32>(squaresOf(dim, xr, mean) / d);
    const inv = <f32>1 / sqrt<f32>(variance + epsilon);
    normalize(dim, xr, mean, inv, gamma, beta, out + <usize>(r * dim) * 4);
  }
}

/**
 * RMS normalization: `out = x / sqrt(mean(x^2) + epsilon) * (offset + gamma)` (Gemma's norms:
 * offset 1), `offset + gamma` in float32; out may alias x.
 */
export function rmsNorm(
  rows: i32,
  dim: i32,
  x: usize,
  gamma: usize,
  epsilon: f32,
  out: usize,
  offset: f32,
): void {
  const d = <f64>dim;
  const ov = f32x4.splat(offset);
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * dim) * 4;
    const or = out + <usize>(r * dim) * 4;
    const inv = <f32>1 / sqrt<f32>(<f32>(squaresOf(dim, xr, 0) / d) + epsilon);
    if (offset == 0 || gamma == 0) {
      normalize(dim, xr, 0, inv, gamma, 0, or);
      continue;
    }
    const iv = f32x4.splat(inv);
    let j = 0;
    for (; j + 4 <= dim; j += 4) {
      const o = <usize>j * 4;
      const g = f32x4.add(ov, v128.load(gamma + o));
      v128.store(or + o, f32x4.mul(f32x4.mul(v128.load(xr + o), iv), g));
    }
    for (; j < dim; j++) {
      const o = <usize>j * 4;
      store<f32>(or + o, load<f32>(xr + o) * inv * (offset + load<f32>(gamma + o)));
    }
  }
}
