/**
 * Keras' einsum-equation builders for MultiHeadAttention (`_build_proj_equation`,
 * `_build_attention_equation`), reproduced letter for letter so that weight layouts, score
 * layouts and masks match Keras for any `attention_axes`.
 */

const LETTERS = 'abcdefghijklmnopqrstuvwxyz';

function letter(i: number): string {
  if (i >= LETTERS.length) {
    throw new Error(
      `MultiHeadAttention: inputs of this rank need more than ${LETTERS.length} einsum indices`,
    );
  }
  return LETTERS[i];
}

export interface ProjectionEquation {
  equation: string;
  biasAxes: string;
  outputRank: number;
}

/** `free` axes pass through, `bound` axes are contracted with the kernel, `output` axes are new. */
export function buildProjectionEquation(
  free: number,
  bound: number,
  output: number,
): ProjectionEquation {
  let input = '';
  let kernel = '';
  let out = '';
  let bias = '';
  let offset = 0;
  for (let i = 0; i < free; i++) {
    const c = letter(i + offset);
    input += c;
    out += c;
  }
  offset += free;
  for (let i = 0; i < bound; i++) {
    const c = letter(i + offset);
    input += c;
    kernel += c;
  }
  offset += bound;
  for (let i = 0; i < output; i++) {
    const c = letter(i + offset);
    kernel += c;
    out += c;
    bias += c;
  }
  return {equation: `${input},${kernel}->${out}`, biasAxes: bias, outputRank: out.length};
}

export interface AttentionEquations {
  /** `einsum(dot, key, query)` gives the scores. */
  dot: string;
  /** `einsum(combine, weights, value)` gives the attended values. */
  combine: string;
  scoresRank: number;
  /** Axes of the projected query that are batch-like (including the heads axis). */
  batchAxes: number[];
}

/**
 * @param rank rank of the projected query `[batch, ..., heads, keyDim]`.
 * @param attnAxes resolved, non-negative attention axes of the projected query.
 */
export function buildAttentionEquations(rank: number, attnAxes: number[]): AttentionEquations {
  let target = '';
  for (let i = 0; i < rank; i++) {
    target += letter(i);
  }
  const batchAxes: number[] = [];
  for (let i = 0; i < rank; i++) {
    if (!attnAxes.includes(i) && i !== rank - 1) {
      batchAxes.push(i);
    }
  }
  let offset = rank;
  let source = '';
  for (let i = 0; i < rank; i++) {
    if (batchAxes.includes(i) || i === rank - 1) {
      source += target[i];
    } else {
      source += letter(offset);
      offset++;
    }
  }
  const product =
    batchAxes.map((i) => target[i]).join('') +
    attnAxes.map((i) => target[i]).join('') +
    attnAxes.map((i) => source[i]).join('');
  return {
    dot: `${source},${target}->${product}`,
    combine: `${product},${source}->${target}`,
    scoresRank: product.length,
    batchAxes,
  };
}

/**
 * Resolves `attentionAxes` as Keras 3.12+ does: default all axes between batch and features;
 * negative axes count from the input rank (`(rank - 1) + axis` on the projected rank).
 *
 * @param projectedRank rank of the projected query (input rank + 1).
 */
export function resolveAttentionAxes(axes: number[] | null, projectedRank: number): number[] {
  if (axes == null) {
    const out: number[] = [];
    for (let i = 1; i < projectedRank - 2; i++) {
      out.push(i);
    }
    return out;
  }
  const resolved = axes.map((a) => (a >= 0 ? a : projectedRank - 1 + a));
  for (const a of resolved) {
    if (!(a >= 1 && a < projectedRank - 2)) {
      throw new Error(
        `MultiHeadAttention: attentionAxes ${JSON.stringify(axes)} must name axes between the batch ` +
          `axis and the feature axis of a rank-${projectedRank - 1} query (1 to ${projectedRank - 3}, or negative)`,
      );
    }
  }
  if (new Set(resolved).size !== resolved.length) {
    throw new Error(`MultiHeadAttention: attentionAxes ${JSON.stringify(axes)} repeats an axis`);
  }
  return resolved;
}
