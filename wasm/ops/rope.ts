// Rotary position embeddings (keras-hub's RotaryEmbedding) of rows at their positions.

// sin and cos in float64 without tables (the module has no data segment): a = n pi/2 + r with
// |r| <= pi/4 (pi/2 in two parts, the first exact times n < 2^20), Taylor polynomials of r
// (truncation < 1e-15), the quadrant n mod 4 picking and signing them.
const PIO2_HI: f64 = 1.5707963267341256;
const PIO2_LO: f64 = 6.077100506506192e-11;

function sinPoly(r: f64): f64 {
  const z = r * r;
  let p = -1.0 / 1307674368000.0;
  p = p * z + 1.0 / 6227020800.0;
  p = p * z - 1.0 / 39916800.0;
  p = p * z + 1.0 / 362880.0;
  p = p * z - 1.0 / 5040.0;
  p = p * z + 1.0 / 120.0;
  p = p * z - 1.0 / 6.0;
  return r + r * z * p;
}

function cosPoly(r: f64): f64 {
  const z = r * r;
  let p = 1.0 / 20922789888000.0;
  p = p * z - 1.0 / 87178291200.0;
  p = p * z + 1.0 / 479001600.0;
  p = p * z - 1.0 / 3628800.0;
  p = p * z + 1.0 / 40320.0;
  p = p * z - 1.0 / 720.0;
  p = p * z + 1.0 / 24.0;
  p = p * z - 0.5;
  return 1.0 + z * p;
}

/**
 * Rotary embedding of x `[B * t, heads * headDim]` (see StepKernels.rope): row `b * t + i` at
 * position `start + i`; angle `position * freqs[j]` in float32, each head's halves rotated with
 * float32 products and sums (as Keras' ops); out may alias x.
 */
export function rope(
  B: i32,
  t: i32,
  start: i32,
  heads: i32,
  headDim: i32,
  x: usize,
  freqs: usize,
  out: usize,
): void {
  const half = headDim >> 1;
  const row = <usize>(heads * headDim) * 4;
  const hBytes = <usize>headDim * 4;
  const halfBytes = <usize>half * 4;
  for (let r = 0; r < B * t; r++) {
    const position = <f32>(start + (r % t));
    const xr = x + <usize>r * row;
    const or = out + <usize>r * row;
    for (let j = 0; j < half; j++) {
      const angle = <f64>(position * load<f32>(freqs + <usize>j * 4));
      // angle = n pi/2 + rem, the quadrant n mod 4 picking and signing the polynomials
      const n = Math.floor(angle * 0.6366197723675814 + 0.5);
      const rem = angle - n * PIO2_HI - n * PIO2_LO;
      const q = <i32>((<i64>n) & 3);
      const sp = sinPoly(rem);
      const cp = cosPoly(rem);
      const c = <f32>(q == 0 ? cp : q == 1 ? -sp : q == 2 ? -cp : sp);
      const s = <f32>(q == 0 ? sp : q == 1 ? cp : q == 2 ? -sp : -cp);
      for (let h = 0; h < heads; h++) {
        const o = <usize>h * hBytes + <usize>j * 4;
        const x1 = load<f32>(xr + o);
        const x2 = load<f32>(xr + o + halfBytes);
        store<f32>(or + o, x1 * c - x2 * s);
        store<f32>(or + o + halfBytes, x2 * c + x1 * s);
      }
    }
  }
}
