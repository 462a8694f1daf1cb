// The key / value cache: new positions written into it.

/** Copies `src [B * t, width]` into `cache [B, maxLength, width]` at positions start .. start + t - 1. */
export function writeCache(
  B: i32,
  t: i32,
  width: i32,
  maxLength: i32,
  start: i32,
  src: usize,
  cache: usize,
): void {
  const row = <usize>width * 4;
  for (let b = 0; b < B; b++) {
    memory.copy(
      cache + (<usize>b * <usize>maxLength + <usize>start) * row,
      src + <usize>(b * t) * row,
      <usize>t * row,
    );
  }
}
