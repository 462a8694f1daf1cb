import {expNeg1, expNeg4} from '../simd/exp_neg';
import {hsum} from '../simd/sums';
import {tanh64} from '../ops/activations';

// Attention over the cache.

// stores position `pos`'s score `s` (soft-capped; -Infinity for a masked key) into `work` and
// returns the running largest (small: the optimizer inlines it)
function score(
  m: f32,
  work: usize,
  mb: usize,
  keyMask: usize,
  pos: i32,
  s: f32,
  softCap: f32,
): f32 {
  if (keyMask != 0 && load<u8>(mb + <usize>pos) == 0) {
    store<f32>(work + <usize>pos * 4, -Infinity);
    return m;
  }
  if (softCap > 0) s = softCap * <f32>tanh64(<f64>(s / softCap));
  store<f32>(work + <usize>pos * 4, s);
  return max(m, s);
}

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
        // scores: four positions at a time (four independent sums), then one at a time
        let m: f32 = -Infinity;
        let pos = first;
        for (; pos + 4 <= count && hd4 == hBytes; pos += 4) {
          const kp = kb + <usize>pos * kvRow + kvOff;
          let a0 = f32x4.splat(0);
          let a1 = f32x4.splat(0);
          let a2 = f32x4.splat(0);
          let a3 = f32x4.splat(0);
          for (let d: usize = 0; d < hd4; d += 16) {
            const qv = v128.load(qh + d);
            a0 = f32x4.add(a0, f32x4.mul(qv, v128.load(kp + d)));
            a1 = f32x4.add(a1, f32x4.mul(qv, v128.load(kp + kvRow + d)));
            a2 = f32x4.add(a2, f32x4.mul(qv, v128.load(kp + 2 * kvRow + d)));
            a3 = f32x4.add(a3, f32x4.mul(qv, v128.load(kp + 3 * kvRow + d)));
          }
          m = score(m, work, mb, keyMask, pos, scale * hsum(a0), softCap);
          m = score(m, work, mb, keyMask, pos + 1, scale * hsum(a1), softCap);
          m = score(m, work, mb, keyMask, pos + 2, scale * hsum(a2), softCap);
          m = score(m, work, mb, keyMask, pos + 3, scale * hsum(a3), softCap);
        }
        for (; pos < count; pos++) {
          const kp = kb + <usize>pos * kvRow + kvOff;
          let a = f32x4.splat(0);
          let d: usize = 0;
          for (; d < hd4; d += 16)
            a = f32x4.add(a, f32x4.mul(v128.load(qh + d), v128.load(kp + d)));
          let dot = hsum(a);
          for (; d < hBytes; d += 4) dot += load<f32>(qh + d) * load<f32>(kp + d);
          m = score(m, work, mb, keyMask, pos, scale * dot, softCap);
        }
        // exp(s - max), masked keys exactly 0
        const mv = f32x4.splat(m);
        let sv = f32x4.splat(0);
        pos = first;
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
        // weights · values: 32 values of the head at a time summed in registers over the
        // positions, then the rest 4 and 1 at a time into the output
        const oh = or + <usize>h * hBytes;
        const h32 = hBytes & ~(<usize>127);
        for (let d0: usize = 0; d0 < h32; d0 += 128) {
          let o0 = f32x4.splat(0),
            o1 = f32x4.splat(0),
            o2 = f32x4.splat(0),
            o3 = f32x4.splat(0),
            o4 = f32x4.splat(0),
            o5 = f32x4.splat(0),
            o6 = f32x4.splat(0),
            o7 = f32x4.splat(0);
          for (pos = first; pos < count; pos++) {
            const wgt = load<f32>(work + <usize>pos * 4) / sum;
            // a masked key's weight is exactly 0: adding 0 times a finite value changes nothing
            // but -0 (skipped, as before)
            if (keyMask != 0 && load<u8>(mb + <usize>pos) == 0) continue;
            const wv = f32x4.splat(wgt);
            const vp = vb + <usize>pos * kvRow + kvOff + d0;
            o0 = f32x4.add(o0, f32x4.mul(wv, v128.load(vp)));
            o1 = f32x4.add(o1, f32x4.mul(wv, v128.load(vp, 16)));
            o2 = f32x4.add(o2, f32x4.mul(wv, v128.load(vp, 32)));
            o3 = f32x4.add(o3, f32x4.mul(wv, v128.load(vp, 48)));
            o4 = f32x4.add(o4, f32x4.mul(wv, v128.load(vp, 64)));
            o5 = f32x4.add(o5, f32x4.mul(wv, v128.load(vp, 80)));
            o6 = f32x4.add(o6, f32x4.mul(wv, v128.load(vp, 96)));
            o7 = f32x4.add(o7, f32x4.mul(wv, v128.load(vp, 112)));
          }
          const to = oh + d0;
          v128.store(to, o0);
          v128.store(to, o1, 16);
          v128.store(to, o2, 32);
          v128.store(to, o3, 48);
          v128.store(to, o4, 64);
          v128.store(to, o5, 80);
          v128.store(to, o6, 96);
          v128.store(to, o7, 112);
        }
        if (h32 == hBytes) continue;
        memory.fill(oh + h32, 0, hBytes - h32);
        for (pos = first; pos < count; pos++) {
          if (keyMask != 0 && load<u8>(mb + <usize>pos) == 0) continue;
          const wgt = load<f32>(work + <usize>pos * 4) / sum;
          const wv = f32x4.splat(wgt);
          const vp = vb + <usize>pos * kvRow + kvOff;
          let d: usize = h32;
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
