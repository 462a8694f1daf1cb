// Greedy sampling: the index of each row's largest value.

/** `out[r]` (int32) = the first index of the largest of `x[r, :]` (NaN never wins). */
export function argmax(rows: i32, cols: i32, x: usize, out: usize): void {
  for (let r = 0; r < rows; r++) {
    const xr = x + <usize>(r * cols) * 4;
    // the largest value (f32x4.max would let NaN win: pmax keeps the first unless the second is
    // larger, so NaN lanes are skipped)
    let mv = f32x4.splat(-Infinity);
    let j = 0;
    for (; j + 4 <= cols; j += 4) mv = f32x4.pmax(mv, v128.load(xr + <usize>j * 4));
    let m = f32x4.extract_lane(mv, 0);
    if (f32x4.extract_lane(mv, 1) > m) m = f32x4.extract_lane(mv, 1);
    if (f32x4.extract_lane(mv, 2) > m) m = f32x4.extract_lane(mv, 2);
    if (f32x4.extract_lane(mv, 3) > m) m = f32x4.extract_lane(mv, 3);
    for (; j < cols; j++) {
      const v = load<f32>(xr + <usize>j * 4);
      if (v > m) m = v;
    }
    // its first index
    let at = 0;
    const target = f32x4.splat(m);
    j = 0;
    for (; j + 4 <= cols; j += 4) {
      if (v128.any_true(f32x4.eq(v128.load(xr + <usize>j * 4), target))) break;
    }
    for (; j < cols; j++) {
      if (load<f32>(xr + <usize>j * 4) == m) {
        at = j;
        break;
      }
    }
    store<i32>(out + <usize>r * 4, at);
  }
}
