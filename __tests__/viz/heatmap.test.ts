import * as tf from '@tensorflow/tfjs';
import {PNG} from 'pngjs';

import {attentionHeatmapPng, attentionHeatmapSvg, heatmapPngSize, maskedSoftmax} from '../../src';

// weights [2 queries, 4 keys] with the last key masked (exactly 0)
const W = [
  [0.7, 0.2, 0.1, 0],
  [0.25, 0.25, 0.5, 0],
];

describe('attentionHeatmapSvg', () => {
  it('draws one cell per weight, blank for masked ones, with labels and titles', () => {
    const svg = attentionHeatmapSvg(W, {
      xLabels: ['a', 'b', 'c', '<pad>'],
      yLabels: ['q0', 'q1'],
      title: 'A & B',
    });
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trim().endsWith('</svg>')).toBe(true);
    const cells = svg.match(/<rect class="cell[^"]*"[^>]*>/g) ?? [];
    expect(cells.length).toBe(8);
    const masked = cells.filter((c) => c.includes('class="cell masked"'));
    expect(masked.length).toBe(2);
    expect(masked.every((c) => c.includes('fill="#ffffff"') && c.includes('data-k="3"'))).toBe(
      true,
    );
    // the largest weight gets the darkest colour of the map
    expect(cells.find((c) => c.includes('data-q="0" data-k="0"'))).toContain('fill="#67000d"');
    expect(svg).toContain('<title>A &amp; B</title>');
    expect(svg).toContain('&lt;pad&gt;');
    expect((svg.match(/class="x-label"/g) ?? []).length).toBe(4);
    expect((svg.match(/class="y-label"/g) ?? []).length).toBe(2);
    expect(svg).toContain('class="colorbar"');
  });

  it('lays out a grid of matrices from a 4-D tensor, with panel titles', () => {
    const scores = tf.tidy(() =>
      maskedSoftmax(tf.randomNormal([1, 3, 2, 5], 0, 1, 'float32', 1), tf.tensor1d([3], 'int32')),
    );
    const svg = attentionHeatmapSvg(scores, {titles: ['h0', 'h1', 'h2']});
    expect((svg.match(/<g class="panel"/g) ?? []).length).toBe(3);
    expect((svg.match(/class="panel-title"/g) ?? []).length).toBe(3);
    expect((svg.match(/class="cell masked"/g) ?? []).length).toBe(3 * 2 * 2);
    scores.dispose();
  });

  it('names bad input', () => {
    expect(() => attentionHeatmapSvg([1, 2] as unknown as number[][])).toThrow(
      /expected a 2-D to 4-D array/,
    );
    expect(() => attentionHeatmapSvg([[1, 2], [3]])).toThrow(/every matrix must be 2 x 2/);
    expect(() => attentionHeatmapSvg([[NaN]])).toThrow(/finite numbers/);
  });
});

describe('attentionHeatmapPng', () => {
  it('encodes a PNG of the documented size with masked cells blank', () => {
    const buf = attentionHeatmapPng([W, W], {cellSize: 10, gap: 4}); // one row of two matrices
    const png = PNG.sync.read(buf);
    const size = heatmapPngSize(1, 2, 2, 4, {cellSize: 10, gap: 4});
    expect([png.width, png.height]).toEqual([size.width, size.height]);
    expect(size).toEqual({width: 2 * 4 * 10 + 3 * 4, height: 2 * 10 + 2 * 4});
    const pixel = (x: number, y: number) =>
      Array.from(png.data.subarray((y * png.width + x) * 4, (y * png.width + x) * 4 + 4));
    const centre = (panel: number, q: number, k: number) =>
      pixel(4 + panel * (40 + 4) + k * 10 + 5, 4 + q * 10 + 5);
    for (const panel of [0, 1]) {
      for (const q of [0, 1]) {
        expect(centre(panel, q, 3)).toEqual([255, 255, 255, 255]); // masked key: blank
      }
      expect(centre(panel, 0, 0)).toEqual([103, 0, 13, 255]); // the largest weight: darkest red
      expect(centre(panel, 1, 1)).not.toEqual([255, 255, 255, 255]);
    }
    expect(pixel(0, 0)).toEqual([255, 255, 255, 255]); // margin
  });
});
