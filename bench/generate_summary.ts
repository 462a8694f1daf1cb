/**
 * Pure parts of the generation benchmark against transformers.js (bench/generate_vs_transformers.ts):
 * which contender is compared with which, medians with min / max over rounds, the token check and
 * the markdown table written into bench/README.md. No I/O here (tested by
 * __tests__/bench/generate_summary.test.ts).
 */

export type Dtype = 'float32' | 'int8' | 'int4';

export interface Contender {
  /** e.g. `ours-wasm-float32`, `tjs-web-int8`. */
  id: string;
  /** Label in the table. */
  label: string;
  kind: 'ours' | 'tjs';
  /** ours: `wasm` | `cpu` | `tensorflow`; transformers.js: `node` | `web`. */
  runtime: string;
  dtype: Dtype;
  /** id of the transformers.js contender this one is divided by, or null. */
  versus: string | null;
}

/** What one child process reports (one round of one contender). */
export interface ChildResult {
  ttftMs: number;
  gapsMs: number[];
  totalMs: number;
  loadMs: number;
  maxRssBytes: number;
  ids: number[];
  maxAbsLogitsVsKeras?: number | null;
  timing?: string;
  runtimeVersion?: string;
  /** Ours: null when the timed generation ran the compiled step, else why the eager stepper ran. */
  compileRefusal?: string | null;
  /** Ours, when the compiled step ran: its kernels and memory (`wasm kernels, heap`). */
  step?: string | null;
}

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export interface Row {
  contender: Contender;
  /** Why there are no numbers (not available, skipped, failed), or null. */
  na: string | null;
  rounds: number;
  ttftMs: Spread | null;
  /** Per round: the median of the gaps between successive tokens; then over rounds. */
  msPerToken: Spread | null;
  /** Per round: (total - time to first token) / (tokens - 1); then over rounds. */
  msPerTokenMean: Spread | null;
  maxRssBytes: Spread | null;
  /** maxRssBytes median / the float32 weights' bytes. */
  rssOverWeights: number | null;
  /** msPerToken median / the `versus` row's, when both have numbers. */
  ratio: number | null;
  /** The generated ids differ from the reference (first differing position), or null. */
  mismatch: {position: number; expected: number; received: number} | null;
  /** How many of the generated tokens equal the reference's. */
  agreement: {same: number; of: number} | null;
  maxAbsLogitsVsKeras: number | null;
  /** Loading the model (files to a model ready to generate), over rounds. */
  loadMs: Spread | null;
  /** loadMs median / the `versus` row's. */
  loadRatio: number | null;
  /** ttftMs median / the `versus` row's. */
  ttftRatio: number | null;
  /** Ours: `compiled (...)` or `eager: <why>` (the last round's; rounds never differ here). */
  step: string | null;
}

export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new Error('median: expected at least one value, received none');
  const s = [...xs].sort((a, b) => a - b);
  const h = s.length >> 1;
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
}

export function spread(xs: readonly number[]): Spread {
  return {median: median(xs), min: Math.min(...xs), max: Math.max(...xs)};
}

/**
 * The contenders of one size. `cpu`: ours on tfjs cpu (the small size only: GPT-2 small's shape
 * takes minutes per generation there); `tensorflow`: ours on tfjs-node, when it loads.
 */
export function contenders(options: {cpu: boolean; tensorflow: boolean}): Contender[] {
  const out: Contender[] = [];
  for (const dtype of ['float32', 'int8', 'int4'] as const) {
    const q = dtype === 'float32' ? '' : `, ${dtype}`;
    const tq = dtype === 'int8' ? ", dtype 'q8'" : dtype === 'int4' ? ", dtype 'q4'" : '';
    out.push(
      {
        id: `tjs-node-${dtype}`,
        label: `transformers.js, onnxruntime-node${tq}`,
        kind: 'tjs',
        runtime: 'node',
        dtype,
        versus: null,
      },
      {
        id: `tjs-web-${dtype}`,
        label: `transformers.js, onnxruntime-web (wasm)${tq}`,
        kind: 'tjs',
        runtime: 'web',
        dtype,
        versus: null,
      },
      {
        id: `ours-wasm-${dtype}`,
        label: `this package, tfjs wasm${q}`,
        kind: 'ours',
        runtime: 'wasm',
        dtype,
        versus: `tjs-web-${dtype}`,
      },
    );
    if (options.tensorflow) {
      out.push({
        id: `ours-tensorflow-${dtype}`,
        label: `this package, tfjs-node${q}`,
        kind: 'ours',
        runtime: 'tensorflow',
        dtype,
        versus: `tjs-node-${dtype}`,
      });
    }
    if (options.cpu) {
      out.push({
        id: `ours-cpu-${dtype}`,
        label: `this package, tfjs cpu${q}`,
        kind: 'ours',
        runtime: 'cpu',
        dtype,
        versus: null,
      });
    }
  }
  return out;
}

/** The first position where `ids` differs from `reference` (lengths included), or null. */
export function firstMismatch(
  reference: readonly number[],
  ids: readonly number[],
): {position: number; expected: number; received: number} | null {
  const n = Math.max(reference.length, ids.length);
  for (let i = 0; i < n; i++) {
    if (reference[i] !== ids[i]) return {position: i, expected: reference[i], received: ids[i]};
  }
  return null;
}

/**
 * One row per contender from its rounds (`results[id]`: what each round reported; `na[id]`: why
 * it has none). `reference`: the ids every float32 contender must generate (torch's greedy ids),
 * `promptLength` positions of prompt first; `weightBytes`: the float32 weights' bytes.
 */
export function summarize(
  list: readonly Contender[],
  results: Readonly<Record<string, readonly ChildResult[]>>,
  na: Readonly<Record<string, string>>,
  reference: readonly number[],
  promptLength: number,
  weightBytes: number,
): Row[] {
  const rows: Row[] = list.map((c) => {
    const rs = results[c.id] ?? [];
    if (na[c.id] != null || rs.length === 0) {
      return {
        contender: c,
        na: na[c.id] ?? 'no result',
        rounds: 0,
        ttftMs: null,
        msPerToken: null,
        msPerTokenMean: null,
        maxRssBytes: null,
        rssOverWeights: null,
        ratio: null,
        mismatch: null,
        agreement: null,
        maxAbsLogitsVsKeras: null,
        loadMs: null,
        loadRatio: null,
        ttftRatio: null,
        step: null,
      };
    }
    // the worst round decides: any round with other ids is reported
    let mismatch: Row['mismatch'] = null;
    for (const r of rs) mismatch ??= firstMismatch(reference, r.ids);
    const gen = reference.length - promptLength;
    const last = rs[rs.length - 1].ids;
    let same = 0;
    for (let i = promptLength; i < reference.length; i++) if (last[i] === reference[i]) same++;
    const rss = spread(rs.map((r) => r.maxRssBytes));
    const logits = rs
      .map((r) => r.maxAbsLogitsVsKeras)
      .filter((v): v is number => typeof v === 'number');
    return {
      contender: c,
      na: null,
      rounds: rs.length,
      ttftMs: spread(rs.map((r) => r.ttftMs)),
      msPerToken: spread(rs.map((r) => median(r.gapsMs))),
      msPerTokenMean: spread(rs.map((r) => (r.totalMs - r.ttftMs) / r.gapsMs.length)),
      maxRssBytes: rss,
      rssOverWeights: rss.median / weightBytes,
      ratio: null,
      mismatch,
      agreement: {same, of: gen},
      maxAbsLogitsVsKeras: logits.length ? Math.max(...logits) : null,
      loadMs: spread(rs.map((r) => r.loadMs)),
      loadRatio: null,
      ttftRatio: null,
      step: stepOf(rs[rs.length - 1]),
    };
  });
  for (const row of rows) {
    const other = rows.find((r) => r.contender.id === row.contender.versus);
    if (row.msPerToken != null && other?.msPerToken != null) {
      row.ratio = row.msPerToken.median / other.msPerToken.median;
      row.ttftRatio = row.ttftMs!.median / other.ttftMs!.median;
      row.loadRatio = row.loadMs!.median / other.loadMs!.median;
    }
  }
  return rows;
}

/** Which step a round of ours ran: `compiled (...)`, `eager: <why>`; null for transformers.js. */
function stepOf(r: ChildResult): string | null {
  if (r.compileRefusal === undefined) return null;
  if (r.compileRefusal === null) return r.step ? `compiled (${r.step})` : 'compiled';
  return `eager: ${r.compileRefusal}`;
}

const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const cell = (s: Spread, f: (x: number) => string): string =>
  `${f(s.median)} (${f(s.min)} - ${f(s.max)})`;
const gb = (bytes: number): string => `${(bytes / 1e9).toFixed(2)} GB`;

/** The markdown table of one size: medians over rounds with (min - max). */
export function markdownTable(rows: readonly Row[]): string[] {
  const lines = [
    '| contender | time to first token ms | ms / token | x transformers.js | peak memory (x weights) | tokens | load ms | first token, load x transformers.js | step |',
    '| --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- |',
  ];
  for (const r of rows) {
    const c = r.contender;
    if (r.na != null) {
      lines.push(`| ${c.label} | ${r.na} | | | | | | | |`);
      continue;
    }
    const tokens =
      r.mismatch == null
        ? 'same as torch'
        : c.dtype === 'int8' || c.dtype === 'int4'
          ? `${r.agreement!.same} / ${r.agreement!.of} as float32 torch`
          : `**MISMATCH** at ${r.mismatch.position} (${r.mismatch.received}, torch ${r.mismatch.expected})`;
    lines.push(
      `| ${c.label} | ${cell(r.ttftMs!, ms)} | ${cell(r.msPerToken!, ms)} | ` +
        `${r.ratio == null ? '' : `**${r.ratio.toFixed(2)}x**`} | ` +
        `${gb(r.maxRssBytes!.median)} (${r.rssOverWeights!.toFixed(1)}x) | ${tokens} | ` +
        `${cell(r.loadMs!, ms)} | ` +
        `${r.ttftRatio == null ? '' : `${r.ttftRatio.toFixed(2)}x, ${r.loadRatio!.toFixed(2)}x`} | ` +
        `${r.step == null ? '' : r.step.replace(/\|/g, '/')} |`,
    );
  }
  return lines;
}

/** Float32 contenders whose ids differ from the reference: one line each (empty when none). */
export function mismatchLines(size: string, rows: readonly Row[]): string[] {
  return rows
    .filter((r) => r.contender.dtype === 'float32' && r.mismatch != null)
    .map(
      (r) =>
        `${size}: ${r.contender.label} generated other tokens than torch: position ${r.mismatch!.position}, ` +
        `${r.mismatch!.received} instead of ${r.mismatch!.expected}`,
    );
}

/** The issue's acceptance bounds for one of our rows against its transformers.js row. */
export interface Targets {
  /** ms / token, at most this multiple of transformers.js'. */
  msPerToken: number;
  /** Time to first token, at most this multiple. */
  ttft: number;
  /** Loading, at most this multiple. */
  load: number;
  /** Peak resident memory, at most this multiple of the float32 weights' bytes. */
  memory: number;
}

/** Bounds per runtime of ours (float32): tfjs wasm against onnxruntime-web, tfjs-node against onnxruntime-node. */
export const TARGETS: Readonly<Record<string, Targets>> = {
  wasm: {msPerToken: 1.0, ttft: 1.5, load: 1.0, memory: 1.3},
  tensorflow: {msPerToken: 1.3, ttft: 1.5, load: 1.0, memory: 1.3},
};

/**
 * One line per float32 row of ours that has bounds (TARGETS) and a transformers.js row to divide
 * by: each measured ratio against its bound, `met` or `NOT MET`, and whether the compiled step ran.
 */
export function targetLines(size: string, rows: readonly Row[]): string[] {
  const out: string[] = [];
  for (const r of rows) {
    const c = r.contender;
    const t = TARGETS[c.runtime];
    if (c.kind !== 'ours' || c.dtype !== 'float32' || t == null || r.ratio == null) continue;
    const check = (what: string, x: number, bound: number, unit = 'x transformers.js'): string =>
      `${what} ${x.toFixed(2)}${unit} (target <= ${bound.toFixed(1)}): ${x <= bound ? 'met' : 'NOT MET'}`;
    out.push(
      `${size}, ${c.label}: ` +
        [
          check('ms / token', r.ratio, t.msPerToken),
          check('first token', r.ttftRatio!, t.ttft),
          check('loading', r.loadRatio!, t.load),
          check('peak memory', r.rssOverWeights!, t.memory, 'x the float32 weights'),
          `step: ${r.step ?? 'not reported'}`,
        ].join('; '),
    );
  }
  return out;
}
