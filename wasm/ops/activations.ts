import {expNeg4} from '../simd/exp_neg';
import {add} from './elementwise';

// The activations of the step (codes of `StepActivation`): scalar math in float64 (no tables, so
// no data segment), four values at a time in float32, and a product's epilogue (bias, then the
// activation).

// e^x for |x| <= 700: x = n ln2 + r, |r| <= ln2 / 2, a degree-13 Taylor polynomial of e^r
// (truncation < 1e-17), times 2^n built from its exponent bits.
function exp64(x: f64): f64 {
  if (x > 700) x = 700;
  if (x < -700) return 0;
  const n = Math.floor(x * 1.4426950408889634 + 0.5);
  const r = x - n * 0.6931471803691238 - n * 1.9082149292705877e-10;
  let p = 1.0 / 6227020800.0;
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return p * reinterpret<f64>((<i64>(<i32>n + 1023)) << 52);
}

// erf(x): the Maclaurin series for |x| < 1 (exact to double rounding), else 1 - erfc(|x|) with
// Numerical Recipes' Chebyshev erfc (relative error < 1.2e-7 of erfc <= 0.16: under 2e-8).
function erf64(x: f64): f64 {
  const a = Math.abs(x);
  if (a < 1) {
    const x2 = x * x;
    let term = x;
    let sum = x;
    for (let i = 1; i < 24; i++) {
      term *= -x2 / <f64>i;
      sum += term / <f64>(2 * i + 1);
    }
    return sum * 1.1283791670955126;
  }
  const t = 1 / (1 + 0.5 * a);
  const erfc =
    t *
    exp64(
      -a * a -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t *
                      (-0.18628806 +
                        t *
                          (0.27886807 +
                            t *
                              (-1.13520398 +
                                t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x < 0 ? erfc - 1 : 1 - erfc;
}

export function tanh64(x: f64): f64 {
  const a = Math.abs(x);
  if (a > 20) return x < 0 ? -1 : 1;
  if (a < 1e-4) return x - (x * x * x) / 3;
  const e = exp64(2 * a);
  const t = (e - 1) / (e + 1);
  return x < 0 ? -t : t;
}

function act1(v: f32, act: i32): f32 {
  const x = <f64>v;
  switch (act) {
    case 1:
      return v > 0 ? v : 0;
    case 2:
      return <f32>(0.5 * x * (1 + erf64(x * 0.7071067811865476)));
    case 3:
      return <f32>(0.5 * x * (1 + tanh64(0.7978845608028654 * (x + 0.044715 * x * x * x))));
    case 4:
      return <f32>(x / (1 + exp64(-x)));
    case 5:
      return <f32>tanh64(x);
    case 6:
      return <f32>(1 / (1 + exp64(-x)));
  }
  return v;
}

/** `out = act(x)` over n values (codes of `StepActivation`); out may alias x. */
export function activate(n: i32, x: usize, act: i32, out: usize): void {
  if (act == 0) {
    if (x != out) memory.copy(out, x, <usize>n * 4);
    return;
  }
  let i = 0;
  if (act == 1) {
    const zero = f32x4.splat(0);
    for (; i + 4 <= n; i += 4) {
      const o = <usize>i * 4;
      v128.store(out + o, f32x4.max(v128.load(x + o), zero));
    }
  } else if (act == 3 || act == 4 || act == 6) {
    // gelu tanh, silu, sigmoid: f32x4, each x / (1 + e^-z) or 1 / (1 + e^-z) (see act4)
    for (; i + 4 <= n; i += 4) {
      const o = <usize>i * 4;
      v128.store(out + o, act4(v128.load(x + o), act));
    }
  }
  const lanes = act == 3 || act == 4 || act == 6;
  for (; i < n; i++) {
    const o = <usize>i * 4;
    const v = load<f32>(x + o);
    // the last values as the lanes of act4 (the same value wherever it falls)
    store<f32>(out + o, lanes ? f32x4.extract_lane(act4(f32x4.splat(v), act), 0) : act1(v, act));
  }
}

// gelu tanh (3), silu (4) and sigmoid (6) of four values in float32, through the logistic
// function: 0.5 (1 + tanh u) = 1 / (1 + e^(-2u)), so gelu tanh is x / (1 + e^(-2u)) with
// u = sqrt(2 / pi) (x + 0.044715 x^3), silu x / (1 + e^-x), sigmoid 1 / (1 + e^-x); no
// cancellation (each is a quotient of positive terms), a few float32 ulps. e^z for z > 88 is
// taken at 88 (1.7e38: the result is then within 1e-37 of 0); below -87 it is 0.
function act4(x: v128, act: i32): v128 {
  let z = f32x4.neg(x);
  if (act == 3) {
    const x3 = f32x4.mul(f32x4.mul(x, x), x);
    z = f32x4.mul(
      f32x4.add(x, f32x4.mul(x3, f32x4.splat(0.044715))),
      f32x4.splat(-1.5957691216057308),
    );
  }
  const e = expNeg4(f32x4.min(z, f32x4.splat(88.0)));
  const den = f32x4.add(e, f32x4.splat(1.0));
  return f32x4.div(act == 6 ? f32x4.splat(1.0) : x, den);
}

// bias (0: none) added to each of `rows` rows of n, then the activation
export function finish(rows: i32, n: i32, bias: usize, act: i32, out: usize): void {
  if (bias != 0) {
    for (let r = 0; r < rows; r++) add(n, out + <usize>(r * n) * 4, bias, out + <usize>(r * n) * 4);
  }
  if (act != 0) activate(rows * n, out, act, out);
}
