/** Attention heatmaps as PNG for Node (pngjs, no native build). */
import * as fs from 'fs';

import {PNG} from 'pngjs';

import {HeatmapInput, maxOf, reds, toGrid} from './heatmap_data';
import {PNG_RULES, validateOptions} from './heatmap_options';

/** Options of {@link attentionHeatmapPng} and {@link writeAttentionHeatmapPng}. */
export interface HeatmapPngOptions {
  /** Cell size, a whole number of pixels > 0; default 16. */
  cellSize?: number;
  /** Pixels between matrices and around the figure, a whole number >= 0; default 8. */
  gap?: number;
  /** Leave weights that are exactly 0 (masked positions) white. Default true. */
  blankZeros?: boolean;
}

/** Width and height in pixels of the PNG for a grid of `rows x cols` matrices of `q x k`. */
export function heatmapPngSize(
  rows: number,
  cols: number,
  q: number,
  k: number,
  options: HeatmapPngOptions = {},
): {
  /** Image width in pixels. */
  width: number;
  /** Image height in pixels. */
  height: number;
} {
  validateOptions('heatmapPngSize', options, PNG_RULES);
  const cell = options.cellSize ?? 16;
  const gap = options.gap ?? 8;
  return {width: cols * k * cell + (cols + 1) * gap, height: rows * q * cell + (rows + 1) * gap};
}

/**
 * Renders attention weights as a PNG image (white background; masked cells, i.e. weights exactly
 * 0, left white; the rest in matplotlib's "Reds" scaled to the largest weight).
 *
 * @returns the encoded PNG.
 */
export function attentionHeatmapPng(
  weights: HeatmapInput,
  options: HeatmapPngOptions = {},
): Buffer {
  const grid = toGrid(weights, 'attentionHeatmapPng');
  validateOptions('attentionHeatmapPng', options, PNG_RULES);
  const cell = options.cellSize ?? 16;
  const gap = options.gap ?? 8;
  const blank = options.blankZeros ?? true;
  const q = grid[0][0].length;
  const k = grid[0][0][0].length;
  const {width, height} = heatmapPngSize(grid.length, grid[0].length, q, k, options);
  if (width * height > 2 ** 26) {
    throw new Error(
      `attentionHeatmapPng: the image would be ${width} x ${height} pixels; lower cellSize or gap ` +
        `(at most 2^26 pixels)`,
    );
  }
  const png = new PNG({width, height});
  png.data.fill(255);
  const vmax = maxOf(grid);
  grid.forEach((row, r) =>
    row.forEach((mat, c) => {
      const x0 = gap + c * (k * cell + gap);
      const y0 = gap + r * (q * cell + gap);
      mat.forEach((line, i) =>
        line.forEach((v, j) => {
          if (blank && v === 0) return;
          const [R, G, B] = reds(v / vmax);
          for (let dy = 0; dy < cell; dy++) {
            for (let dx = 0; dx < cell; dx++) {
              const p = ((y0 + i * cell + dy) * width + (x0 + j * cell + dx)) * 4;
              png.data[p] = R;
              png.data[p + 1] = G;
              png.data[p + 2] = B;
              png.data[p + 3] = 255;
            }
          }
        }),
      );
    }),
  );
  return PNG.sync.write(png);
}

/** Writes {@link attentionHeatmapPng} to a file. */
export function writeAttentionHeatmapPng(
  path: string,
  weights: HeatmapInput,
  options: HeatmapPngOptions = {},
): void {
  fs.writeFileSync(path, attentionHeatmapPng(weights, options));
}
