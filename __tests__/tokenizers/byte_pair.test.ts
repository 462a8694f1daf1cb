/**
 * Byte-pair encoding's costs (src/tokenizers/byte_pair.ts, bpe_merge.ts): the merge loop's work
 * grows as n log n, a 1 MB single-piece text encodes in a child process under a generous time
 * limit, the piece cache is bounded by bytes, and the vocabulary's ids are checked. The
 * references are plain loops written here (the binary decomposition of a run of `a`).
 */
import {spawnSync} from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

import {buildSync} from 'esbuild';

import {GPT2Tokenizer} from '../../src/hub_models/gpt2/gpt2_tokenizer';
import {BytePairTokenizer} from '../../src/tokenizers';

/** A vocabulary `a`, `aa`, `aaaa`, ... (2^levels) and the merges `a a`, `aa aa`, ... */
function doublingRuns(levels: number): {vocabulary: Record<string, number>; merges: string[]} {
  const vocabulary: Record<string, number> = {a: 0};
  const merges: string[] = [];
  let s = 'a';
  for (let k = 1; k <= levels; k++) {
    merges.push(`${s} ${s}`);
    s += s;
    vocabulary[s] = k;
  }
  return {vocabulary, merges};
}

/** The ids of n `a` under {@link doublingRuns}: whole 2^levels blocks, then n's binary digits, high first. */
function doublingIds(n: number, levels: number): number[] {
  const ids: number[] = [];
  const block = 2 ** levels;
  for (let i = 0; i < Math.floor(n / block); i++) ids.push(levels);
  const rest = n % block;
  for (let k = levels - 1; k >= 0; k--) if (rest & (2 ** k)) ids.push(k);
  return ids;
}

const root = path.join(__dirname, '..', '..');
let bundleDir: string;

beforeAll(() => {
  bundleDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bpe-'));
  // the generic tokenizers and the families' byte-level ones, bundled without tfjs
  buildSync({
    stdin: {
      contents:
        "export * from './src/tokenizers';\n" +
        "export {GPT2Tokenizer} from './src/hub_models/gpt2/gpt2_tokenizer';\n" +
        "export {Llama3Tokenizer} from './src/hub_models/llama3/llama3_tokenizer';\n",
      resolveDir: root,
      loader: 'ts',
    },
    bundle: true,
    platform: 'node',
    format: 'cjs',
    outfile: path.join(bundleDir, 'tokenizers.js'),
    logLevel: 'silent',
  });
});
afterAll(() => fs.rmSync(bundleDir, {recursive: true, force: true}));

/** Runs `code` (with `tokenizers` in scope) in a child Node, limited to `seconds`, 4 GB of address space. */
function inChild(code: string, seconds: number): unknown {
  const script = path.join(bundleDir, `child${Math.random().toString(36).slice(2)}.js`);
  fs.writeFileSync(
    script,
    `const tokenizers = require(${JSON.stringify(path.join(bundleDir, 'tokenizers.js'))});\n` +
      `(async () => { const result = await (async () => { ${code} })();\n` +
      'process.stdout.write(JSON.stringify(result)); })();\n',
  );
  const r = spawnSync(
    'bash',
    ['-c', 'ulimit -v 4000000 && exec "$0" "$@"', process.execPath, '--expose-gc', script],
    {encoding: 'utf8', timeout: seconds * 1000},
  );
  if (r.signal != null || r.status !== 0) {
    throw new Error(
      `the child process ${r.signal != null ? `was killed (${r.signal}) after ${seconds} s` : `exited with ${r.status}`}: ${r.stderr.slice(-2000)}`,
    );
  }
  return JSON.parse(r.stdout);
}

describe('byte-pair encoding: linear cost', () => {
  test('one piece of n `a`: the map lookups of encode grow linearly at 2,000, 8,000 and 32,000 characters', () => {
    const {vocabulary, merges} = doublingRuns(10);
    const lookups: number[] = [];
    const original = Map.prototype.get;
    for (const n of [2000, 8000, 32000]) {
      // a fresh tokenizer each time: no cache
      const t = new BytePairTokenizer({vocabulary, merges});
      const text = 'a'.repeat(n);
      // Counts Map lookups; a loop that rescans the piece after each merge (~n^2 / 4 lookups)
      // is stopped at the budget instead of running for minutes.
      let count = 0;
      const budget = 64 * n;
      (Map.prototype as {get: unknown}).get = function (this: Map<unknown, unknown>, key: unknown) {
        if (++count > budget)
          throw new Error(`more than ${budget} map lookups for ${n} characters`);
        return original.call(this, key);
      };
      let ids: number[];
      try {
        ids = t.encode(text);
      } finally {
        Map.prototype.get = original;
      }
      lookups.push(count);
      expect(ids).toEqual(doublingIds(n, 10));
    }
    // A queue of pairs does a few lookups per character.
    for (const [i, n] of [2000, 8000, 32000].entries()) expect(lookups[i] / n).toBeLessThan(8);
    expect(lookups[2] / lookups[0]).toBeLessThan(16 * 1.5);
  });

  test('ties between equal ranks merge the leftmost pair first (keras-hub, Hugging Face)', () => {
    // Every "a a" pair has rank 0: merging the leftmost first gives aa aa a, then "aa a" at
    // the end: aa aaa. Rightmost first would give a aa aa (no "aa a" pair).
    const vocabulary = {a: 0, aa: 1, aaa: 2};
    const merges = ['a a', 'aa a'];
    const t = new BytePairTokenizer({vocabulary, merges});
    expect(t.encode('aaaaa')).toEqual([1, 2]);
    expect(t.encode('aaa')).toEqual([2]);
  });

  test('a 1 MB single-piece text encodes in a child process within a generous limit', () => {
    const result = inChild(
      `
      const {BytePairTokenizer} = tokenizers;
      const vocabulary = {a: 0}; const merges = []; let s = 'a';
      for (let k = 1; k <= 12; k++) { merges.push(s + ' ' + s); s += s; vocabulary[s] = k; }
      const t = new BytePairTokenizer({vocabulary, merges});
      const start = process.cpuUsage();
      const ids = t.encode('a'.repeat(1000000));
      const used = process.cpuUsage(start);
      return {ids, cpuMs: (used.user + used.system) / 1000};
      `,
      60,
    ) as {ids: number[]; cpuMs: number};
    expect(result.ids).toEqual(doublingIds(1000000, 12));
    // Measured: ~1 s of CPU on an idle core; the rescanning loop needs hours.
    expect(result.cpuMs).toBeLessThan(30000);
  });
});

describe('splitting: linear in the text, both splits', () => {
  test('1 MB whitespace runs (trailing spaces, tabs, no-break spaces, newlines) split in a child process within a generous limit', () => {
    const result = inChild(
      `
      const {GPT2Tokenizer, Llama3Tokenizer} = tokenizers;
      const vocabulary = {};
      const bytes = [...Array(256).keys()];
      // GPT-2's byte alphabet: printable bytes as themselves, the others from U+0100 on
      let extra = 0;
      for (const b of bytes) {
        const printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
        vocabulary[String.fromCharCode(printable ? b : 256 + extra++)] = b;
      }
      ['<|endoftext|>', '<|begin_of_text|>', '<|end_of_text|>', '<|start_header_id|>', '<|end_header_id|>', '<|eot_id|>']
        .forEach((t, i) => { vocabulary[t] = 256 + i; });
      const texts = [
        'a' + ' '.repeat(1000000),
        ' '.repeat(1000000) + 'a',
        ' \\t'.repeat(500000),
        'x' + '\\u00a0 '.repeat(500000),
        ' \\n'.repeat(500000) + ' ',
      ];
      const counts = [];
      for (const split of ['keras-hub', 'model']) {
        for (const T of [GPT2Tokenizer, Llama3Tokenizer]) {
          const t = new T({vocabulary, merges: [], split});
          for (const text of texts) counts.push(t.encode(text).length);
        }
      }
      return counts;
      `,
      120,
    ) as number[];
    expect(result).toHaveLength(20);
    // no merges: one id per UTF-8 byte, each text 1,000,000 bytes or more
    for (const count of result) expect(count).toBeGreaterThanOrEqual(1000000);
  });
});

describe('byte-pair encoding: the piece cache is bounded by bytes', () => {
  test('12 distinct 1 MB pieces and 40,000 distinct 200-character pieces leave little memory behind', () => {
    const result = inChild(
      `
      const {BytePairTokenizer} = tokenizers;
      const vocabulary = {};
      'abcdefghijklmnopqrstuvwxyz '.split('').forEach((c, i) => { vocabulary[c === ' ' ? '\\u0120' : c] = i; });
      const t = new BytePairTokenizer({vocabulary, merges: []});
      const heap = () => { global.gc(); global.gc(); const m = process.memoryUsage(); return m.heapUsed + m.arrayBuffers; };
      // encodes in a frame of its own: no stale reference to the ids is left on this one
      const encodedLength = (tokenizer, text) => tokenizer.encode(text).length;
      t.encode('warm up');
      const before = heap();
      let count = 0;
      for (let i = 0; i < 12; i++) count += encodedLength(t, 'a'.repeat(i + 1) + 'b'.repeat(1000000));
      const afterLong = heap();
      const short = new BytePairTokenizer({vocabulary, merges: []});
      const words = [];
      for (let i = 0; i < 40000; i++) words.push(' ' + 'x'.repeat(196) + i.toString(26).replace(/[0-9]/g, (d) => 'qrstuvwxyz'[d]));
      const text = words.join('');
      words.length = 0;
      const beforeShort = heap();
      count += encodedLength(short, text);
      const afterShort = heap();
      return {count, longGrowth: afterLong - before, shortGrowth: afterShort - beforeShort};
      `,
      120,
    ) as {count: number; longGrowth: number; shortGrowth: number};
    expect(result.count).toBeGreaterThan(12 * 1000000 + 40000 * 200);
    // Bounded by count: ~9 MB kept per 1 MB piece (108 MB), ~100 MB for 40,000 short pieces.
    expect(result.longGrowth).toBeLessThan(40 * 1024 * 1024);
    expect(result.shortGrowth).toBeLessThan(40 * 1024 * 1024);
  });
});

describe('byte-pair encoding: vocabulary ids', () => {
  test('ids must be whole numbers in [0, vocabularySize), each once', () => {
    const merges: string[] = [];
    expect(() => new BytePairTokenizer({vocabulary: {a: 1e15, b: 0}, merges})).toThrow(
      'BytePairTokenizer: vocabulary ids must be whole numbers in [0, 1] (the vocabulary has 2 entries); "a" has 1000000000000000.',
    );
    expect(() => new BytePairTokenizer({vocabulary: {a: 2, b: 0}, merges})).toThrow(/"a" has 2\./);
    expect(() => new BytePairTokenizer({vocabulary: {a: -1, b: 0}, merges})).toThrow(
      /"a" has -1\./,
    );
    expect(() => new BytePairTokenizer({vocabulary: {a: 0.5, b: 0}, merges})).toThrow(
      /"a" has 0\.5\./,
    );
    expect(() => new BytePairTokenizer({vocabulary: {a: 0, b: 0}, merges})).toThrow(
      'BytePairTokenizer: vocabulary id 0 is given to two tokens, "a" and "b"; expected each id once.',
    );
    expect(
      () =>
        new GPT2Tokenizer({
          vocabulary: new Map([
            ['<|endoftext|>', 0],
            ['a', 1e15],
          ]),
          merges,
        }),
    ).toThrow(/GPT2Tokenizer: vocabulary ids must be whole numbers in \[0, 1\]/);
    const t = new BytePairTokenizer({vocabulary: {a: 1, b: 0}, merges});
    expect(t.encode('ab')).toEqual([1, 0]);
    expect(t.vocabularySize).toBe(2);
  });
});
