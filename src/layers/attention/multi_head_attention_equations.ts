/**
 * Keras' projection-equation builder for MultiHeadAttention (`_build_proj_equation`), reproduced
 * letter for letter so that weight layouts match Keras, and its `attention_axes` resolution.
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
