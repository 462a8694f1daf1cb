/**
 * Plain-loop references for the package's kernels, in float64: matrix products with transposes
 * and the masked softmax with its gradient, plus deterministic inputs and the error measure.
 */
/** Deterministic values in [-1, 1). */
export function values(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2 ** 31 - 1;
  }
  return out;
}

/** op(a) · op(b) per batch slice, in float64. */
export function reference(
  a: Float32Array,
  b: Float32Array,
  [batch, m, n, k]: number[],
  ta: boolean,
  tb: boolean,
): Float64Array {
  const c = new Float64Array(batch * m * n);
  for (let s = 0; s < batch; s++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let sum = 0;
        for (let p = 0; p < k; p++) {
          const x = ta ? a[s * m * k + p * m + i] : a[s * m * k + i * k + p];
          const y = tb ? b[s * k * n + j * k + p] : b[s * k * n + p * n + j];
          sum += x * y;
        }
        c[s * m * n + i * n + j] = sum;
      }
  return c;
}

export function maxError(x: Float32Array, ref: Float64Array): number {
  if (x.length !== ref.length) throw new Error(`${x.length} values against ${ref.length}`);
  let worst = 0;
  for (let i = 0; i < x.length; i++) {
    const e = Math.abs(x[i] - ref[i]) / (1 + Math.abs(ref[i]));
    if (!(e <= worst)) worst = e; // NaN stays
  }
  return worst;
}

/** Masked softmax and its gradient per row, in float64 (fill per element: rows x cols). */
export function softmaxReference(
  x: Float32Array,
  fill: Float32Array,
  cols: number,
  dy: Float32Array,
) {
  const y = new Float64Array(x.length);
  const dx = new Float64Array(x.length);
  for (let r = 0; r < x.length / cols; r++) {
    const v = Array.from({length: cols}, (_, j) =>
      fill[r * cols + j] === 0 ? x[r * cols + j] : fill[r * cols + j],
    );
    const m = Math.max(...v);
    const e = v.map((t) => Math.exp(t - m));
    const sum = e.reduce((a, b) => a + b, 0);
    let dot = 0;
    for (let j = 0; j < cols; j++) {
      y[r * cols + j] = e[j] / sum;
      dot += (e[j] / sum) * dy[r * cols + j];
    }
    for (let j = 0; j < cols; j++) {
      const keep = fill[r * cols + j] === 0;
      dx[r * cols + j] = keep ? y[r * cols + j] * (dy[r * cols + j] - dot) : 0;
    }
  }
  return {y, dx};
}
