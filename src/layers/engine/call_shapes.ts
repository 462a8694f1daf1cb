/** Shape checks of one call against each other and against the shapes a layer was built for. */
import type * as tf from '@tensorflow/tfjs-core';

import type {AttentionParts, CallSpec} from './call_spec';
import {formatShape, Shape} from './shapes';

/**
 * Same batch size for query, value and key; the last dimension of each input in `fixed` as
 * built. Errors name the layer (`caller`) and both shapes, instead of tfjs' reshape errors.
 */
export function checkCallShapes(
  spec: CallSpec<tf.Tensor>,
  built: AttentionParts<Shape> | null,
  fixed: ReadonlyArray<'query' | 'value' | 'key'>,
  caller: string,
): void {
  const {query} = spec.parts;
  for (const role of ['value', 'key'] as const) {
    const t = spec.parts[role];
    if (t != null && t.shape[0] !== query.shape[0]) {
      throw new Error(
        `${caller}: the ${role} has batch size ${t.shape[0]} but the query ${query.shape[0]}; ` +
          `received query [${query.shape.join(', ')}] and ${role} [${t.shape.join(', ')}]`,
      );
    }
  }
  if (built == null) return;
  for (const role of fixed) {
    const shape = spec.parts[role].shape;
    const want = built[role][built[role].length - 1];
    if (want != null && (shape.length !== built[role].length || shape[shape.length - 1] !== want)) {
      throw new Error(
        `${caller} was built for a ${role} of shape ${formatShape(built[role])}, received a ` +
          `${role} of shape [${shape.join(', ')}]`,
      );
    }
  }
}
