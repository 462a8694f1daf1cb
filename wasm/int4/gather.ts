// Keras 3's int4 Embedding lookup: a row of the table, bytes `[vocab, ceil(dim / 2)]` packed along
// dim (value d in the low nibble of byte d >> 1 when even, the high when odd; an odd dim's last high
// nibble is padding), dequantized as Keras does, each value in one float32 rounding: grouped along
// dim, `f32((q - zero[id, g]) * scale[id, g])` with g = floor(d / blockSize); per channel,
// `f32(q) / scale[id]`. The row's values are unpacked to float32 first (32 a step), then scaled in
// place a group at a time.

// the int4 row of dim values at src (ceil(dim / 2) bytes) as float32 q at dst: a 16-byte step
// XORs 0x88 (u = q + 8 in each nibble), splits the low and high nibbles, interleaves them back to
// index order and subtracts 8, then widens to i32 and converts
function unpackInt4Row(dim: i32, src: usize, dst: usize): void {
  const flip = i8x16.splat(-120); // 0x88
  const low = i8x16.splat(15);
  const eight = i8x16.splat(8);
  let d = 0;
  for (; d + 32 <= dim; d += 32) {
    const b = v128.xor(v128.load(src + <usize>(d >> 1)), flip);
    const lo = v128.and(b, low);
    const hi = v128.and(i16x8.shr_u(b, 4), low);
    const q0 = i8x16.sub(
      i8x16.shuffle(lo, hi, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23),
      eight,
    );
    const q1 = i8x16.sub(
      i8x16.shuffle(lo, hi, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31),
      eight,
    );
    const o = dst + <usize>d * 4;
    let h = i16x8.extend_low_i8x16_s(q0);
    v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h)));
    v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h)), 16);
    h = i16x8.extend_high_i8x16_s(q0);
    v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h)), 32);
    v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h)), 48);
    h = i16x8.extend_low_i8x16_s(q1);
    v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h)), 64);
    v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h)), 80);
    h = i16x8.extend_high_i8x16_s(q1);
    v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h)), 96);
    v128.store(o, f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h)), 112);
  }
  for (; d < dim; d++) {
    // the nibble into the top of an i32, then down with its sign
    const shift = (d & 1) == 0 ? 28 : 24;
    const q = ((<i32>load<u8>(src + <usize>(d >> 1))) << shift) >> 28;
    store<f32>(dst + <usize>d * 4, <f32>q);
  }
}

// v[i] = (v[i] - z) * s over n values (a group); per channel (grouped false): v[i] / s
function scaleInt4Group(n: i32, z: f32, s: f32, grouped: bool, v: usize): void {
  const zv = f32x4.splat(z);
  const sv = f32x4.splat(s);
  let i = 0;
  for (; i + 4 <= n; i += 4) {
    const o = v + <usize>i * 4;
    const q = v128.load(o);
    v128.store(o, grouped ? f32x4.mul(f32x4.sub(q, zv), sv) : f32x4.div(q, sv));
  }
  for (; i < n; i++) {
    const o = v + <usize>i * 4;
    const q = load<f32>(o);
    store<f32>(o, grouped ? (q - z) * s : q / s);
  }
}

/**
 * Keras 3's int4 Embedding: `out[r, d] = f32((q - zero[id, g]) * scale[id, g])` (blockSize > 0,
 * g = floor(d / blockSize), scale float32 and zero int8 `[vocab, ceil(dim / blockSize)]`) or
 * `f32(q) / scale[id]` (blockSize <= 0, scale `[vocab]`, zero unused), q the int4 value d of row
 * id = ids[r] of the table, bytes `[vocab, ceil(dim / 2)]`; ids int32.
 */
export function gatherInt4(
  rows: i32,
  dim: i32,
  ids: usize,
  table: usize,
  scale: usize,
  zero: usize,
  blockSize: i32,
  out: usize,
): void {
  const grouped = blockSize > 0;
  const bs = grouped ? min(blockSize, dim) : dim;
  const groups = grouped ? (dim + bs - 1) / bs : 1;
  for (let r = 0; r < rows; r++) {
    const id = <usize>load<i32>(ids + <usize>r * 4);
    const dst = out + <usize>(r * dim) * 4;
    unpackInt4Row(dim, table + id * <usize>((dim + 1) >> 1), dst);
    for (let g = 0; g < groups; g++) {
      const at = id * <usize>groups + <usize>g;
      const d0 = g * bs;
      scaleInt4Group(
        min(bs, dim - d0),
        grouped ? <f32>load<i8>(zero + at) : 0,
        load<f32>(scale + at * 4),
        grouped,
        dst + <usize>d0 * 4,
      );
    }
  }
}
