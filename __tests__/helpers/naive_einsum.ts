/**
 * A plain-loop einsum over flat arrays, independent of the library: iterates over every
 * assignment of every label and accumulates the product of the operands. Letters only, explicit
 * output; labels that appear only in the output are broadcast.
 */
export interface NaiveOperand {
  labels: string;
  data: ArrayLike<number>;
}

export function naiveEinsum(
  operands: NaiveOperand[],
  output: string,
  sizes: Record<string, number>,
): Float64Array {
  const all = [...new Set([...operands.map((o) => o.labels).join(''), ...output])];
  const strides = (labels: string) => {
    const s: number[] = new Array(labels.length).fill(1);
    for (let i = labels.length - 2; i >= 0; i--) {
      s[i] = s[i + 1] * sizes[labels[i + 1]];
    }
    return s;
  };
  const outSize = [...output].reduce((p, l) => p * sizes[l], 1);
  const out = new Float64Array(outSize);
  const opStrides = operands.map((o) => strides(o.labels));
  const outStrides = strides(output);
  const idx: Record<string, number> = {};
  const total = all.reduce((p, l) => p * sizes[l], 1);
  for (let flat = 0; flat < total; flat++) {
    let rem = flat;
    for (let i = all.length - 1; i >= 0; i--) {
      idx[all[i]] = rem % sizes[all[i]];
      rem = Math.floor(rem / sizes[all[i]]);
    }
    let prod = 1;
    operands.forEach((o, k) => {
      let off = 0;
      [...o.labels].forEach((l, j) => (off += idx[l] * opStrides[k][j]));
      prod *= o.data[off];
    });
    let o = 0;
    [...output].forEach((l, j) => (o += idx[l] * outStrides[j]));
    out[o] += prod;
  }
  return out;
}
