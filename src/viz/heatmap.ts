/**
 * Attention heatmaps as SVG, after d2l's (Dive into Deep Learning) `show_heatmaps`: a grid of matrices
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

/** Font size of the figure title, in pixels. */
const TITLE_FONT = 14;
/** Height of one line of the figure title. */
const TITLE_LINE = 18;
/** Widest a figure is made to hold its title on one line; longer titles wrap. */
const TITLE_MAX_WIDTH = 480;

/**
 * Width of `s` at `fontSize` in a sans-serif font, a generous estimate (0.62 em a character,
 * wider than the average of Arial, Helvetica and DejaVu Sans), so text measured with it fits.
 */
export function estimatedTextWidth(s: string, fontSize: number): number {
  return s.length * fontSize * 0.62;
}

/**
 * Breaks `text` into lines no wider than `width` pixels at `fontSize`: at spaces where it can,
 * inside a word only when the word alone is wider than a line. No character is dropped.
 */
export function wrapText(text: string, width: number, fontSize: number): string[] {
  const perLine = Math.max(1, Math.floor(width / (fontSize * 0.62)));
  const lines: string[] = [];
  let line = '';
  for (let word of text.split(' ')) {
    while (word.length > perLine) {
      if (line !== '') {
        lines.push(line);
        line = '';
      }
      lines.push(word.slice(0, perLine));
      word = word.slice(perLine);
    }
    const joined = line === '' ? word : `${line} ${word}`;
    if (joined.length <= perLine) {
      line = joined;
    } else {
      lines.push(line);
      line = word;
    }
  }
  lines.push(line);
  return lines;
}

/** A weight as a short number: 4 significant digits. */
function short(v: number): string {
  return String(Number(v.toPrecision(4)));
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
  const panelW = nk * cell;
  const panelH = nq * cell;
  const gap = 24;
  const bottomLabels = options.xLabels
    ? 8 * Math.max(...options.xLabels.map((l) => l.length), 1) + 8
    : 0;
  const contentW = 24 + labelW + cols * panelW + (cols - 1) * gap + 80;
  // the title fits: the figure widens for it (up to TITLE_MAX_WIDTH) and the title wraps beyond
  const titleW = options.title ? estimatedTextWidth(options.title, TITLE_FONT) + 16 : 0;
  const width = Math.ceil(Math.max(contentW, Math.min(titleW, TITLE_MAX_WIDTH)));
  const titleLines = options.title ? wrapText(options.title, width - 16, TITLE_FONT) : [];
  // the content is centred in a figure widened for its title
  const left = 24 + labelW + Math.floor((width - contentW) / 2);
  const top = (options.title ? 10 + TITLE_LINE * titleLines.length : 8) + (options.titles ? 18 : 0);
  const barX = left + cols * panelW + (cols - 1) * gap + 20;
  // the colour bar is at least 60 pixels high, and its "0" is drawn below it
  const height = Math.max(
    top + rows * panelH + (rows - 1) * gap + bottomLabels + 28,
    top + Math.max(60, rows * panelH + (rows - 1) * gap) + 12,
  );
  const vmax = maxOf(grid);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
  );
  out.push(`<rect width="${width}" height="${height}" fill="#ffffff"/>`);
  if (options.title) {
    out.push(`<title>${esc(options.title)}</title>`);
    const lines = titleLines.map(
      (l, i) => `<tspan x="${width / 2}" y="${18 + i * TITLE_LINE}">${esc(l)}</tspan>`,
    );
    out.push(
      `<text class="title" x="${width / 2}" y="18" text-anchor="middle" font-size="${TITLE_FONT}">${lines.join('')}</text>`,
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
          // the value on hover: a <title> per cell with its panel, row, column and weight
          const tip = [
            options.titles?.[c] ?? (rows * cols > 1 ? `panel ${r},${c}` : ''),
            `row ${i}${options.yLabels ? ` (${options.yLabels[i]})` : ''}`,
            `column ${j}${options.xLabels ? ` (${options.xLabels[j]})` : ''}`,
          ]
            .filter((t) => t !== '')
            .join(', ');
          out.push(
            `<rect class="${masked ? 'cell masked' : 'cell'}" x="${x0 + j * cell}" y="${y0 + i * cell}" width="${cell}" height="${cell}" fill="${fill}" data-q="${i}" data-k="${j}" data-value="${v.toPrecision(6)}"><title>${esc(`${tip}: ${short(v)}${masked ? ' (masked)' : ''}`)}</title></rect>`,
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
  const yAxisX = left - labelW - 12; // next to the row labels, also in a widened figure
  const yName = options.yLabel ?? 'Queries';
  // centred on the grid, but never above it (into the titles) when the grid is short
  const yAxisMid = Math.max(top + (gridBottom - top) / 2, top + estimatedTextWidth(yName, 11) / 2);
  out.push(
    `<text class="axis-label" x="${left + (cols * panelW + (cols - 1) * gap) / 2}" y="${gridBottom + bottomLabels + 20}" text-anchor="middle">${esc(options.xLabel ?? 'Keys')}</text>`,
  );
  out.push(
    `<text class="axis-label" x="${yAxisX}" y="${yAxisMid}" text-anchor="middle" transform="rotate(-90 ${yAxisX} ${yAxisMid})">${esc(yName)}</text>`,
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
