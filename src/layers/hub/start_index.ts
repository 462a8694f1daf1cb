/**
 * The `startIndex` call option of the position layers (keras-hub's `start_index`): the position
 * of the input's first element, for cached decoding one token at a time. A number in eager calls
 * only: tfjs replays no call options at `predict` time, so a functional model cannot fix it, and
 * keras-hub's tensor start index (for its compiled generate loop) has no use here.
 *
 * The `positions` call option (keras-hub's `positions`): the position of each element, a tensor
 * `[length]` or `[batch, length]` (explicit, ragged or left-padded positions); when given,
 * `startIndex` is ignored, as in keras-hub. Eager calls only, for the same reason.
 */
import * as tf from '@tensorflow/tfjs-core';
import {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

/** Throws when `startIndex` is given to a symbolic call (a functional model). */
export function refuseSymbolicStartIndex(
  inputs: tf.Tensor | SymbolicTensor | Array<tf.Tensor | SymbolicTensor>,
  kwargs: Kwargs | undefined,
  layerName: string,
): void {
  const first = Array.isArray(inputs) ? inputs[0] : inputs;
  if (!(first instanceof SymbolicTensor)) return;
  if (kwargs?.startIndex != null) {
    throw new Error(
      `Layer '${layerName}': startIndex works in eager calls (cached decoding), not in a ` +
        `functional model: tfjs replays no call options at predict time`,
    );
  }
  if (kwargs?.positions != null) {
    throw new Error(
      `Layer '${layerName}': positions works in eager calls, not in a functional model: tfjs ` +
        `replays no call options at predict time`,
    );
  }
}

/** The `positions` of an eager call, read: `batch` rows (1 for `[length]`) of `length` values. */
export interface PositionsValues {
  /** The positions, row by row (`batch * length` values). */
  values: Float32Array | Int32Array;
  /** Rows: the first axis of `[batch, length]` positions, 1 for `[length]`. */
  batch: number;
}

/**
 * The `positions` call option of an eager call, or null when absent: an int32 or float32 tensor
 * `[length]` or `[batch, length]` whose `length` is the input's (`length`), finite values; with
 * `limit` (a table's rows) whole numbers `0 .. limit - 1` (float32 ones are accepted, as keras'
 * `take` casts them). Anything else is an error naming what was expected and received.
 */
export function positionsOf(
  kwargs: Kwargs | undefined,
  layerName: string,
  length: number,
  limit: number | null = null,
): PositionsValues | null {
  const p: unknown = kwargs?.positions;
  if (p == null) return null;
  const layer = `Layer '${layerName}'`;
  if (
    !(p instanceof tf.Tensor) ||
    (p.rank !== 1 && p.rank !== 2) ||
    p.shape[p.rank - 1] !== length ||
    (p.dtype !== 'int32' && p.dtype !== 'float32')
  ) {
    const what =
      p instanceof tf.Tensor
        ? `a ${p.dtype} tensor of shape [${p.shape.join(', ')}]`
        : (JSON.stringify(p) ?? typeof p);
    throw new Error(
      `${layer}: expected positions to be an int32 or float32 tensor [${length}] or ` +
        `[batch, ${length}] (the input's length), received ${what}`,
    );
  }
  if (tf.getBackend() === 'webgpu') {
    // tfjs-backend-webgpu's synchronous read can return wrong values (see checkLengths)
    throw new Error(
      `${layer}: positions are read synchronously, which on webgpu can return wrong values; ` +
        'run this call on another backend (cpu, wasm, webgl)',
    );
  }
  const values = p.dataSync() as Float32Array | Int32Array;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    const bad = limit != null ? !(Number.isInteger(v) && v >= 0 && v < limit) : !Number.isFinite(v);
    if (bad) {
      const at = p.rank === 1 ? `[${i}]` : `[${Math.floor(i / length)}, ${i % length}]`;
      const expected =
        limit != null
          ? `whole numbers 0 .. ${limit - 1} (sequenceLength ${limit})`
          : 'finite numbers';
      throw new Error(`${layer}: expected positions to be ${expected}, received ${v} at ${at}`);
    }
  }
  return {values, batch: p.rank === 2 ? p.shape[0] : 1};
}

/**
 * Throws unless positions with `batch` rows broadcast against the input's axis `axis` (its batch
 * axis; -1 when the input has none): `batch` is 1 or that axis' size.
 */
export function checkPositionsBatch(
  batch: number,
  shape: number[],
  axis: number,
  layerName: string,
): void {
  if (batch === 1 || (axis >= 0 && shape[axis] === batch)) return;
  throw new Error(
    `Layer '${layerName}': positions of ${batch} rows do not match the input of shape ` +
      `[${shape.join(', ')}]: expected 1 row or ` +
      (axis >= 0 ? `${shape[axis]} (the input's axis ${axis})` : 'positions [length]'),
  );
}

/**
 * The start index of an eager call: `fallback` (the layer's configured start, 0 by default) when
 * absent, else a whole number >= 0 such that the
 * `length` positions fit in `limit` (when the layer has one); anything else is an error.
 */
export function startIndexOf(
  kwargs: Kwargs | undefined,
  layerName: string,
  length: number,
  limit: number | null = null,
  fallback = 0,
): number {
  const value: unknown = kwargs?.startIndex ?? fallback;
  if (!(typeof value === 'number' && Number.isInteger(value) && value >= 0)) {
    const what =
      value instanceof tf.Tensor
        ? `a tensor of shape [${value.shape.join(', ')}] (pass a number)`
        : JSON.stringify(value);
    throw new Error(
      `Layer '${layerName}': expected startIndex to be a whole number >= 0, received ${what}`,
    );
  }
  if (limit != null && value + length > limit) {
    throw new Error(
      `Layer '${layerName}': positions ${value} to ${value + length - 1} exceed sequenceLength ${limit}`,
    );
  }
  return value;
}
