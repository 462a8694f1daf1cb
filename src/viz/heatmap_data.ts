/** Shared by the SVG and PNG heatmaps: input normalisation and the colour map. */
import * as tf from '@tensorflow/tfjs-core';

/** One matrix `[queries][keys]`, a row of them, a grid of them, or a tensor of rank 2 to 4. */
export type HeatmapInput = number[][] | number[][][] | number[][][][] | tf.Tensor;

/** Normalises any accepted input to a grid `[rows][cols][queries][keys]`. */
export function toGrid(weights: HeatmapInput, caller: string): number[][][][] {
  let value: unknown = weights;
  if (weights instanceof tf.Tensor) {
    if (weights.rank < 2 || weights.rank > 4) {
      throw new Error(
        `${caller}: expected a tensor of rank 2 to 4, received shape [${weights.shape.join(', ')}]`,
      );
    }
    value = weights.arraySync();
  }
  let depth = 0;
  let probe: unknown = value;
  while (Array.isArray(probe)) {
    depth++;
    probe = probe[0];
  }
  if (depth < 2 || depth > 4 || typeof probe !== 'number') {
    throw new Error(
      `${caller}: expected a 2-D to 4-D array of numbers, not empty (or a tensor), received ` +
        (typeof probe === 'undefined' ? `an empty array of depth ${depth}` : `depth ${depth}`),
    );
  }
  let grid = value as number[][][][];
  if (depth === 2) grid = [[value as number[][]]];
  if (depth === 3) grid = [value as number[][][]];
  const q = grid[0][0].length;
  const k = grid[0][0][0].length;
  for (const row of grid) {
    for (const m of row) {
      if (m.length !== q || m.some((r) => r.length !== k || r.some((v) => !Number.isFinite(v)))) {
        throw new Error(`${caller}: every matrix must be ${q} x ${k} finite numbers`);
      }
    }
  }
  return grid;
}

/** The grid's size, for option checks. */
export function gridSize(grid: number[][][][]) {
  return {
    rows: grid.length,
    cols: grid[0].length,
    queries: grid[0][0].length,
    keys: grid[0][0][0].length,
  };
}

/** matplotlib's "Reds", sampled. */
const REDS: Array<[number, [number, number, number]]> = [
  [0, [255, 245, 240]],
  [0.25, [252, 187, 161]],
  [0.5, [251, 106, 74]],
  [0.75, [203, 24, 29]],
  [1, [103, 0, 13]],
];

/** Colour of `t` in [0, 1] (clamped). */
export function reds(t: number): [number, number, number] {
  const x = Math.min(1, Math.max(0, t));
  for (let i = 1; i < REDS.length; i++) {
    const [t1, c1] = REDS[i];
    const [t0, c0] = REDS[i - 1];
    if (x <= t1) {
      const f = (x - t0) / (t1 - t0);
      return [0, 1, 2].map((j) => Math.round(c0[j] + f * (c1[j] - c0[j]))) as [
        number,
        number,
        number,
      ];
    }
  }
  return REDS[REDS.length - 1][1];
}

export function maxOf(grid: number[][][][]): number {
  let m = 0;
  for (const row of grid)
    for (const mat of row) for (const r of mat) for (const v of r) m = Math.max(m, v);
  return m > 0 ? m : 1;
}
