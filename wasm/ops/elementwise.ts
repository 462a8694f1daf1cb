// elementwise

/** `out = a + b` over n values; out may alias a or b. */
export function add(n: i32, a: usize, b: usize, out: usize): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i * 4;
    v128.store(out + o, f32x4.add(v128.load(a + o), v128.load(b + o)));
  }
  for (; i < n; i++) {
    const o = <usize>i * 4;
    store<f32>(out + o, load<f32>(a + o) + load<f32>(b + o));
  }
}

/** `out = a * b` over n values; out may alias a or b. */
export function mul(n: i32, a: usize, b: usize, out: usize): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i * 4;
    v128.store(out + o, f32x4.mul(v128.load(a + o), v128.load(b + o)));
  }
  for (; i < n; i++) {
    const o = <usize>i * 4;
    store<f32>(out + o, load<f32>(a + o) * load<f32>(b + o));
  }
}

/** `out = x * factor` over n values; out may alias x. */
export function scale(n: i32, x: usize, factor: f32, out: usize): void {
  const fv = f32x4.splat(factor);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = <usize>i * 4;
    v128.store(out + o, f32x4.mul(v128.load(x + o), fv));
  }
  for (; i < n; i++) {
    const o = <usize>i * 4;
    store<f32>(out + o, load<f32>(x + o) * factor);
  }
}
