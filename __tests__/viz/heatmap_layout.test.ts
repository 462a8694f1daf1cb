/**
 * attentionHeatmapSvg's layout: a title longer than the matrices are wide fits in the image
 * (widened, then wrapped, no character lost), and every cell carries a <title> (shown on hover)
 * with its row, column and value. Widths are checked against a stated bound of the text's width:
 * at most 0.62 em per character in a sans-serif font (Arial, Helvetica and DejaVu Sans average
 * 0.5 to 0.6 em over mixed text); browser/__tests__/demo.test.ts measures the drawn title in
 * Chromium.
 */
import {attentionHeatmapSvg} from '../../src';

const EM_PER_CHAR = 0.62;
const TITLE_PX = 14;

function svgWidth(svg: string): number {
  return Number(/<svg [^>]*width="([\d.]+)"/.exec(svg)?.[1]);
}

/** The lines of the figure title: its tspans, or the text itself when it has none. */
function titleLines(svg: string): {x: number; y: number; text: string}[] {
  const title = /<text class="title"[^>]*>(.*?)<\/text>/.exec(svg);
  if (!title) return [];
  const spans = [...title[1].matchAll(/<tspan x="([\d.]+)" y="([\d.]+)">(.*?)<\/tspan>/g)];
  if (spans.length === 0) {
    const x = Number(/x="([\d.]+)"/.exec(title[0])?.[1]);
    return [{x, y: Number(/y="([\d.]+)"/.exec(title[0])?.[1]), text: title[1]}];
  }
  return spans.map((m) => ({x: Number(m[1]), y: Number(m[2]), text: m[3]}));
}

function unescape(s: string): string {
  return s
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, '&');
}

/** Each centred title line lies inside [margin, width - margin] at the stated width bound. */
function expectTitleInside(svg: string, margin = 4): void {
  const width = svgWidth(svg);
  for (const line of titleLines(svg)) {
    const half = (unescape(line.text).length * TITLE_PX * EM_PER_CHAR) / 2;
    expect(line.x - half).toBeGreaterThanOrEqual(margin);
    expect(line.x + half).toBeLessThanOrEqual(width - margin);
  }
}

// the demo's lookup panel: one query over five tokens, a 66-character title
const LOOKUP_TITLE = 'attention: AdditiveAttention weights of the query over the tokens';
const LOOKUP = [[[[0.1, 0.05, 0.7, 0.1, 0.05]]]];

describe('attentionHeatmapSvg title', () => {
  it("fits the demo's lookup title over a 1 x 5 matrix, every character kept", () => {
    const svg = attentionHeatmapSvg(LOOKUP, {
      xLabels: ['5', '17', '3', '22', '9'],
      yLabels: ['query 3'],
      title: LOOKUP_TITLE,
      titles: ['head 0'],
      cellSize: 16,
    });
    const lines = titleLines(svg);
    expect(lines.length).toBeGreaterThanOrEqual(1);
    expect(lines.map((l) => l.text).join(' ')).toBe(LOOKUP_TITLE);
    expectTitleInside(svg);
    // the panels start below the last title line
    const firstCellY = Number(/<rect class="cell[^"]*" x="[\d.]+" y="([\d.]+)"/.exec(svg)?.[1]);
    expect(firstCellY).toBeGreaterThan(lines[lines.length - 1].y + 4);
  });

  it('widens a narrow image for a title that fits on one line', () => {
    const title = 'a 40-character title over one cell here';
    const narrow = attentionHeatmapSvg([[1]]);
    const svg = attentionHeatmapSvg([[1]], {title});
    expect(svgWidth(svg)).toBeGreaterThan(svgWidth(narrow));
    expect(titleLines(svg).map((l) => l.text)).toEqual([title]);
    expectTitleInside(svg);
  });

  it('wraps a title longer than any image is widened for, splitting only an overlong word', () => {
    const word = 'x'.repeat(70);
    const title = `${'long words of a title '.repeat(6)}${word} end`;
    const svg = attentionHeatmapSvg([[0.5, 0.5]], {title});
    const lines = titleLines(svg).map((l) => l.text);
    expect(lines.length).toBeGreaterThan(2);
    expect(lines.join('').replace(/ /g, '')).toBe(title.replace(/ /g, ''));
    expect(lines.filter((l) => l.includes(' x')).length).toBe(0); // no break before a space
    expectTitleInside(svg);
  });

  it('leaves a title that fits where it was, on one line, and the width of the grid', () => {
    const W = Array.from({length: 12}, () => new Array(12).fill(1 / 12));
    const plain = attentionHeatmapSvg(W);
    const svg = attentionHeatmapSvg(W, {title: 'A & B'});
    expect(svgWidth(svg)).toBe(svgWidth(plain));
    expect(titleLines(svg).map((l) => l.text)).toEqual(['A &amp; B']);
    expectTitleInside(svg);
  });
});

describe('attentionHeatmapSvg cell values on hover', () => {
  it('gives every cell a <title> with its row, column (and their labels) and value', () => {
    const W = [
      [0.7, 0.2, 0.1, 0],
      [0.25, 0.25, 0.5, 0],
    ];
    const svg = attentionHeatmapSvg(W, {xLabels: ['a', 'b', 'c', '<pad>'], yLabels: ['q0', 'q1']});
    const cells = [
      ...svg.matchAll(
        /<rect class="cell[^"]*"[^>]*data-q="(\d+)" data-k="(\d+)"[^>]*><title>([^<]*)<\/title><\/rect>/g,
      ),
    ];
    expect(cells.length).toBe(8);
    for (const [, q, k, tip] of cells) {
      const [i, j] = [Number(q), Number(k)];
      const text = unescape(tip);
      expect(text).toContain(`row ${i} (q${i})`);
      expect(text).toContain(`column ${j} (${['a', 'b', 'c', '<pad>'][j]})`);
      const value = Number(/: (-?[\d.e+-]+)/.exec(text)?.[1]);
      expect(Math.abs(value - W[i][j])).toBeLessThanOrEqual(5e-4);
      expect(text.includes('masked')).toBe(W[i][j] === 0);
    }
  });

  it('names the panel (its column title) in a grid of heads', () => {
    const head = [
      [0.5, 0.5],
      [1, 0],
    ];
    const svg = attentionHeatmapSvg([head, head, head], {titles: ['head 0', 'head 1', 'head 2']});
    const tips = [...svg.matchAll(/<rect class="cell[^>]*><title>([^<]*)<\/title>/g)].map(
      (m) => m[1],
    );
    expect(tips.length).toBe(12);
    expect(tips.filter((t) => t.startsWith('head 2, row 1, column 0: 1')).length).toBe(1);
  });
});
