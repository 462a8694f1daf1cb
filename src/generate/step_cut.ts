/**
 * The compiled step's cut to each row's last position, made once when a program is built
 * (program_builder.ts): after the last attention op only the last row of each batch row is
 * needed (the logits are read there alone), so a prefill computes the last block's output
 * projection and feed-forward, the final norm and the logits for the last rows only.
 */
import type {ProgramValue} from './program_builder';
import {operands, ProgramOp, renamedReads} from './step_ops';

/**
 * `ops` cut right after their last attention op (before every op when there is none). Every op
 * but attention works row by row, so the rows it computes are the rows it reads. The values read
 * after the cut, `output` included, that were written before it get a `lastRows` there (in place:
 * the last row of each batch row moved to the front of the same buffer); int8 rows quantized
 * before the cut (lastRows moves float32 / int32 rows) are quantized again there from the last
 * rows of their float32 input. The values written after the cut become `last` rows. Returns the
 * ops, the values, the number of ops up to the cut (`cachedOps`: a chunk whose logits are
 * dropped runs these) and the value that holds `output`'s last rows.
 */
export function cutToLastRows(
  values: readonly ProgramValue[],
  ops: readonly ProgramOp[],
  output: number,
): {values: ProgramValue[]; ops: ProgramOp[]; cachedOps: number; output: number} {
  let at = 0;
  ops.forEach((o, i) => {
    if (o.op === 'attention') at = i + 1;
  });
  const out = values.slice();
  const writtenAfter = new Set<number>();
  for (const o of ops.slice(at)) for (const v of operands(o).writes) writtenAfter.add(v);
  /** The op before the cut that wrote each value. */
  const writer = new Map<number, ProgramOp>();
  for (const o of ops.slice(0, at)) for (const v of operands(o).writes) writer.set(v, o);
  const to = new Map<number, number>();
  const cuts: ProgramOp[] = [];
  const newValue = (like: ProgramValue, aliasOf: number): ProgramValue => {
    const v: ProgramValue = {...like, index: out.length, rows: 'last', aliasOf};
    out.push(v);
    return v;
  };
  const cut = (v: number): number => {
    if (writtenAfter.has(v)) return v;
    const known = to.get(v);
    if (known != null) return known;
    const w = writer.get(v);
    if (w?.op === 'quantize') {
      // its rows quantized again from the last rows of its input (row by row: the same values)
      const x = cut(w.x);
      const q = newValue(out[w.q], -1);
      const qs = newValue(out[w.qs], -1);
      cuts.push({op: 'quantize', x, k: w.k, q: q.index, qs: qs.index});
      to.set(w.q, q.index);
      to.set(w.qs, qs.index);
      return v === w.q ? q.index : qs.index;
    }
    const last = newValue(out[v], v);
    to.set(v, last.index);
    cuts.push({op: 'lastRows', x: v, width: last.width, out: last.index});
    return last.index;
  };
  for (const o of ops.slice(at)) for (const v of operands(o).reads) cut(v);
  const logits = cut(output);
  for (const v of writtenAfter) out[v] = {...out[v], rows: 'last'};
  const later = ops.slice(at).map((o) => renamedReads(o, to));
  return {
    values: out,
    ops: [...ops.slice(0, at), ...cuts, ...later],
    cachedOps: at,
    output: logits,
  };
}
