/**
 * Attention heatmaps as SVG, after the seed notebooks' `show_heatmaps`: a grid of matrices
 * (queries down, keys across) in matplotlib's "Reds", with a shared colour bar.
 */
import {gridSize, HeatmapInput, maxOf, reds, toGrid} from './heatmap_data';
import {svgRules, validateOptions} from './heatmap_options';

export type {HeatmapInput} from './heatmap_data';

/** Options of {@link attentionHeatmapSvg}. */
export interface HeatmapOptions {
  /** Labels of the keys (columns): one string per key. */
  xLabels?: string[];
  /** Labels of the queries (rows): one string per query. */
  yLabels?: string[];
  /** Figure title. */
  title?: string;
  /** One title per column of matrices (as `titles` in show_heatmaps). */
  titles?: string[];
  /** Axis names; default "Keys" and "Queries". */
  xLabel?: string;
  /** Name of the vertical axis; default "Queries". */
  yLabel?: string;
  /** Cell size in pixels, a number > 0; default 18. */
  cellSize?: number;
  /** Draw weights that are exactly 0 (masked positions) blank. Default true. */
  blankZeros?: boolean;
}

function esc(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;');
}

function hex([r, g, b]: [number, number, number]): string {
  return `#${[r, g, b].map((c) => c.toString(16).padStart(2, '0')).join('')}`;
}

/**
 * Renders attention weights as an SVG document.
 *
 * ```js
 * const svg = attentionHeatmapSvg(scores, {xLabels: tokens, yLabels: tokens, title: 'head 0'});
 * fs.writeFileSync('attention.svg', svg);
 * ```
 *
 * @param weights `[queries][keys]`, `[cols][queries][keys]`, `[rows][cols][queries][keys]`, or a tensor.
 */
export function attentionHeatmapSvg(weights: HeatmapInput, options: HeatmapOptions = {}): string {
  const grid = toGrid(weights, 'attentionHeatmapSvg');
  validateOptions('attentionHeatmapSvg', options, svgRules(gridSize(grid)));
  const cell = options.cellSize ?? 18;
  const blank = options.blankZeros ?? true;
  const nq = grid[0][0].length;
  const nk = grid[0][0][0].length;
  const rows = grid.length;
  const cols = grid[0].length;
  const labelW = options.yLabels ? 8 * Math.max(...options.yLabels.map((l) => l.length), 1) + 8 : 0;
  const left = 24 + labelW;
  const top = (options.title ? 28 : 8) + (options.titles ? 18 : 0);
  const panelW = nk * cell;
  const panelH = nq * cell;
  const gap = 24;
  const bottomLabels = options.xLabels
    ? 8 * Math.max(...options.xLabels.map((l) => l.length), 1) + 8
    : 0;
  const barX = left + cols * panelW + (cols - 1) * gap + 20;
  const width = barX + 60;
  const height = top + rows * panelH + (rows - 1) * gap + bottomLabels + 28;
  const vmax = maxOf(grid);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
  );
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  if (options.title) {
    out.push(`<title>${esc(options.title)}</title>`);
    out.push(
      `<text class="title" x="${width / 2}" y="18" text-anchor="middle" font-size="14">${esc(options.title)}</text>`,
    );
  }
  grid.forEach((row, r) => {
    row.forEach((mat, c) => {
      const x0 = left + c * (panelW + gap);
      const y0 = top + r * (panelH + gap);
      out.push(`<g class="panel" data-row="${r}" data-col="${c}">`);
      if (options.titles?.[c] !== undefined && r === 0) {
        out.push(
          `<text class="panel-title" x="${x0 + panelW / 2}" y="${y0 - 6}" text-anchor="middle">${esc(options.titles[c])}</text>`,
        );
      }
      mat.forEach((line, i) => {
        line.forEach((v, j) => {
          const masked = blank && v === 0;
          const fill = masked ? '#ffffff' : hex(reds(v / vmax));
          out.push(
            `<rect class="${masked ? 'cell masked' : 'cell'}" x="${x0 + j * cell}" y="${y0 + i * cell}" width="${cell}" height="${cell}" fill="${fill}" data-q="${i}" data-k="${j}" data-value="${v.toPrecision(6)}"/>`,
          );
        });
      });
      out.push(
        `<rect class="frame" x="${x0}" y="${y0}" width="${panelW}" height="${panelH}" fill="none" stroke="#999"/>`,
      );
      if (c === 0 && options.yLabels) {
        options.yLabels.forEach((l, i) =>
          out.push(
            `<text class="y-label" x="${x0 - 4}" y="${y0 + i * cell + cell * 0.7}" text-anchor="end">${esc(l)}</text>`,
          ),
        );
      }
      if (r === rows - 1 && options.xLabels) {
        options.xLabels.forEach((l, j) => {
          const x = x0 + j * cell + cell * 0.65;
          const y = y0 + panelH + 6;
          out.push(
            `<text class="x-label" x="${x}" y="${y}" text-anchor="end" transform="rotate(-90 ${x} ${y})">${esc(l)}</text>`,
          );
        });
      }
      out.push('</g>');
    });
  });
  const gridBottom = top + rows * panelH + (rows - 1) * gap;
  out.push(
    `<text class="axis-label" x="${left + (cols * panelW + (cols - 1) * gap) / 2}" y="${gridBottom + bottomLabels + 20}" text-anchor="middle">${esc(options.xLabel ?? 'Keys')}</text>`,
  );
  out.push(
    `<text class="axis-label" x="12" y="${top + (gridBottom - top) / 2}" text-anchor="middle" transform="rotate(-90 12 ${top + (gridBottom - top) / 2})">${esc(options.yLabel ?? 'Queries')}</text>`,
  );
  // colour bar
  const barH = Math.max(60, gridBottom - top);
  out.push('<g class="colorbar">');
  const steps = 20;
  for (let s = 0; s < steps; s++) {
    const t = 1 - s / steps;
    out.push(
      `<rect x="${barX}" y="${top + (s * barH) / steps}" width="12" height="${barH / steps + 0.5}" fill="${hex(reds(t))}"/>`,
    );
  }
  out.push(`<text x="${barX + 16}" y="${top + 8}">${vmax.toPrecision(2)}</text>`);
  out.push(`<text x="${barX + 16}" y="${top + barH}">0</text>`);
  out.push('</g>');
  out.push('</svg>');
  return out.join('\n');
}
