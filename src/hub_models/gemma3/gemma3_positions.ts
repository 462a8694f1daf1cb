/** Gemma 3's rotary frequencies and sliding-window masks (keras-hub's semantics, pure functions). */

/**
 * keras-hub's RotaryEmbedding inverse frequencies for head size `H` with linear scaling:
 * `wavelength^(-2i/H) / scalingFactor` (i < H / 2), in float32 as keras computes them.
 */
export function gemma3InverseFrequencies(
  H: number,
  wavelength: number,
  scalingFactor: number,
): Float32Array {
  return Float32Array.from({length: H / 2}, (_, i) =>
    Math.fround(
      Math.fround(1 / Math.fround(Math.pow(wavelength, Math.fround((2 * i) / H)))) / scalingFactor,
    ),
  );
}

/**
 * keras-hub's sliding window of CachedGemma3Attention as a `[T, S]` 0 / 1 mask (row-major) for
 * `T` queries at positions `start ..` over `S` keys: causal models keep keys with
 * `|query - key| <= window - 1` (the causal mask cuts the later ones); bidirectional ones
 * (`bidirectional`, queries at 0 .. T - 1) keep `-floor(window / 2) <= query - key <= window -
 * floor(window / 2) - 1`.
 */
export function slidingWindowMask(
  T: number,
  S: number,
  start: number,
  window: number,
  bidirectional: boolean,
): Uint8Array {
  const out = new Uint8Array(T * S);
  const right = Math.floor(window / 2);
  const left = window - right - 1;
  for (let t = 0; t < T; t++) {
    const p = bidirectional ? t : start + t;
    for (let s = 0; s < S; s++) {
      const d = p - s;
      const keep = bidirectional ? d <= left && d >= -right : Math.abs(d) <= window - 1;
      out[t * S + s] = keep ? 1 : 0;
    }
  }
  return out;
}
