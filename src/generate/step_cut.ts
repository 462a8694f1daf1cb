/**
 * The compiled step's cut to each row's last position, moved from after the last attention node
 * to right after the last attention op of a program (`compileStep` runs it last): a prefill then
 * computes the last block's output projection and feed-forward for the last rows only.
 */
import type {ProgramValue} from './step_compile';
import {operands, ProgramOp, renamedReads} from './step_ops';

/**
 * The cut to the last rows moved from after the last attention node to right after the last
 * attention op: within a node that holds an attention and more (a TransformerDecoder's
 * feed-forward part after its attention), the ops after the attention then compute the last
 * row of each batch row only, not every position of a prefill. Every op but attention works row
 * by row, so the rows it computes are the rows it reads. The values read after the cut that were
 * written before it get a `lastRows` there (in place, as at a node cut); the values written after
 * it become `last` rows; a `lastRows` after it of a value that is now `last` is dropped (its value
 * shares that buffer, which then holds the last rows already).
 */
export function cutAfterLastAttention(
  values: ProgramValue[],
  ops: ProgramOp[],
  cachedOps: number,
): {values: ProgramValue[]; ops: ProgramOp[]; cachedOps: number} {
  let at = -1;
  ops.forEach((o, i) => {
    if (o.op === 'attention') at = i + 1;
  });
  if (at < 0 || at >= cachedOps) return {values, ops, cachedOps};
  const out = values.slice();
  const writtenAfter = new Set<number>();
  for (const o of ops.slice(at)) for (const v of operands(o).writes) writtenAfter.add(v);
  const to = new Map<number, number>();
  const cuts: ProgramOp[] = [];
  for (const o of ops.slice(at)) {
    for (const v of operands(o).reads) {
      if (writtenAfter.has(v) || to.has(v) || out[v].rows === 'last') continue;
      // int8 rows quantized before the cut (lastRows moves float32 / int32 rows): the cut stays
      // after the node (no rule reads them there today: a node's quantized rows are its own)
      if (out[v].dtype === 'int8') return {values, ops, cachedOps};
      const last: ProgramValue = {...out[v], index: out.length, rows: 'last', aliasOf: v};
      out.push(last);
      to.set(v, last.index);
      cuts.push({op: 'lastRows', x: v, width: last.width, out: last.index});
    }
  }
  for (const v of writtenAfter) {
    if (out[v].rows === 'all') out[v] = {...out[v], rows: 'last'};
  }
  const later: ProgramOp[] = [];
  for (const o of ops.slice(at)) {
    const r = renamedReads(o, to);
    if (r.op === 'lastRows' && out[r.x].rows === 'last') {
      // its value shares the buffer of x, which holds the last rows already (aliasOf: the
      // buffer's first value, allocated before it)
      let root = r.x;
      while (out[root].aliasOf >= 0) root = out[root].aliasOf;
      out[r.out] = {...out[r.out], aliasOf: root};
      continue;
    }
    later.push(r);
  }
  return {values: out, ops: [...ops.slice(0, at), ...cuts, ...later], cachedOps: at};
}
