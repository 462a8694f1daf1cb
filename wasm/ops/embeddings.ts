import {add} from './elementwise';

// Embeddings: rows of a table (float32 or Keras 3's int8) by id, and position embeddings added.

/** `out[r, :] = table[ids[r], :]`; ids int32. */
export function gather(rows: i32, dim: i32, ids: usize, table: usize, out: usize): void {
  const bytes = <usize>dim * 4;
  for (let r = 0; r < rows; r++) {
    const id = <usize>load<i32>(ids + <usize>r * 4);
    memory.copy(out + <usize>r * bytes, table + id * bytes, bytes);
  }
}

/** Keras 3's int8 Embedding: `out[r, :] = f32(table[ids[r], :]) / scale[ids[r]]`, table int8. */
export function gatherInt8(
  rows: i32,
  dim: i32,
  ids: usize,
  table: usize,
  scale: usize,
  out: usize,
): void {
  for (let r = 0; r < rows; r++) {
    const id = <usize>load<i32>(ids + <usize>r * 4);
    const src = table + id * <usize>dim;
    const dst = out + <usize>(r * dim) * 4;
    const s = load<f32>(scale + id * 4);
    const sv = f32x4.splat(s);
    let j = 0;
    for (; j + 16 <= dim; j += 16) {
      const b = v128.load(src + <usize>j);
      const l = i16x8.extend_low_i8x16_s(b);
      const h = i16x8.extend_high_i8x16_s(b);
      const o = dst + <usize>j * 4;
      v128.store(o, f32x4.div(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(l)), sv));
      v128.store(o, f32x4.div(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(l)), sv), 16);
      v128.store(o, f32x4.div(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_s(h)), sv), 32);
      v128.store(o, f32x4.div(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_s(h)), sv), 48);
    }
    for (; j < dim; j++) {
      store<f32>(dst + <usize>j * 4, <f32>load<i8>(src + <usize>j) / s);
    }
  }
}

/** In place: `out[b * t + i, :] += table[start + i, :]` for each batch row b. */
export function addPositions(B: i32, t: i32, dim: i32, start: i32, table: usize, out: usize): void {
  const bytes = <usize>dim * 4;
  for (let b = 0; b < B; b++) {
    for (let i = 0; i < t; i++) {
      const o = out + <usize>(b * t + i) * bytes;
      add(dim, o, table + <usize>(start + i) * bytes, o);
    }
  }
}
