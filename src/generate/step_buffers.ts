/**
 * Where a compiled step's values live in its memory: one block shared by values whose lives do
 * not overlap (a value lives from the op that writes it to the last op that reads it), as
 * TensorFlow Lite's arena planner places tensors. Without sharing a prefill's rows take every
 * value of every block at once (SmolLM2-135M's shape, 32 rows: about 40 MB); shared, about two
 * blocks' worth.
 */
import type {ProgramValue, StepProgram} from './program_builder';
import {operands} from './step_ops';
import type {ProgramOp} from './step_ops';

/** Byte alignment of each value (the SIMD kernels' 16). */
const ALIGN = 16;

/** The values' places: byte offsets from the block's start, and the block's size. */
export interface BufferPlan {
  readonly offsets: readonly number[];
  readonly bytes: number;
}

/**
 * Places `values` (rows `all` = `allRows` rows, `last` = `lastRows`) for `ops`: `input` is
 * written before the first op, `output` read after the last. A value that is an alias of another
 * (`aliasOf`) shares its place and extends its life. Two values share bytes only when one's last
 * read comes before the other's write.
 */
export function planBuffers(
  values: readonly ProgramValue[],
  ops: readonly ProgramOp[],
  input: number,
  output: number,
  allRows: number,
  lastRows: number,
): BufferPlan {
  const root = (v: number): number => {
    let r = v;
    while (values[r].aliasOf >= 0) r = values[r].aliasOf;
    return r;
  };
  const first = new Map<number, number>();
  const last = new Map<number, number>();
  const touch = (v: number, at: number) => {
    const r = root(v);
    first.set(r, Math.min(first.get(r) ?? at, at));
    last.set(r, Math.max(last.get(r) ?? at, at));
  };
  touch(input, -1);
  ops.forEach((o, i) => {
    const {reads, writes} = operands(o);
    for (const v of reads) touch(v, i);
    for (const v of writes) touch(v, i);
  });
  touch(output, ops.length);
  const size = (v: ProgramValue) => {
    const bytes = (v.rows === 'all' ? allRows : lastRows) * v.width * (v.dtype === 'int8' ? 1 : 4);
    return Math.ceil(bytes / ALIGN) * ALIGN;
  };
  // the roots that ops use, largest first (earliest first among equals)
  const order = [...first.keys()].sort(
    (a, b) => size(values[b]) - size(values[a]) || (first.get(a) ?? 0) - (first.get(b) ?? 0),
  );
  const placed: Array<{at: number; bytes: number; from: number; to: number}> = [];
  const place = new Map<number, number>();
  let total = 0;
  for (const v of order) {
    const bytes = size(values[v]);
    const from = first.get(v) as number;
    const to = last.get(v) as number;
    const busy = placed.filter((p) => p.from <= to && from <= p.to).sort((a, b) => a.at - b.at);
    let at = 0;
    for (const p of busy) {
      if (at + bytes <= p.at) break;
      at = Math.max(at, p.at + p.bytes);
    }
    placed.push({at, bytes, from, to});
    place.set(v, at);
    total = Math.max(total, at + bytes);
  }
  // a value no op touches (none is expected) gets the block's start: nothing reads it
  const offsets = values.map((_, i) => place.get(root(i)) ?? 0);
  return {offsets, bytes: Math.max(total, ALIGN)};
}

/** Each program's plans by their row counts (`all`:`last`): a kept program is planned once. */
const plans = new WeakMap<StepProgram, Map<string, BufferPlan>>();

/**
 * {@link planBuffers} for `program` (its ids written first, its logits read last), made once per
 * program and row counts: a program kept between `generate` calls is not planned again (SmolLM2-135M's
 * shape: about 10 ms a plan).
 */
export function programBuffers(
  program: StepProgram,
  allRows: number,
  lastRows: number,
): BufferPlan {
  let byRows = plans.get(program);
  if (byRows == null) {
    byRows = new Map();
    plans.set(program, byRows);
  }
  const key = `${allRows}:${lastRows}`;
  let plan = byRows.get(key);
  if (plan == null) {
    plan = planBuffers(program.values, program.ops, program.ids, program.logits, allRows, lastRows);
    byRows.set(key, plan);
  }
  return plan;
}
