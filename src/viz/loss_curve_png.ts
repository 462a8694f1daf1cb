/**
 * A loss curve as a PNG (Node; the fine-tuning CLI writes it at the end): the losses of each
 * step as a line over a light grid, the y axis from the smallest to the largest loss (padded),
 * the x axis the steps. No text: the CLI prints the numbers.
 */
import {PNG} from 'pngjs';

/** Options of {@link lossCurvePng}. */
export interface LossCurveOptions {
  /** Pixels. Default 640 x 360. */
  width?: number;
  height?: number;
}

/** The PNG of `losses` (one per step; at least one finite value). */
export function lossCurvePng(losses: number[], options: LossCurveOptions = {}): Buffer {
  const width = options.width ?? 640;
  const height = options.height ?? 360;
  for (const [name, v] of [
    ['width', width],
    ['height', height],
  ] as const) {
    if (!Number.isInteger(v) || v < 32 || v > 4096) {
      throw new Error(`lossCurvePng: expected ${name} an integer in [32, 4096], received ${v}`);
    }
  }
  const finite = losses.filter((l) => Number.isFinite(l));
  if (finite.length === 0) {
    throw new Error(`lossCurvePng: expected at least one finite loss, received ${losses.length}`);
  }
  const png = new PNG({width, height});
  png.data.fill(255);
  const set = (x: number, y: number, [r, g, b]: readonly number[]) => {
    if (x < 0 || y < 0 || x >= width || y >= height) return;
    const p = (Math.round(y) * width + Math.round(x)) * 4;
    png.data[p] = r;
    png.data[p + 1] = g;
    png.data[p + 2] = b;
    png.data[p + 3] = 255;
  };
  const margin = 24;
  const [x0, x1, y0, y1] = [margin, width - margin, margin, height - margin];
  const grid = [225, 225, 225];
  for (let i = 0; i <= 4; i++) {
    const y = y0 + ((y1 - y0) * i) / 4;
    for (let x = x0; x <= x1; x++) set(x, y, grid);
    const x = x0 + ((x1 - x0) * i) / 4;
    for (let yy = y0; yy <= y1; yy++) set(x, yy, grid);
  }
  let lo = Math.min(...finite);
  let hi = Math.max(...finite);
  const pad = (hi - lo || Math.abs(hi) || 1) * 0.05;
  lo -= pad;
  hi += pad;
  const at = (i: number, l: number): [number, number] => [
    x0 + (losses.length === 1 ? 0 : ((x1 - x0) * i) / (losses.length - 1)),
    y1 - ((y1 - y0) * (l - lo)) / (hi - lo),
  ];
  const line = [31, 119, 180];
  let prev: [number, number] | null = null;
  losses.forEach((l, i) => {
    if (!Number.isFinite(l)) {
      prev = null;
      return;
    }
    const p = at(i, l);
    if (prev == null) set(p[0], p[1], line);
    else {
      const steps = Math.max(1, Math.ceil(Math.hypot(p[0] - prev[0], p[1] - prev[1])));
      for (let s = 0; s <= steps; s++) {
        const x = prev[0] + ((p[0] - prev[0]) * s) / steps;
        const y = prev[1] + ((p[1] - prev[1]) * s) / steps;
        set(x, y, line);
        set(x, y + 1, line);
      }
    }
    prev = p;
  });
  return PNG.sync.write(png);
}
