/**
 * The README's image (docs/reverse_attention.svg) is what scripts/readme_heatmap.mjs draws from
 * the committed reverse model with the package's attentionHeatmapSvg: it has a title, axis names
 * and the tokens as labels, it shows the reversal (each output's weight on the mirrored input
 * position), and drawing it again gives the committed file (numbers within 1e-3).
 */
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const root = path.resolve(__dirname, '..', '..');
const IMAGE = 'docs/reverse_attention.svg';
const committed = fs.readFileSync(path.join(root, IMAGE), 'utf8');
const TOKENS = [3, 1, 4, 1, 5, 9, 2, 6];

/** Weights by head, query and key, from the cells' data attributes. */
function cells(svg: string): number[][][] {
  const heads: number[][][] = [];
  const panels = svg.split('<g class="panel"').slice(1);
  for (const panel of panels) {
    const m: number[][] = [];
    for (const c of panel.matchAll(/data-q="(\d+)" data-k="(\d+)" data-value="([^"]+)"/g)) {
      (m[Number(c[1])] ??= [])[Number(c[2])] = Number(c[3]);
    }
    heads.push(m);
  }
  return heads;
}

describe('the README image', () => {
  it('is the one README.md shows, and the script that draws it is named there', () => {
    const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8');
    expect(readme).toContain(`](${IMAGE})`);
    expect(readme).toContain('scripts/readme_heatmap.mjs');
  });

  it('has a title, axis names and the tokens as labels', () => {
    expect(committed).toMatch(/<text class="title"[^>]*><tspan[^>]*>The reverse model reads/);
    const axes = [...committed.matchAll(/class="axis-label"[^>]*>([^<]+)</g)].map((m) => m[1]);
    expect(axes).toEqual(['Keys: input tokens', 'Queries: output positions']);
    const x = [...committed.matchAll(/class="x-label"[^>]*>([^<]+)</g)].map((m) => m[1]);
    expect(x).toEqual([0, 1, 2, 3].flatMap(() => TOKENS.map(String))); // under each head
    const y = [...committed.matchAll(/class="y-label"[^>]*>([^<]+)</g)].map((m) => m[1]);
    expect(y).toEqual([...TOKENS].reverse().map((t, i) => `out ${i} = ${t}`));
    const heads = [...committed.matchAll(/class="panel-title"[^>]*>([^<]+)</g)].map((m) => m[1]);
    expect(heads).toEqual(['head 0', 'head 1', 'head 2', 'head 3']);
  });

  it('shows the reversal: rows sum to 1 and each output attends most to its mirrored input', () => {
    const heads = cells(committed);
    expect(heads.length).toBe(4);
    const n = TOKENS.length;
    for (const m of heads) {
      expect(m.length).toBe(n);
      for (const row of m) expect(Math.abs(row.reduce((a, b) => a + b, 0) - 1)).toBeLessThan(1e-4);
    }
    for (let q = 0; q < n; q++) {
      const mean = Array.from({length: n}, (_, k) => heads.reduce((s, m) => s + m[q][k], 0) / 4);
      expect([q, mean.indexOf(Math.max(...mean))]).toEqual([q, n - 1 - q]);
    }
  });

  it('is what scripts/readme_heatmap.mjs draws today (numbers within 1e-3)', () => {
    const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'readme-image-')), 'image.svg');
    const r = spawnSync(
      process.execPath,
      [path.join(root, 'scripts', 'readme_heatmap.mjs'), '--out', out],
      {cwd: root, encoding: 'utf8', timeout: 90000},
    );
    expect([r.status, r.stderr]).toEqual([0, expect.not.stringMatching(/error/i)]);
    const fresh = fs.readFileSync(out, 'utf8');
    const number = /-?\d+\.\d+(?:e[-+]?\d+)?/g;
    expect(fresh.replace(number, '#')).toBe(committed.replace(number, '#'));
    const a = fresh.match(number) ?? [];
    const b = committed.match(number) ?? [];
    expect(a.length).toBe(b.length);
    const worst = Math.max(...a.map((v, i) => Math.abs(Number(v) - Number(b[i]))));
    expect(worst).toBeLessThanOrEqual(1e-3);
  });
});
