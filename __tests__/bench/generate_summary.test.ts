// The pure parts of `npm run bench -- --generate` (bench/generate_summary.ts): medians, which
// contender is divided by which, the token check and the table. No model files needed.
import {
  ChildResult,
  contenders,
  firstMismatch,
  markdownTable,
  median,
  mismatchLines,
  spread,
  summarize,
  targetLines,
} from '../../bench/generate_summary';

function result(ttftMs: number, gapsMs: number[], ids: number[], maxRssBytes = 2e9): ChildResult {
  return {
    ttftMs,
    gapsMs,
    totalMs: ttftMs + gapsMs.reduce((a, b) => a + b, 0),
    loadMs: 1,
    maxRssBytes,
    ids,
  };
}

describe('bench generate summary', () => {
  it('median of odd and even counts, min and max, and refuses an empty list', () => {
    expect(median([5, 1, 3])).toBe(3);
    expect(median([4, 1, 3, 10])).toBe(3.5);
    expect(spread([7, 2, 9])).toEqual({median: 7, min: 2, max: 9});
    expect(() => median([])).toThrow('expected at least one value, received none');
  });

  it('pairs wasm with onnxruntime-web and tfjs-node with onnxruntime-node, per dtype', () => {
    const list = contenders({cpu: true, tensorflow: true});
    const versus = Object.fromEntries(list.map((c) => [c.id, c.versus]));
    expect(versus['ours-wasm-float32']).toBe('tjs-web-float32');
    expect(versus['ours-tensorflow-float32']).toBe('tjs-node-float32');
    expect(versus['ours-wasm-int8']).toBe('tjs-web-int8');
    expect(versus['ours-tensorflow-int8']).toBe('tjs-node-int8');
    expect(versus['ours-wasm-int4']).toBe('tjs-web-int4');
    expect(versus['ours-tensorflow-int4']).toBe('tjs-node-int4');
    expect(list.find((c) => c.id === 'tjs-web-int4')?.label).toContain("dtype 'q4'");
    expect(versus['ours-cpu-float32']).toBeNull();
    const without = contenders({cpu: false, tensorflow: false}).map((c) => c.id);
    expect(without).not.toContain('ours-cpu-float32');
    expect(without).not.toContain('ours-tensorflow-float32');
    expect(without).toHaveLength(9); // float32, int8, int4: transformers.js node / web, ours wasm
  });

  it('finds the first differing id, lengths included', () => {
    expect(firstMismatch([1, 2, 3], [1, 2, 3])).toBeNull();
    expect(firstMismatch([1, 2, 3], [1, 5, 3])).toEqual({position: 1, expected: 2, received: 5});
    expect(firstMismatch([1, 2, 3], [1, 2])).toEqual({
      position: 2,
      expected: 3,
      received: undefined,
    });
  });

  it('summarizes rounds: medians of per-round medians, ratios, memory, mismatches', () => {
    const list = contenders({cpu: false, tensorflow: false});
    const ref = [9, 9, 1, 2, 3, 4];
    // per-round median gaps: web 2, 4, 3 -> 3; ours wasm 6, 12, 9 -> 9 (3x)
    const results = {
      'tjs-web-float32': [
        result(10, [2, 2, 50], ref),
        result(12, [4, 4, 1], ref),
        result(11, [3, 3, 3], ref),
      ],
      'ours-wasm-float32': [
        result(30, [6, 6, 6], ref, 3e9),
        result(50, [12, 12, 12], ref, 1e9),
        result(40, [9, 1, 90], [9, 9, 1, 2, 7, 4], 2e9),
      ],
      'tjs-node-float32': [result(5, [1, 1, 1], ref)],
      'tjs-web-int8': [result(5, [1, 1, 1], [9, 9, 1, 8, 3, 8])],
    };
    const rows = summarize(
      list,
      results,
      {'ours-wasm-int8': 'n/a: quantize not available'},
      ref,
      2,
      1e9,
    );
    const byId = Object.fromEntries(rows.map((r) => [r.contender.id, r]));
    const wasm = byId['ours-wasm-float32'];
    expect(wasm.msPerToken).toEqual({median: 9, min: 6, max: 12});
    expect(wasm.ttftMs).toEqual({median: 40, min: 30, max: 50});
    expect(wasm.ratio).toBeCloseTo(3, 12);
    expect(wasm.rssOverWeights).toBeCloseTo(2, 12);
    // total / count of the first round: 18 / 3
    expect(wasm.msPerTokenMean!.min).toBeCloseTo(6, 12);
    expect(wasm.mismatch).toEqual({position: 4, expected: 3, received: 7});
    expect(byId['tjs-web-float32'].mismatch).toBeNull();
    expect(byId['tjs-web-float32'].ratio).toBeNull();
    expect(byId['tjs-web-int8'].agreement).toEqual({same: 2, of: 4});
    expect(byId['ours-wasm-int8'].na).toBe('n/a: quantize not available');
    expect(byId['ours-wasm-int8'].ratio).toBeNull();
    expect(byId['tjs-node-int8'].na).toBe('no result');

    const table = markdownTable(rows).join('\n');
    expect(table).toContain(
      '| this package, tfjs wasm | 40.0 (30.0 - 50.0) | 9.00 (6.00 - 12.0) |',
    );
    expect(table).toContain('**3.00x**');
    expect(table).toContain('**MISMATCH** at 4 (7, torch 3)');
    expect(table).toContain('| this package, tfjs wasm, int8 | n/a: quantize not available |');
    expect(table).toContain('2 / 4 as float32 torch');
    expect(mismatchLines('small', rows)).toEqual([
      'small: this package, tfjs wasm generated other tokens than torch: position 4, 7 instead of 3',
    ]);
  });

  it('divides first token and loading by the transformers.js row, reports the step and checks the targets', () => {
    const list = contenders({cpu: false, tensorflow: false});
    const ref = [9, 9, 1, 2];
    const at = (r: ChildResult, extra: Partial<ChildResult>): ChildResult => ({...r, ...extra});
    const results = {
      'tjs-web-float32': [at(result(100, [10, 10], ref, 1e9), {loadMs: 4000})],
      'ours-wasm-float32': [
        at(result(120, [9, 9], ref, 1.2e9), {
          loadMs: 5000,
          compileRefusal: null,
          step: 'wasm kernels, heap',
        }),
      ],
      'tjs-web-int8': [at(result(100, [10, 10], ref), {loadMs: 2000})],
      'ours-wasm-int8': [
        at(result(200, [5, 5], ref), {loadMs: 1000, compileRefusal: "layer 'x' (Foo): no rule"}),
      ],
    };
    const rows = summarize(list, results, {}, ref, 2, 1e9);
    const byId = Object.fromEntries(rows.map((r) => [r.contender.id, r]));
    const wasm = byId['ours-wasm-float32'];
    expect(wasm.ttftRatio).toBeCloseTo(1.2, 12);
    expect(wasm.loadRatio).toBeCloseTo(1.25, 12);
    expect(wasm.loadMs).toEqual({median: 5000, min: 5000, max: 5000});
    expect(wasm.step).toBe('compiled (wasm kernels, heap)');
    expect(byId['ours-wasm-int8'].step).toBe("eager: layer 'x' (Foo): no rule");
    expect(byId['tjs-web-float32'].step).toBeNull();
    const table = markdownTable(rows).join('\n');
    expect(table).toContain(
      '| 5000 (5000 - 5000) | 1.20x, 1.25x | compiled (wasm kernels, heap) |',
    );
    expect(targetLines('m', rows)).toEqual([
      'm, this package, tfjs wasm: ms / token 0.90x transformers.js (target <= 1.0): met; ' +
        'first token 1.20x transformers.js (target <= 1.5): met; ' +
        'loading 1.25x transformers.js (target <= 1.0): NOT MET; ' +
        'peak memory 1.20x the float32 weights (target <= 1.3): met; ' +
        'step: compiled (wasm kernels, heap)',
    ]);
  });
});
