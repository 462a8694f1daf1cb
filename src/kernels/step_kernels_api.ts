/**
 * The kernels of a compiled decoding step (`generate`): the whole of a decoder's step as a few
 * calls on flat arrays in one WebAssembly memory. Two implementations share this interface: the
 * package's WebAssembly SIMD module (wasm/step_kernels.ts, on tfjs-wasm's heap where the weights
 * already are, or on a memory of its own for tfjs' other backends) and plain JavaScript loops on
 * the same memory (where WebAssembly SIMD is missing, and as the reference of the tests).
 *
 * Every array argument is a byte offset into `memory` (16-aligned where the caller allocates);
 * float32 unless stated. A weight offset of 0 means "absent" (a layer without bias, a layer
 * normalization without `scale` / `center`). Rows are positions `[batch * t]`, row-major, so a
 * step of `t` new positions in a batch of `B` has `B * t` rows. Outputs never alias inputs unless
 * a kernel says it may.
 */

/** Activations applied after a product (the codes cross the WebAssembly boundary). */
export const enum StepActivation {
  /** Identity. */
  None = 0,
  /** max(x, 0). */
  Relu = 1,
  /** Keras' `gelu(x, approximate=False)`: x / 2 * (1 + erf(x / sqrt 2)). */
  GeluErf = 2,
  /** Keras' `gelu(x, approximate=True)`: x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))). */
  GeluTanh = 3,
  /** x * sigmoid(x) (silu / swish). */
  Silu = 4,
  /** tanh(x). */
  Tanh = 5,
  /** 1 / (1 + exp(-x)). */
  Sigmoid = 6,
}

/** The kernels of a compiled decoding step; offsets are bytes in `memory`. */
export interface StepKernels {
  /** The memory every offset refers to. */
  readonly memory: WebAssembly.Memory;
  /**
   * Which implementation this is (reports and tests): the WebAssembly SIMD module ('simd'), the
   * same with its int8 products on relaxed SIMD ('simd-relaxed', equal sums), or JavaScript.
   */
  readonly kind: 'simd' | 'simd-relaxed' | 'js';
  /**
   * Layer normalization over the last axis, as Keras / tfjs: `out = (x - mean) / sqrt(var +
   * epsilon) * gamma + beta` with the biased variance; gamma / beta 0 = absent.
   * x, out `[rows, dim]`; out may alias x.
   */
  layerNorm(
    rows: number,
    dim: number,
    x: number,
    gamma: number,
    beta: number,
    epsilon: number,
    out: number,
  ): void;
  /**
   * RMS normalization (Llama): `out = x / sqrt(mean(x^2) + epsilon) * (offset + gamma)` (offset 0
   * when left out; Gemma's norms: 1); out may alias x.
   */
  rmsNorm(
    rows: number,
    dim: number,
    x: number,
    gamma: number,
    epsilon: number,
    out: number,
    offset?: number,
  ): void;
  /**
   * keras-hub's RotaryEmbedding on `heads` heads of `headDim` (even) values per row of x
   * `[B * t, heads * headDim]`: row `b * t + i` is at position `p = start + i`; for each
   * frequency `j < headDim / 2` the angle `a = float32(p * freqs[j])` (freqs: float32
   * `[headDim / 2]`), and each head's halves `x1 = x[j]`, `x2 = x[j + headDim / 2]` become
   * `x1 cos a - x2 sin a` and `x2 cos a + x1 sin a` (each product and sum in float32). out may
   * alias x.
   */
  rope(
    B: number,
    t: number,
    start: number,
    heads: number,
    headDim: number,
    x: number,
    freqs: number,
    out: number,
  ): void;
  /** `out = x * factor` over n values; out may alias x. */
  scale(n: number, x: number, factor: number, out: number): void;
  /**
   * `out [rows, n] = act(x [rows, k] · w [k, n] + bias [n])`: w is a Keras kernel (input axis
   * first, row-major); bias 0 = none.
   */
  dense(
    rows: number,
    k: number,
    n: number,
    x: number,
    w: number,
    bias: number,
    act: StepActivation,
    out: number,
  ): void;
  /**
   * `dense` for several rows (a prompt's prefill), with a scratch `work` of at least
   * {@link StepKernels.denseRowsWorkBytes} bytes (16-aligned; the caller allocates it once and
   * passes it to every call): the SIMD module packs the rows and each weight panel there before
   * its register tiles multiply them. Any row count is accepted (fewer than 4: as `dense`).
   */
  denseRows(
    rows: number,
    k: number,
    n: number,
    x: number,
    w: number,
    bias: number,
    act: StepActivation,
    out: number,
    work: number,
  ): void;
  /** Bytes of the scratch `denseRows` needs (independent of its sizes). */
  readonly denseRowsWorkBytes: number;
  /** `out [rows, n] = x [rows, k] · wᵀ` with w `[n, k]` (tied logits against an embedding table). */
  denseT(rows: number, k: number, n: number, x: number, w: number, out: number): void;
  /**
   * Keras 3's per-token input quantization (`abs_max_quantize` on the last axis, keras/src/
   * quantizers/quantizers.py), in float32 as Keras computes it: for each row `qs[r] = 127 /
   * (max |x[r, :]| + epsilon)` (Keras' epsilon, 1e-7), `q[r, :] = clip(round_half_even(x[r, :] *
   * qs[r]), -127, 127)` as int8. q int8 `[rows, k]`, qs `[rows]`.
   */
  quantizeRows(rows: number, k: number, x: number, q: number, qs: number): void;
  /**
   * Keras 3's int8 Dense: `out[r, n] = act(float32(sum_k q[r, k] * kernel[k, n]) / (qs[r] *
   * ws[n]) + bias[n])` with the sum exact in int32; w is the int8 kernel `[n, k]` (`w[n, k] =
   * kernel[k, n]`: each output's weights contiguous, e.g. packed by `transposeInt8`), ws float32
   * `[n]`.
   */
  denseInt8(
    rows: number,
    k: number,
    n: number,
    q: number,
    qs: number,
    w: number,
    ws: number,
    bias: number,
    act: StepActivation,
    out: number,
  ): void;
  /**
   * Keras 3's int8 Dense on the kernel in Keras' own layout, read where it is: `out[r, j] =
   * act(float32(sum_p q[r, p] * w[p, j]) / (qs[r] * ws[j]) + bias[j])`, w int8 `[k, n]` row-major
   * (row p: the n outputs' weights for input p), the sums exact in int32 and then the float32 steps
   * of `denseInt8`, so equal to `denseInt8` on the kernel packed transposed, bit for bit. q int8
   * `[rows, k]` and qs `[rows]` from `quantizeRows`, ws float32 `[n]`, bias `[n]` (0: none).
   */
  denseInt8KN(
    rows: number,
    k: number,
    n: number,
    q: number,
    qs: number,
    w: number,
    ws: number,
    bias: number,
    act: StepActivation,
    out: number,
  ): void;
  /** The int8 tied logits: `out[r, n] = float32(sum_k q[r, k] * w[n, k]) / (qs[r] * ws[n])`, w int8 `[n, k]`. */
  denseTInt8(
    rows: number,
    k: number,
    n: number,
    q: number,
    qs: number,
    w: number,
    ws: number,
    out: number,
  ): void;
  /**
   * Keras 3's int4 Dense (and EinsumDense) on its packed kernel, read where it is: `out[r, j] =
   * act(sum_p x[r, p] * kernel[p, j] + bias[j])`, x float32 `[rows, k]` (the layer is weight-only:
   * no input quantization). w: the kernel's bytes `[k, ceil(n / 2)]` as Keras packs them along the
   * output axis: byte `(p, j >> 1)` holds column j in its low nibble when j is even, in its high
   * nibble when odd (int4 two's complement, [-8, 7]; an odd n's last high nibble is padding).
   * blockSize > 0 (grouped, Keras' default 128): `kernel[p, j] = (q[p, j] - zero[g, j]) *
   * scale[g, j]` with `g = floor(p / blockSize)`, scale float32 and zero int8 `[ceil(k /
   * blockSize), n]`; the SIMD module takes each group's sum `sum_p x[p] * (q - zero)` in float32
   * and scales it once (within 1e-6 of the largest output of a float64 sum of Keras' dequantized
   * products). blockSize <= 0 (per channel): `kernel[p, j] = q[p, j] / scale[j]`, computed as Keras
   * does, `float32(sum_p x[p] * q[p, j]) / scale[j]`, scale `[n]`, zero unused (0). Every weight
   * is read once and unpacked in registers; scale and zero are read as Keras holds them (no copy
   * to make). bias `[n]` (0: none).
   */
  denseInt4KN(
    rows: number,
    k: number,
    n: number,
    x: number,
    w: number,
    scale: number,
    zero: number,
    blockSize: number,
    bias: number,
    act: StepActivation,
    out: number,
  ): void;
  /**
   * Keras 3's int4 tied logits (keras-hub's ReversibleEmbedding, `reverse=True`, on an int4
   * table): q int8 `[rows, k]` and qs `[rows]` from `quantizeRows` (Keras quantizes the inputs per
   * row), w the table's bytes `[n, ceil(k / 2)]`, packed along k as the Embedding holds them (value
   * d of row v in the low nibble of byte `(v, d >> 1)` when d is even, the high when odd).
   * blockSize > 0: `out[r, v] = float32(sum_g scale[v, g] * sum_{d in g} q[r, d] * (w[v, d] -
   * zero[v, g])) / qs[r]`, scale float32 and zero int8 `[n, ceil(k / blockSize)]`, each group's
   * sum exact in int32 (Keras: `sum_d q * float32((w - zero) * scale) / qs`, equal up to float32
   * rounding). blockSize <= 0: `out[r, v] = float32(sum_d q[r, d] * w[v, d]) / (qs[r] *
   * scale[v])`, scale `[n]`, zero unused: Keras' bit for bit.
   */
  denseTInt4(
    rows: number,
    k: number,
    n: number,
    q: number,
    qs: number,
    w: number,
    scale: number,
    zero: number,
    blockSize: number,
    out: number,
  ): void;
  /** `out = a + b` over n values; out may alias a or b. */
  add(n: number, a: number, b: number, out: number): void;
  /** `out = a * b` over n values (gated feed-forward); out may alias a or b. */
  mul(n: number, a: number, b: number, out: number): void;
  /** `out = act(x)` over n values; out may alias x. */
  activate(n: number, x: number, act: StepActivation, out: number): void;
  /** `out[r, :] = table[ids[r], :]`; ids int32 `[rows]`, table `[vocab, dim]`. */
  gather(rows: number, dim: number, ids: number, table: number, out: number): void;
  /**
   * int8 bytes transposed: `dst[j * ldd + p] = src[p * n + j]` for p < k, j < n (a kernel held as
   * int8 `[k, n]` packed for `denseInt8`; ldd = k for a whole kernel, a larger ldd packs k rows of
   * a wider one into their place); src and dst do not overlap, nothing is checked.
   */
  transposeInt8(k: number, n: number, src: number, dst: number, ldd: number): void;
  /** Keras 3's int8 Embedding lookup: `out[r, :] = table[ids[r], :] / scale[ids[r]]`, table int8. */
  gatherInt8(
    rows: number,
    dim: number,
    ids: number,
    table: number,
    scale: number,
    out: number,
  ): void;
  /**
   * Keras 3's int4 Embedding lookup: row `id = ids[r]` (int32) of the table, bytes `[vocab,
   * ceil(dim / 2)]` packed along dim (value d in the low nibble of byte `(id, d >> 1)` when d is
   * even, the high when odd), dequantized as Keras does, each value in one float32 rounding:
   * blockSize > 0, `out[r, d] = float32((q - zero[id, g]) * scale[id, g])` with `g = floor(d /
   * blockSize)`, scale float32 and zero int8 `[vocab, ceil(dim / blockSize)]`; blockSize <= 0,
   * `out[r, d] = float32(q) / scale[id]`, scale `[vocab]`, zero unused. Equal to Keras'.
   */
  gatherInt4(
    rows: number,
    dim: number,
    ids: number,
    table: number,
    scale: number,
    zero: number,
    blockSize: number,
    out: number,
  ): void;
  /**
   * Position embeddings, in place: `out[b * t + i, :] += table[start + i, :]` for each batch row b
   * (out `[B * t, dim]`, table `[sequenceLength, dim]`).
   */
  addPositions(B: number, t: number, dim: number, start: number, table: number, out: number): void;
  /**
   * Copies rows `src [B * t, width]` into `cache [B, maxLength, width]` at positions
   * `start .. start + t - 1` of each batch row.
   */
  writeCache(
    B: number,
    t: number,
    width: number,
    maxLength: number,
    start: number,
    src: number,
    cache: number,
  ): void;
  /**
   * Causal attention of `t` new queries per batch row over the cache: query i of batch row b
   * (position `start + i`) attends to positions `0 .. start + i` of `kCache` / `vCache`
   * `[B, maxLength, kvHeads * headDim]` whose `keyMask` byte `[B, maxLength]` is 1 (keyMask 0:
   * every key kept). q, out `[B * t, heads * headDim]`; query head h reads key / value head
   * `floor(h / (heads / kvHeads))`; scores are `scale * q · k`; softmax over the kept keys (a
   * masked key has weight exactly 0). The caller never passes a query whose keys are all masked.
   * work: scratch of at least `maxLength * 4` bytes. `window` > 0: a sliding window, the query at
   * position p sees only the keys at positions `p - window + 1 .. p` (keras-hub's Mistral and
   * Gemma 3 masks during `generate`); `softCap` > 0: each score becomes `softCap * tanh(score /
   * softCap)` (after the scale, before the mask and the softmax; Gemma's logit soft cap). Both 0
   * (or left out): none.
   */
  attend(
    B: number,
    t: number,
    heads: number,
    kvHeads: number,
    headDim: number,
    maxLength: number,
    start: number,
    q: number,
    kCache: number,
    vCache: number,
    keyMask: number,
    scale: number,
    work: number,
    out: number,
    window?: number,
    softCap?: number,
  ): void;
  /** `out[r]` (int32) = the first index of the largest of `x[r, :]` (ties: the lowest index). */
  argmax(rows: number, cols: number, x: number, out: number): void;
}
