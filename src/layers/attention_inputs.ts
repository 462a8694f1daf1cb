/**
 * The calling convention shared by every attention layer: which element of `apply`'s inputs is
 * the query, value, key, valid lengths or attention mask.
 *
 * - `x` or `[x]`: self-attention (query = value = key = x).
 * - `[query, value]`, `[query, value, key]`: Keras order; key defaults to value.
 * - a trailing input of rank 1 or 2 is `validLens` (`[batch]` or `[batch, queries]`);
 * - a trailing non-float input (bool / int32) of rank >= 3 is an `attentionMask`.
 * Queries, values and keys have rank >= 3: `[batch, ..., features]`.
 */
import {formatShape, Shape} from './shapes';

export type Role = 'query' | 'value' | 'key' | 'validLens' | 'attentionMask';

/** What the classification needs to know of each input: a shape and, when known, a dtype. */
export interface InputLike {
  shape: Shape;
  dtype?: string;
}

export interface AttentionParts<T> {
  query: T;
  value: T;
  key: T;
  validLens: T | null;
  attentionMask: T | null;
}

function isAuxiliary(x: InputLike): Role | null {
  if (x.shape.length === 1 || x.shape.length === 2) {
    return 'validLens';
  }
  if (x.dtype !== undefined && x.dtype !== 'float32' && x.shape.length >= 3) {
    return 'attentionMask';
  }
  return null;
}

/** Assigns a role to each input, in order. */
export function classifyInputs(inputs: InputLike[], layerName: string): Role[] {
  const describe = () => inputs.map((x) => formatShape(x.shape)).join(', ');
  const roles: Role[] = new Array(inputs.length);
  let end = inputs.length;
  const seen = new Set<Role>();
  while (end > 1) {
    const role = isAuxiliary(inputs[end - 1]);
    if (role == null) {
      break;
    }
    if (seen.has(role)) {
      throw new Error(
        `Layer '${layerName}' received two ${role} inputs; expected at most one. Inputs: ${describe()}`,
      );
    }
    seen.add(role);
    roles[end - 1] = role;
    end--;
  }
  if (end > 3) {
    throw new Error(
      `Layer '${layerName}' expected [query], [query, value] or [query, value, key] (optionally ` +
        `followed by validLens and/or a bool attentionMask), received ${inputs.length} inputs: ${describe()}`,
    );
  }
  const main: Role[] = ['query', 'value', 'key'];
  for (let i = 0; i < end; i++) {
    if (inputs[i].shape.length < 3) {
      throw new Error(
        `Layer '${layerName}' expected the ${main[i]} to have rank >= 3 ([batch, ..., features]), ` +
          `received shape ${formatShape(inputs[i].shape)}. Inputs: ${describe()}`,
      );
    }
    roles[i] = main[i];
  }
  return roles;
}

/** Picks the parts out of `inputs` by role; value and key fall back to query and value. */
export function assignParts<T>(inputs: T[], roles: Role[]): AttentionParts<T> {
  const get = (r: Role) => {
    const i = roles.indexOf(r);
    return i === -1 ? null : inputs[i];
  };
  const query = get('query') as T;
  const value = get('value') ?? query;
  const key = get('key') ?? value;
  return {query, value, key, validLens: get('validLens'), attentionMask: get('attentionMask')};
}

/**
 * Removes repeated symbolic inputs that carry no information: `[x, x]` is self-attention and
 * `[q, v, v]` is `[q, v]`. tfjs's executor miscounts a tensor that appears twice in one node's
 * inputs and disposes it early, so such calls are rewritten rather than passed on.
 */
export function dedupeInputs<T>(inputs: T[]): T[] {
  const out = [...inputs];
  if (out.length >= 3 && out[2] === out[1]) {
    out.splice(2, 1);
  }
  if (out.length >= 2 && out[1] === out[0] && (out.length < 3 || !isMainTensor(out[2]))) {
    out.splice(1, 1);
  }
  return out;
}

function isMainTensor(x: unknown): boolean {
  const shape = (x as InputLike).shape;
  return Array.isArray(shape) && isAuxiliary(x as InputLike) == null;
}
