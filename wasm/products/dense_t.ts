import {hsum} from '../simd/sums';

// Float32 products against a transposed table w [n, k] (tied logits: the embedding table).

/** Rows of x up to which denseT streams the table row by row (above: 4-row tiles of it). */
const DENSET_STREAM_ROWS: i32 = 4;

// dot products of x[k] with four rows of w (stride ldw bytes) into out[0..3]
function dot4(k: i32, x: usize, w: usize, ldw: usize, out: usize): void {
  const k4 = <usize>(k & ~3) * 4;
  const w1 = w + ldw;
  const w2 = w1 + ldw;
  const w3 = w2 + ldw;
  let a0 = f32x4.splat(0),
    a1 = f32x4.splat(0),
    a2 = f32x4.splat(0),
    a3 = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k4; p += 16) {
    const xv = v128.load(x + p);
    a0 = f32x4.add(a0, f32x4.mul(xv, v128.load(w + p)));
    a1 = f32x4.add(a1, f32x4.mul(xv, v128.load(w1 + p)));
    a2 = f32x4.add(a2, f32x4.mul(xv, v128.load(w2 + p)));
    a3 = f32x4.add(a3, f32x4.mul(xv, v128.load(w3 + p)));
  }
  let s0 = hsum(a0),
    s1 = hsum(a1),
    s2 = hsum(a2),
    s3 = hsum(a3);
  const all = <usize>k * 4;
  for (; p < all; p += 4) {
    const xs = load<f32>(x + p);
    s0 += xs * load<f32>(w + p);
    s1 += xs * load<f32>(w1 + p);
    s2 += xs * load<f32>(w2 + p);
    s3 += xs * load<f32>(w3 + p);
  }
  store<f32>(out, s0);
  store<f32>(out, s1, 4);
  store<f32>(out, s2, 8);
  store<f32>(out, s3, 12);
}

// two rows of x against four rows of w: out rows (stride ldo bytes), columns 0..3
function dot2x4(k: i32, x: usize, ldx: usize, w: usize, ldw: usize, out: usize, ldo: usize): void {
  const k4 = <usize>(k & ~3) * 4;
  const x1 = x + ldx;
  const w1 = w + ldw;
  const w2 = w1 + ldw;
  const w3 = w2 + ldw;
  let a0 = f32x4.splat(0),
    a1 = f32x4.splat(0),
    a2 = f32x4.splat(0),
    a3 = f32x4.splat(0);
  let b0 = f32x4.splat(0),
    b1 = f32x4.splat(0),
    b2 = f32x4.splat(0),
    b3 = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k4; p += 16) {
    const xa = v128.load(x + p);
    const xb = v128.load(x1 + p);
    const v0 = v128.load(w + p);
    a0 = f32x4.add(a0, f32x4.mul(xa, v0));
    b0 = f32x4.add(b0, f32x4.mul(xb, v0));
    const v1 = v128.load(w1 + p);
    a1 = f32x4.add(a1, f32x4.mul(xa, v1));
    b1 = f32x4.add(b1, f32x4.mul(xb, v1));
    const v2 = v128.load(w2 + p);
    a2 = f32x4.add(a2, f32x4.mul(xa, v2));
    b2 = f32x4.add(b2, f32x4.mul(xb, v2));
    const v3 = v128.load(w3 + p);
    a3 = f32x4.add(a3, f32x4.mul(xa, v3));
    b3 = f32x4.add(b3, f32x4.mul(xb, v3));
  }
  let s0 = hsum(a0),
    s1 = hsum(a1),
    s2 = hsum(a2),
    s3 = hsum(a3);
  let t0 = hsum(b0),
    t1 = hsum(b1),
    t2 = hsum(b2),
    t3 = hsum(b3);
  const all = <usize>k * 4;
  for (; p < all; p += 4) {
    const xs = load<f32>(x + p);
    const ys = load<f32>(x1 + p);
    const u0 = load<f32>(w + p);
    const u1 = load<f32>(w1 + p);
    const u2 = load<f32>(w2 + p);
    const u3 = load<f32>(w3 + p);
    s0 += xs * u0;
    s1 += xs * u1;
    s2 += xs * u2;
    s3 += xs * u3;
    t0 += ys * u0;
    t1 += ys * u1;
    t2 += ys * u2;
    t3 += ys * u3;
  }
  store<f32>(out, s0);
  store<f32>(out, s1, 4);
  store<f32>(out, s2, 8);
  store<f32>(out, s3, 12);
  const o1 = out + ldo;
  store<f32>(o1, t0);
  store<f32>(o1, t1, 4);
  store<f32>(o1, t2, 8);
  store<f32>(o1, t3, 12);
}

function dot1(k: i32, x: usize, w: usize): f32 {
  const k4 = <usize>(k & ~3) * 4;
  let a = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k4; p += 16) a = f32x4.add(a, f32x4.mul(v128.load(x + p), v128.load(w + p)));
  let s = hsum(a);
  const all = <usize>k * 4;
  for (; p < all; p += 4) s += load<f32>(x + p) * load<f32>(w + p);
  return s;
}

// x[k] · w[k] with four accumulators of 16 floats per pass (one sequential stream through w; the
// row of x stays in L1), the horizontal adds at the end
function dotRow(k: i32, x: usize, w: usize): f32 {
  const k16 = <usize>(k & ~15) * 4;
  let a0 = f32x4.splat(0),
    a1 = f32x4.splat(0),
    a2 = f32x4.splat(0),
    a3 = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k16; p += 64) {
    a0 = f32x4.add(a0, f32x4.mul(v128.load(x + p), v128.load(w + p)));
    a1 = f32x4.add(a1, f32x4.mul(v128.load(x + p, 16), v128.load(w + p, 16)));
    a2 = f32x4.add(a2, f32x4.mul(v128.load(x + p, 32), v128.load(w + p, 32)));
    a3 = f32x4.add(a3, f32x4.mul(v128.load(x + p, 48), v128.load(w + p, 48)));
  }
  const all = <usize>k * 4;
  const k4 = <usize>(k & ~3) * 4;
  for (; p < k4; p += 16) a0 = f32x4.add(a0, f32x4.mul(v128.load(x + p), v128.load(w + p)));
  let s = hsum(f32x4.add(f32x4.add(a0, a1), f32x4.add(a2, a3)));
  for (; p < all; p += 4) s += load<f32>(x + p) * load<f32>(w + p);
  return s;
}

// x[k] · w[k] and y[k] · w[k] (two rows of x against one row of w), two accumulators each of 8
// floats per pass, into out and out + ldo
function dotRow2(k: i32, x: usize, y: usize, w: usize, out: usize, ldo: usize): void {
  const k8 = <usize>(k & ~7) * 4;
  let a0 = f32x4.splat(0),
    a1 = f32x4.splat(0),
    b0 = f32x4.splat(0),
    b1 = f32x4.splat(0);
  let p: usize = 0;
  for (; p < k8; p += 32) {
    const u0 = v128.load(w + p);
    const u1 = v128.load(w + p, 16);
    a0 = f32x4.add(a0, f32x4.mul(v128.load(x + p), u0));
    a1 = f32x4.add(a1, f32x4.mul(v128.load(x + p, 16), u1));
    b0 = f32x4.add(b0, f32x4.mul(v128.load(y + p), u0));
    b1 = f32x4.add(b1, f32x4.mul(v128.load(y + p, 16), u1));
  }
  const all = <usize>k * 4;
  const k4 = <usize>(k & ~3) * 4;
  for (; p < k4; p += 16) {
    const u = v128.load(w + p);
    a0 = f32x4.add(a0, f32x4.mul(v128.load(x + p), u));
    b0 = f32x4.add(b0, f32x4.mul(v128.load(y + p), u));
  }
  let s = hsum(f32x4.add(a0, a1));
  let t = hsum(f32x4.add(b0, b1));
  for (; p < all; p += 4) {
    const u = load<f32>(w + p);
    s += load<f32>(x + p) * u;
    t += load<f32>(y + p) * u;
  }
  store<f32>(out, s);
  store<f32>(out + ldo, t);
}

// rows of x against every row of w [n, k]: the table read once, front to back, each of its rows
// (in L1) against every row of x, two at a time
function denseTStream(rows: i32, k: i32, n: i32, x: usize, w: usize, out: usize): void {
  const ldw = <usize>k * 4;
  const ldo = <usize>n * 4;
  const rows2 = rows & ~1;
  for (let j = 0; j < n; j++) {
    const wj = w + <usize>j * ldw;
    const oj = out + <usize>j * 4;
    let r = 0;
    for (; r < rows2; r += 2) {
      const xr = x + <usize>r * ldw;
      dotRow2(k, xr, xr + ldw, wj, oj + <usize>r * ldo, ldo);
    }
    if (r < rows) store<f32>(oj + <usize>r * ldo, dotRow(k, x + <usize>r * ldw, wj));
  }
}

/**
 * `out [rows, n] = x [rows, k] · wᵀ` with w `[n, k]`: four rows of w at a time (in L1 while every
 * row of x passes, two rows of x at a time), so w is read from memory once.
 */
export function denseT(rows: i32, k: i32, n: i32, x: usize, w: usize, out: usize): void {
  if (rows <= DENSET_STREAM_ROWS) {
    denseTStream(rows, k, n, x, w, out);
    return;
  }
  const ldx = <usize>k * 4;
  const ldo = <usize>n * 4;
  const n4 = n & ~3;
  const rows2 = rows & ~1;
  for (let j = 0; j < n4; j += 4) {
    const wj = w + <usize>j * ldx;
    let r = 0;
    for (; r < rows2; r += 2) {
      dot2x4(k, x + <usize>r * ldx, ldx, wj, ldx, out + <usize>r * ldo + <usize>j * 4, ldo);
    }
    if (r < rows) dot4(k, x + <usize>r * ldx, wj, ldx, out + <usize>r * ldo + <usize>j * 4);
  }
  for (let j = n4; j < n; j++) {
    for (let r = 0; r < rows; r++) {
      store<f32>(
        out + <usize>r * ldo + <usize>j * 4,
        dot1(k, x + <usize>r * ldx, w + <usize>j * ldx),
      );
    }
  }
}
