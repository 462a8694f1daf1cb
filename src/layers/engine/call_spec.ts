/**
 * The calling convention of every attention layer, as one pure function: inputs (tensors,
 * symbolic tensors or shapes), call kwargs and the layer's call settings -> a {@link CallSpec}
 * naming each input's role, the masks, causal masking and whether scores are returned.
 *
 * Positional inputs, in order:
 * - `x` or `[x]`: self-attention (query = value = key = x);
 * - `[query, value]`, `[query, value, key]`: Keras order; key defaults to value;
 * - then optionally lengths (rank 1 or 2: `[batch]` / `[batch, queries]`) and an attention mask
 *   (bool or int32, rank >= 3), in either order.
 * Queries, values and keys are float tensors of rank >= 3 (`[batch, ..., features]`).
 * `checkCallShapes` then checks a resolved call's shapes against each other and the built ones.
 */
import * as tf from '@tensorflow/tfjs-core';

import {checkCallOptions} from './call_options';
import {formatShape, Shape} from './shapes';

export {CALL_OPTIONS, checkCallOptions} from './call_options';

export type Role = 'query' | 'value' | 'key' | 'validLens' | 'attentionMask';
export const ROLES: readonly Role[] = ['query', 'value', 'key', 'validLens', 'attentionMask'];

/** What the convention needs of an input: its shape and, when known, its dtype. */
export interface InputLike {
  shape: Shape;
  dtype?: string;
  kerasMask?: tf.Tensor | null;
}

/** The layer's settings that take part in a call (kept in its config). */
export interface CallSettings {
  /** `Layer 'name'`, for errors. */
  caller: string;
  /** Roles recorded at the first symbolic call (or loaded from the config); null if none. */
  inputRoles: Role[] | null;
  useCausalMask: boolean;
  returnAttentionScores: boolean;
  /** Call options a subclass accepts beyond the common ones. */
  extraOptions?: readonly string[];
  /**
   * Whether a shape-only input can be this layer's attention mask for these query and value
   * shapes (it broadcasts to the scores as the layer expands masks); null or absent: the layer
   * cannot tell, and the rule for 3-D inputs applies.
   */
  maskFits?: (mask: Shape, query: Shape, value: Shape) => boolean | null;
}

/** The inputs of one call, by role; value and key fall back to query and value. */
export interface AttentionParts<T> {
  query: T;
  value: T;
  key: T;
  validLens: T | null;
  attentionMask: T | null;
}

export interface CallSpec<T> {
  roles: Role[];
  parts: AttentionParts<T>;
  /** Whether the key / value are separate inputs (not the query / value again). */
  ownValue: boolean;
  ownKey: boolean;
  /** Keras masks `[batch, length]` (true = keep) of query, value and key, when present. */
  queryMask: tf.Tensor | null;
  valueMask: tf.Tensor | null;
  keyMask: tf.Tensor | null;
  useCausalMask: boolean;
  returnAttentionScores: boolean;
  training: boolean;
  /**
   * A key / value cache `[batch, 2, maxLength, heads, headDim]` (keras-hub's layout) for cached
   * decoding, and where this call's keys and values go in it (null: the cache is read as is).
   */
  cache: tf.Tensor | null;
  cacheUpdateIndex: number | null;
}

const MAIN: Role[] = ['query', 'value', 'key'];

function isFloat(x: InputLike): boolean {
  return x.dtype === undefined || x.dtype === 'float32';
}

function describe(inputs: InputLike[]): string {
  return inputs.map((x) => formatShape(x.shape) + (x.dtype ? ` ${x.dtype}` : '')).join(', ');
}

/** Whether a shape-only third input can be a key for this value (same rank, equal dims but the last). */
function fitsAsKey(key: Shape, value: Shape): boolean {
  return (
    key.length === value.length &&
    key.slice(0, -1).every((d, i) => d == null || value[i] == null || d === value[i])
  );
}

/**
 * Whether a shape-only third input can be an attention mask: as the layer says (`maskFits`),
 * else `[batch, T, S]` for 3-D query and value (each dimension equal, 1 or unknown); of another
 * rank than the value's it is no key, so it may be a mask.
 */
function fitsAsMask(mask: Shape, query: Shape, value: Shape, settings?: CallSettings): boolean {
  const fits = settings?.maskFits?.(mask, query, value);
  if (fits != null) return fits;
  if (mask.length !== value.length || mask.length > 3) return true;
  const want = [query[0], query[1], value[1]];
  return mask.every((d, i) => d == null || d === 1 || want[i] == null || d === want[i]);
}

/** Assigns a role to each positional input, in order. */
export function classifyInputs(
  inputs: InputLike[],
  caller: string,
  settings?: CallSettings,
): Role[] {
  const roles: Role[] = [];
  const seen = new Set<Role>();
  const take = (role: Role, i: number) => {
    if (seen.has(role)) {
      throw new Error(
        `${caller} received two ${role} inputs (input ${i}); expected at most one. ` +
          `Inputs: ${describe(inputs)}`,
      );
    }
    seen.add(role);
    roles.push(role);
  };
  inputs.forEach((x, i) => {
    const rank = x.shape.length;
    const mains = roles.filter((r) => MAIN.includes(r)).length;
    const auxiliarySeen = seen.has('validLens') || seen.has('attentionMask');
    if (i === 0) {
      if (rank < 3) {
        throw new Error(
          `${caller} expected the query to have rank >= 3 ([batch, ..., features]), received ` +
            `shape ${formatShape(x.shape)}. Inputs: ${describe(inputs)}`,
        );
      }
      if (!isFloat(x)) {
        throw new Error(
          `${caller} expected a float32 query, received ${x.dtype} of shape ` +
            `${formatShape(x.shape)}; cast it with tf.cast(x, 'float32'). Inputs: ${describe(inputs)}`,
        );
      }
      take('query', i);
    } else if (rank === 1 || rank === 2) {
      take('validLens', i);
    } else if (rank >= 3 && !isFloat(x)) {
      take('attentionMask', i);
    } else if (
      rank >= 3 &&
      !auxiliarySeen &&
      mains < 3 &&
      // shapes alone: a third input that cannot be the key but can be a mask is a mask (one
      // that can be neither is a key of the wrong shape, which the layer's shape rules refuse)
      !(
        mains === 2 &&
        x.dtype === undefined &&
        !fitsAsKey(x.shape, inputs[1].shape) &&
        fitsAsMask(x.shape, inputs[0].shape, inputs[1].shape, settings)
      )
    ) {
      take(MAIN[mains], i);
    } else if (rank >= 3 && x.dtype === undefined && !seen.has('attentionMask')) {
      take('attentionMask', i);
    } else {
      const what = rank >= 3 ? `a ${x.dtype ?? 'float32'} tensor of rank ${rank}` : `rank ${rank}`;
      throw new Error(
        `${caller} expected [query], [query, value] or [query, value, key], optionally followed ` +
          `by validLens (rank 1 or 2) and a bool or int32 attentionMask; received ` +
          `${inputs.length} inputs, input ${i} being ${what}. An attention mask passed as an ` +
          `input must be bool or int32; pass a float mask as the 'attentionMask' call option. ` +
          `Inputs: ${describe(inputs)}`,
      );
    }
  });
  return roles;
}

/** Picks the parts out of `inputs` by role. */
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

function tensorOption(value: unknown, name: string, caller: string): tf.Tensor | null {
  if (value == null) return null;
  if (!(value instanceof tf.Tensor)) {
    throw new Error(
      `${caller}: expected ${name} to be a tf.Tensor, received ${Array.isArray(value) ? 'an array' : typeof value}`,
    );
  }
  return value;
}

/**
 * Resolves one call.
 *
 * @param inputs the positional inputs (concrete tensors in `call`, `{shape}` in build and
 *   computeOutputShape).
 * @param kwargs the call options (`validLens`, `attentionMask`, `useCausalMask`,
 *   `returnAttentionScores`, `training`, `mask`); tensor options override positional ones.
 */
export function resolveCall<T extends InputLike>(
  inputs: T[],
  kwargs: Record<string, unknown>,
  settings: CallSettings,
): CallSpec<T | tf.Tensor> {
  const {caller} = settings;
  checkCallOptions(kwargs, caller, settings.extraOptions);
  const recorded = settings.inputRoles;
  const roles =
    recorded != null && recorded.length === inputs.length
      ? recorded
      : classifyInputs(inputs, caller, settings);
  const parts: AttentionParts<T | tf.Tensor> = assignParts<T | tf.Tensor>(inputs, roles);
  const lens = tensorOption(kwargs.validLens, 'validLens', caller);
  const mask = tensorOption(kwargs.attentionMask, 'attentionMask', caller);
  if (lens != null) parts.validLens = lens;
  if (mask != null) parts.attentionMask = mask;
  const {cache, cacheUpdateIndex} = cacheOptions(kwargs, caller);
  const ownValue = roles.includes('value');
  const ownKey = roles.includes('key');
  const kerasMasks = Array.isArray(kwargs.mask) ? (kwargs.mask as Array<tf.Tensor | null>) : [];
  const query = inputs[0];
  const valueInput = ownValue ? inputs[roles.indexOf('value')] : null;
  const keyInput = ownKey ? inputs[roles.indexOf('key')] : null;
  // With self-attention the value and key are the query: their Keras mask is the query's.
  const queryMask = kerasMasks[0] ?? query.kerasMask ?? null;
  const valueMask =
    (ownValue ? kerasMasks[roles.indexOf('value')] : null) ??
    valueInput?.kerasMask ??
    (ownValue ? null : queryMask);
  const keyMask = (ownKey ? kerasMasks[roles.indexOf('key')] : null) ?? keyInput?.kerasMask ?? null;
  return {
    roles,
    parts,
    ownValue,
    ownKey,
    queryMask,
    valueMask,
    keyMask,
    useCausalMask: Boolean(kwargs.useCausalMask ?? settings.useCausalMask),
    returnAttentionScores: Boolean(kwargs.returnAttentionScores ?? settings.returnAttentionScores),
    training: kwargs.training === true,
    cache,
    cacheUpdateIndex,
  };
}

/** `cache` (a tensor) and `cacheUpdateIndex` (a whole number >= 0, or an int32 scalar). */
function cacheOptions(
  kwargs: Record<string, unknown>,
  caller: string,
): {cache: tf.Tensor | null; cacheUpdateIndex: number | null} {
  const cache = tensorOption(kwargs.cache, 'cache', caller);
  let index = kwargs.cacheUpdateIndex;
  if (index instanceof tf.Tensor) {
    if (index.size !== 1) {
      throw new Error(
        `${caller}: expected cacheUpdateIndex to be a number or a scalar tensor, received a ` +
          `tensor of shape [${index.shape.join(', ')}]`,
      );
    }
    if (tf.getBackend() === 'webgpu') {
      // tfjs-backend-webgpu's synchronous read can return wrong values (see checkLengths)
      throw new Error(
        `${caller}: on webgpu, cacheUpdateIndex must be a number, not a tensor: a synchronous ` +
          `read there can return wrong values; read it first with (await index.data())[0]`,
      );
    }
    index = index.dataSync()[0];
  }
  if (index != null && !(typeof index === 'number' && Number.isInteger(index) && index >= 0)) {
    throw new Error(
      `${caller}: expected cacheUpdateIndex to be a whole number >= 0, received ${JSON.stringify(index)}`,
    );
  }
  if (index != null && cache == null) {
    throw new Error(`${caller}: cacheUpdateIndex was given without a cache`);
  }
  return {cache, cacheUpdateIndex: (index as number | undefined) ?? null};
}

/**
 * Removes repeated symbolic inputs that carry no information: `[x, x]` is self-attention and
 * `[q, v, v]` is `[q, v]`. tfjs's executor miscounts a tensor that appears twice in one node's
 * inputs and disposes it early, so such calls are rewritten rather than passed on.
 */
export function dedupeInputs<T>(inputs: T[], roles: Role[]): {inputs: T[]; roles: Role[]} {
  const keep = inputs.map((x, i) => {
    if (roles[i] === 'key') return x !== inputs[roles.indexOf('value')];
    if (roles[i] === 'value') {
      const keyAt = roles.indexOf('key');
      // [x, x, k] stays: dropping the value would make the key the value
      return x !== inputs[0] || (keyAt !== -1 && inputs[keyAt] !== x);
    }
    return true;
  });
  return {
    inputs: inputs.filter((_, i) => keep[i]),
    roles: roles.filter((_, i) => keep[i]),
  };
}

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
