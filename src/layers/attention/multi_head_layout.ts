/**
 * The multi-head layers' projected tensors `[batch, ..., heads, width]` in the attention core's
 * layout `[...batch-like axes, positions, width]` and back, for any `attentionAxes`, and the
 * query heads grouped over shared key / value heads (GroupQueryAttention).
 *
 * Keras' scores are `[batch-like axes..., query attention axes..., key attention axes...]`, where
 * the batch-like axes are every axis of the projected query but the attention axes and the
 * last one (so the heads axis is among them). The core sees the attention axes flattened into
 * one: `[...batch-like, T1 * T2 * ..., width]`. For 3-D inputs (one attention axis) this is the
 * head split `[B, T, N, w] -> [B, N, T, w]`.
 */
import * as tf from '@tensorflow/tfjs-core';

import {reshapeTo} from '../../ops/reshape';
import {swapAxes12} from '../../kernels/swap_axes';
import type {Shape} from '../engine/shapes';

export interface HeadLayout {
  /** Batch-like axes of the projected tensors (the heads axis included). */
  batchAxes: number[];
  /** Attention axes of the projected tensors. */
  attnAxes: number[];
  /** Projected -> `[...batch-like, ...attention, width]`. */
  perm: number[];
  /** The inverse of `perm`. */
  inverse: number[];
}

/** @param rank the projected query's rank (input rank + 1); `attnAxes` resolved, ascending or not. */
export function headLayout(rank: number, attnAxes: number[]): HeadLayout {
  const batchAxes: number[] = [];
  for (let i = 0; i < rank - 1; i++) if (!attnAxes.includes(i)) batchAxes.push(i);
  const perm = [...batchAxes, ...attnAxes, rank - 1];
  const inverse = perm.map((_, i) => perm.indexOf(i));
  return {batchAxes, attnAxes, perm, inverse};
}

function isHeadSwap(perm: number[]): boolean {
  return perm.length === 4 && perm[0] === 0 && perm[1] === 2 && perm[2] === 1 && perm[3] === 3;
}

/**
 * Whether `perm` keeps the order of the axes longer than 1, so that permuting is a reshape (no
 * copy; no program on webgl / webgpu): the heads of one position (`[B, 1, N, w] -> [B, N, 1, w]`,
 * a decoding step), or one head.
 */
function onlyUnitAxesMove(shape: number[], perm: number[]): boolean {
  const moved = perm.filter((p) => shape[p] !== 1);
  return moved.every((p, i) => i === 0 || moved[i - 1] < p);
}

function permute(x: tf.Tensor, perm: number[]): tf.Tensor {
  if (perm.every((p, i) => p === i)) return x;
  if (onlyUnitAxesMove(x.shape, perm))
    return reshapeTo(
      x,
      perm.map((p) => x.shape[p]),
    );
  return isHeadSwap(perm) ? swapAxes12(x) : tf.transpose(x, perm);
}

/**
 * The scores' shape in Keras' layout `[...batch-like, ...query axes, ...key axes]`, from the
 * inputs' shapes with their last axis projected to `heads` (e.g. `[numHeads, keyDim]`).
 */
export function scoresShape(query: Shape, key: Shape, heads: number[], attnAxes: number[]): Shape {
  const layout = headLayout(query.length + 1, attnAxes);
  const q = [...query.slice(0, -1), ...heads];
  const k = [...key.slice(0, -1), ...heads];
  return [
    ...layout.batchAxes.map((i) => q[i]),
    ...layout.attnAxes.map((i) => q[i]),
    ...layout.attnAxes.map((i) => k[i]),
  ];
}

/** `[batch, ..., heads, w]` -> `[...batch-like, positions, w]`. */
export function toCoreLayout(x: tf.Tensor, layout: HeadLayout): tf.Tensor {
  const t = permute(x, layout.perm); // [...batch-like, ...attention, w]
  const lead = layout.batchAxes.map((a) => x.shape[a]);
  const positions = layout.attnAxes.reduce((p, a) => p * x.shape[a], 1);
  return reshapeTo(t, [...lead, positions, x.shape[x.rank - 1]]);
}

/** `[...batch-like, positions, w]` -> `[batch, ..., heads, w]`, given the attention axes' sizes. */
export function fromCoreLayout(y: tf.Tensor, layout: HeadLayout, attnDims: number[]): tf.Tensor {
  const lead = y.shape.slice(0, layout.batchAxes.length);
  const t = reshapeTo(y, [...lead, ...attnDims, y.shape[y.rank - 1]]);
  return permute(t, layout.inverse);
}

/**
 * A mask in Keras' score layout `[...batch-like, ...query axes, ...key axes]` (broadcastable) ->
 * the core's `[...batch-like, T, S]`: attention axes broadcast to full size, then flattened.
 */
export function maskToCoreLayout(mask: tf.Tensor, scoresShape: number[], numAxes: number) {
  if (numAxes === 1) return mask;
  const b = scoresShape.length - 2 * numAxes;
  const full = [...mask.shape.slice(0, b), ...scoresShape.slice(b)];
  const size = (from: number, to: number) => scoresShape.slice(from, to).reduce((p, d) => p * d, 1);
  const T = size(b, b + numAxes);
  const S = size(b + numAxes, scoresShape.length);
  return tf.reshape(tf.broadcastTo(mask, full), [...full.slice(0, b), T, S]);
}

/**
 * Grouped heads in the core's rank-4 layout: the `G = U / V` query heads that share a key / value
 * head become rows of one sequence, `[B, U, T, w]` -> `[B, V, G * T, w]` (a reshape: the heads
 * of one group are adjacent). Their scores against keys `[B, V, S, w]` are one product per key /
 * value head, with no copy of keys or values; and every backend takes rank 4 (webgl and webgpu
 * have no rank-5 select).
 */
export function groupHeads(x: tf.Tensor, kvHeads: number): tf.Tensor {
  const [B, U, T, w] = x.shape;
  return tf.reshape(x, [B, kvHeads, (U / kvHeads) * T, w]);
}

/** `[B, V, G * T, w]` -> `[B, V * G, T, w]`, the inverse of {@link groupHeads}. */
export function ungroupHeads(x: tf.Tensor, queryHeads: number): tf.Tensor {
  const [B, V, GT, w] = x.shape;
  return tf.reshape(x, [B, queryHeads, (GT * V) / queryHeads, w]);
}

/**
 * A mask `[B|1, U|1, T|1, S|1]` in the grouped layout `[B|1, V|1, G * T, S|1]`: a mask shared by
 * the heads is repeated for the G query heads of a group (a concat of the small boolean mask,
 * never of keys or values).
 */
export function groupMask(
  mask: tf.Tensor,
  kvHeads: number,
  queryHeads: number,
  T: number,
): tf.Tensor {
  const [mB, mU, mT, mS] = mask.shape;
  const rows = mT === T ? mask : tf.broadcastTo(mask, [mB, mU, T, mS]);
  const G = queryHeads / kvHeads;
  if (mU === 1) return G === 1 ? rows : tf.concat(new Array<tf.Tensor>(G).fill(rows), 2);
  return tf.reshape(rows, [mB, kvHeads, G * T, mS]);
}
