/** lossCurvePng: a PNG of the given size, its line where the losses put it, refusals. */
import {PNG} from 'pngjs';

import {lossCurvePng} from '../../src/viz/loss_curve_png';

/** Whether the pixel at (x, y) is the line's blue. */
function blue(png: PNG, x: number, y: number): boolean {
  const p = (y * png.width + x) * 4;
  return png.data[p] === 31 && png.data[p + 1] === 119 && png.data[p + 2] === 180;
}

describe('lossCurvePng', () => {
  it('draws a falling loss from the top-left corner of the plot to the bottom-right', () => {
    const png = PNG.sync.read(lossCurvePng([4, 3, 2, 1], {width: 200, height: 100}));
    expect([png.width, png.height]).toEqual([200, 100]);
    // plot area [24, 176] x [24, 76]; losses padded by 5% of their range (0.15) above and below
    const top = Math.round(76 - (52 * (4 - 0.85)) / 3.3);
    const bottom = Math.round(76 - (52 * (1 - 0.85)) / 3.3);
    expect(blue(png, 24, top)).toBe(true);
    expect(blue(png, 176, bottom)).toBe(true);
    expect(blue(png, 176, top)).toBe(false);
  });

  it('refuses no finite loss and a size out of range', () => {
    expect(() => lossCurvePng([NaN])).toThrow(
      'lossCurvePng: expected at least one finite loss, received 1',
    );
    expect(() => lossCurvePng([1], {width: 8})).toThrow(
      'lossCurvePng: expected width an integer in [32, 4096], received 8',
    );
  });
});
