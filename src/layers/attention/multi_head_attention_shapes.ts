/**
 * MultiHeadAttention's shape rules, as Keras states them: query, value and key of one rank, value
 * and key equal but for their last axis, and the output's last axes (`outputShape`, or the
 * query's last dimension).
 */
import {intList} from './multi_head_attention_args';
import {formatShape, Shape} from '../engine/shapes';

/** Throws, naming layer `name`, unless query, value and key fit together. */
export function checkAttentionShapes(
  name: string,
  {query, value, key}: {query: Shape; value: Shape; key: Shape},
): void {
  if (query.length !== value.length || key.length !== value.length) {
    throw new Error(
      `Layer '${name}': query, value and key must have the same rank; received query ` +
        `${formatShape(query)}, value ${formatShape(value)}, key ${formatShape(key)}`,
    );
  }
  const mismatch = value
    .slice(1, -1)
    .some((d, i) => d != null && key[i + 1] != null && d !== key[i + 1]);
  if (mismatch) {
    throw new Error(
      `Layer '${name}': all dimensions of value and key, except the last one, must be equal; ` +
        `received value ${formatShape(value)} and key ${formatShape(key)}`,
    );
  }
}

/** The output's last axes: `outputShape` when given, else the query's (known) last dimension. */
export function outputDimsOf(
  name: string,
  outputShape: number | number[] | null | undefined,
  query: Shape,
): number[] {
  if (outputShape != null) return intList(outputShape, 'outputShape') as number[];
  const d = query[query.length - 1];
  if (d == null) {
    throw new Error(
      `Layer '${name}': the query's last dimension must be known, received ${formatShape(query)}`,
    );
  }
  return [d];
}
