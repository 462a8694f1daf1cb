/**
 * Heatmap options are checked, each bad one an error naming the option, what it may hold and
 * what arrived; edge cases that are fine (no gap, one key, one cell) render with the documented
 * layout.
 */
import {PNG} from 'pngjs';

import {attentionHeatmapPng, attentionHeatmapSvg, heatmapPngSize} from '../../src';

const W = [
  [0.5, 0.5, 0],
  [0.2, 0.3, 0.5],
]; // 2 queries x 3 keys

describe('heatmap options', () => {
  it('SVG: refuses bad sizes, labels, titles and unknown options, naming them', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{cellSize: NaN}, 'expected cellSize to be a number > 0, received NaN'],
      [{cellSize: 0}, 'expected cellSize to be a number > 0, received 0'],
      [{cellSize: -4}, 'expected cellSize to be a number > 0, received -4'],
      [{cellSize: '18'}, 'expected cellSize to be a number > 0, received string "18"'],
      [{xLabels: ['a', 'b']}, 'expected xLabels to hold 3 strings (one per key), received 2'],
      [
        {yLabels: ['q', 7]},
        'expected yLabels to be an array of 2 strings (one per query), received an array of 2',
      ],
      [
        {titles: ['h0', 'h1']},
        'expected titles to hold 1 strings (one per column of matrices), received 2',
      ],
      [{title: 3}, 'expected title to be a string, received 3'],
      [{blankZeros: 'yes'}, 'expected blankZeros to be true or false, received string "yes"'],
      [{celSize: 4}, "unknown option 'celSize'; the options are xLabels, yLabels, title, titles"],
    ];
    for (const [options, message] of cases) {
      expect(() => attentionHeatmapSvg(W, options)).toThrow(`attentionHeatmapSvg: ${message}`);
    }
    expect(() => attentionHeatmapSvg(W, null as unknown as object)).toThrow(
      'attentionHeatmapSvg: expected an options object, received null',
    );
  });

  it('PNG: refuses fractional or negative sizes and gaps, and images beyond 2^26 pixels', () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{cellSize: 2.5}, 'expected cellSize to be a whole number of pixels > 0, received 2.5'],
      [{cellSize: 0}, 'expected cellSize to be a whole number of pixels > 0, received 0'],
      [{gap: -1}, 'expected gap to be a whole number of pixels >= 0, received -1'],
      [{gap: Infinity}, 'expected gap to be a whole number of pixels >= 0, received Infinity'],
      [{xLabels: ['a']}, "unknown option 'xLabels'; the options are cellSize, gap, blankZeros"],
    ];
    for (const [options, message] of cases) {
      expect(() => attentionHeatmapPng(W, options)).toThrow(`attentionHeatmapPng: ${message}`);
    }
    expect(() => heatmapPngSize(1, 1, 2, 3, {gap: -2})).toThrow(
      'heatmapPngSize: expected gap to be a whole number of pixels >= 0, received -2',
    );
    expect(() => attentionHeatmapPng(W, {cellSize: 10000})).toThrow(
      /the image would be 30016 x 20016 pixels; lower cellSize or gap/,
    );
  });

  it('refuses empty weights with a clear message', () => {
    expect(() => attentionHeatmapSvg([[]])).toThrow(
      /not empty .*received an empty array of depth 2/,
    );
    expect(() => attentionHeatmapPng([])).toThrow(/not empty .*received an empty array of depth 1/);
  });

  it('renders the edge cases that are fine: no gap, a single cell, one label per axis', () => {
    const png = PNG.sync.read(attentionHeatmapPng(W, {gap: 0, cellSize: 3}));
    expect([png.width, png.height]).toEqual([3 * 3, 2 * 3]); // 3 keys x 2 queries of 3 pixels
    // the masked cell (query 0, key 2) is white, the others coloured
    const at = (x: number, y: number) =>
      Array.from(png.data.subarray((y * png.width + x) * 4, (y * png.width + x) * 4 + 3));
    expect(at(7, 1)).toEqual([255, 255, 255]);
    expect(at(1, 1)).not.toEqual([255, 255, 255]);
    const one = PNG.sync.read(attentionHeatmapPng([[1]], {gap: 1, cellSize: 1}));
    expect([one.width, one.height]).toEqual([3, 3]);
    const svg = attentionHeatmapSvg([[0.7]], {xLabels: ['k'], yLabels: ['q'], cellSize: 0.5});
    expect(svg.match(/<rect [^>]*fill="#/g)?.length).toBeGreaterThanOrEqual(1);
    expect(svg).toContain('>k<');
    expect(svg).toContain('>q<');
  });
});
