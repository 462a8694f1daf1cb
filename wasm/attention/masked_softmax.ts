// The layers' masked softmax over rows and its gradient (src/kernels/fused_softmax.ts on tfjs'
// cpu backend): masked logits replaced by their fill, exp through the shared expNeg.

import {expNeg1, expNeg4} from '../simd/exp_neg';

/**
 * Masked softmax over rows of `cols`: where the fill is 0 the logit is kept, elsewhere replaced
 * by the fill; then softmax. Row r's fill starts at float offset fillRows[r] (i32s at
 * `fillRows`) of `fill`: `cols` values when perElement, else one for the whole row.
 */
export function maskedSoftmax(
  rows: i32,
  cols: i32,
  x: usize,
  fill: usize,
  fillRows: usize,
  perElement: bool,
  out: usize,
): void {
  const zero = f32x4.splat(0);
  const vecEnd = cols & ~3;
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * cols) * 4;
    const yr = out + <usize>(r * cols) * 4;
    const fr = fill + <usize>load<i32>(fillRows + <usize>r * 4) * 4;
    let maxv = f32x4.splat(-Infinity);
    let maxs: f32 = -Infinity;
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      const f = perElement ? v128.load(fr + o) : v128.load32_splat(fr);
      const v = v128.bitselect(v128.load(xr + o), f, f32x4.eq(f, zero));
      v128.store(yr + o, v);
      maxv = f32x4.max(maxv, v);
    }
    for (let j = vecEnd; j < cols; j++) {
      const f = load<f32>(fr + (perElement ? <usize>j * 4 : 0));
      const v = f == 0 ? load<f32>(xr + <usize>j * 4) : f;
      store<f32>(yr + <usize>j * 4, v);
      maxs = max(maxs, v);
    }
    const m = max(
      max(
        max(f32x4.extract_lane(maxv, 0), f32x4.extract_lane(maxv, 1)),
        max(f32x4.extract_lane(maxv, 2), f32x4.extract_lane(maxv, 3)),
      ),
      maxs,
    );
    const mv = f32x4.splat(m);
    let sumv = f32x4.splat(0);
    let sums: f32 = 0;
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      const e = expNeg4(f32x4.sub(v128.load(yr + o), mv));
      v128.store(yr + o, e);
      sumv = f32x4.add(sumv, e);
    }
    for (let j = vecEnd; j < cols; j++) {
      const e = expNeg1(load<f32>(yr + <usize>j * 4) - m);
      store<f32>(yr + <usize>j * 4, e);
      sums += e;
    }
    const sum =
      f32x4.extract_lane(sumv, 0) +
      f32x4.extract_lane(sumv, 1) +
      f32x4.extract_lane(sumv, 2) +
      f32x4.extract_lane(sumv, 3) +
      sums;
    const inv: f32 = 1 / sum;
    const iv = f32x4.splat(inv);
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      v128.store(yr + o, f32x4.mul(v128.load(yr + o), iv));
    }
    for (let j = vecEnd; j < cols; j++)
      store<f32>(yr + <usize>j * 4, load<f32>(yr + <usize>j * 4) * inv);
  }
}

/**
 * The gradient of {@link maskedSoftmax}: out = y * (dy - Σ dy·y) where the fill is 0, else 0
 * (a replaced logit does not reach the output).
 */
export function maskedSoftmaxGrad(
  rows: i32,
  cols: i32,
  dy: usize,
  y: usize,
  fill: usize,
  fillRows: usize,
  perElement: bool,
  out: usize,
): void {
  const zero = f32x4.splat(0);
  const vecEnd = cols & ~3;
  for (let r = 0; r < rows; r++) {
    const base = <usize>(r * cols) * 4;
    const gr = dy + base;
    const pr = y + base;
    const or = out + base;
    const fr = fill + <usize>load<i32>(fillRows + <usize>r * 4) * 4;
    let dotv = f32x4.splat(0);
    let dots: f32 = 0;
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      dotv = f32x4.add(dotv, f32x4.mul(v128.load(gr + o), v128.load(pr + o)));
    }
    for (let j = vecEnd; j < cols; j++)
      dots += load<f32>(gr + <usize>j * 4) * load<f32>(pr + <usize>j * 4);
    const dot =
      f32x4.extract_lane(dotv, 0) +
      f32x4.extract_lane(dotv, 1) +
      f32x4.extract_lane(dotv, 2) +
      f32x4.extract_lane(dotv, 3) +
      dots;
    const dv = f32x4.splat(dot);
    for (let j = 0; j < vecEnd; j += 4) {
      const o = <usize>j * 4;
      const f = perElement ? v128.load(fr + o) : v128.load32_splat(fr);
      const v = f32x4.mul(v128.load(pr + o), f32x4.sub(v128.load(gr + o), dv));
      v128.store(or + o, v128.and(v, f32x4.eq(f, zero)));
    }
    for (let j = vecEnd; j < cols; j++) {
      const f = load<f32>(fr + (perElement ? <usize>j * 4 : 0));
      store<f32>(
        or + <usize>j * 4,
        f == 0 ? load<f32>(pr + <usize>j * 4) * (load<f32>(gr + <usize>j * 4) - dot) : 0,
      );
    }
  }
}
