/**
 * The `startIndex` call option of the position layers (keras-hub's `start_index`): the position
 * of the input's first element, for cached decoding one token at a time. A number in eager calls
 * only: tfjs replays no call options at `predict` time, so a functional model cannot fix it, and
 * keras-hub's tensor start index (for its compiled generate loop) has no use here.
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
  if (kwargs?.startIndex != null && first instanceof SymbolicTensor) {
    throw new Error(
      `Layer '${layerName}': startIndex works in eager calls (cached decoding), not in a ` +
        `functional model: tfjs replays no call options at predict time`,
    );
  }
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
