import {expNeg1, expNeg4} from '../simd/exp_neg';
import {hsum} from '../simd/sums';
import {tanh64} from '../ops/activations';

// Attention over the cache.

/**
 * Causal attention of t new queries per batch row over the cache (see StepKernels.attend): per
 * query head the scores `scale * q · k` of positions 0 .. start + i, or of the last `window` of
 * them (> 0), each soft-capped (`softCap` > 0: softCap * tanh(s / softCap)) (a masked key: -Infinity),
 * their softmax after subtracting the largest (a masked key's weight is exactly 0), and the
 * weighted sum of the values. `work`: maxLength floats.
 */
export function attend(
  B: i32,
  t: i32,
  heads: i32,
  kvHeads: i32,
  headDim: i32,
  maxLength: i32,
  start: i32,
  q: usize,
  kCache: usize,
  vCache: usize,
  keyMask: usize,
  scale: f32,
  work: usize,
  out: usize,
  window: i32,
  softCap: f32,
): void {
  const group = heads / kvHeads;
  const kvRow = <usize>(kvHeads * headDim) * 4;
  const qRow = <usize>(heads * headDim) * 4;
  const hBytes = <usize>headDim * 4;
  const hd4 = <usize>(headDim & ~3) * 4;
  for (let b = 0; b < B; b++) {
    const kb = kCache + <usize>b * <usize>maxLength * kvRow;
    const vb = vCache + <usize>b * <usize>maxLength * kvRow;
    const mb = keyMask + <usize>b * <usize>maxLength;
    for (let i = 0; i < t; i++) {
      const count = start + i + 1;
      // a sliding window: positions count - window .. count - 1
      const first = window > 0 ? max(0, count - window) : 0;
      const qr = q + <usize>(b * t + i) * qRow;
      const or = out + <usize>(b * t + i) * qRow;
      for (let h = 0; h < heads; h++) {
        const kvOff = <usize>(h / group) * hBytes;
        const qh = qr + <usize>h * hBytes;
        // scores
        let m: f32 = -Infinity;
        for (let pos = first; pos < count; pos++) {
          let s: f32 = -Infinity;
          if (keyMask == 0 || load<u8>(mb + <usize>pos) != 0) {
            const kp = kb + <usize>pos * kvRow + kvOff;
            let a = f32x4.splat(0);
            let d: usize = 0;
            for (; d < hd4; d += 16)
              a = f32x4.add(a, f32x4.mul(v128.load(qh + d), v128.load(kp + d)));
            let dot = hsum(a);
            for (; d < hBytes; d += 4) dot += load<f32>(qh + d) * load<f32>(kp + d);
            s = scale * dot;
            if (softCap > 0) s = softCap * <f32>tanh64(<f64>(s / softCap));
            m = max(m, s);
          }
          store<f32>(work + <usize>pos * 4, s);
        }
        // exp(s - max), masked keys exactly 0
        const mv = f32x4.splat(m);
        let sv = f32x4.splat(0);
        let pos = first;
        for (; pos + 4 <= count; pos += 4) {
          const o = work + <usize>pos * 4;
          const e = expNeg4(f32x4.sub(v128.load(o), mv));
          v128.store(o, e);
          sv = f32x4.add(sv, e);
        }
        let sum = hsum(sv);
        for (; pos < count; pos++) {
          const o = work + <usize>pos * 4;
          const e = expNeg1(load<f32>(o) - m);
          store<f32>(o, e);
          sum += e;
        }
        // weights · values
        const oh = or + <usize>h * hBytes;
        memory.fill(oh, 0, hBytes);
        for (pos = first; pos < count; pos++) {
          if (keyMask != 0 && load<u8>(mb + <usize>pos) == 0) continue;
          const wgt = load<f32>(work + <usize>pos * 4) / sum;
          const wv = f32x4.splat(wgt);
          const vp = vb + <usize>pos * kvRow + kvOff;
          let d: usize = 0;
          for (; d < hd4; d += 16) {
            v128.store(oh + d, f32x4.add(v128.load(oh + d), f32x4.mul(wv, v128.load(vp + d))));
          }
          for (; d < hBytes; d += 4)
            store<f32>(oh + d, load<f32>(oh + d) + wgt * load<f32>(vp + d));
        }
      }
    }
  }
}
