/**
 * The compiled step's cut to each row's last position (src/generate/step_cut.ts), made once after
 * the last attention op: values read after it and written before get a `lastRows` there (in
 * place), the output included; int8 rows quantized before it are quantized again from the last
 * rows of their input; values written after it are `last` rows; the ops up to it are the ones a
 * chunk whose logits are dropped runs.
 */
import type {ProgramValue} from '../../src/generate/program_builder';
import {cutToLastRows} from '../../src/generate/step_cut';
import type {ProgramOp} from '../../src/generate/step_ops';

const value = (index: number, width: number, dtype: ProgramValue['dtype'] = 'float32') =>
  ({index, width, dtype, rows: 'all', aliasOf: -1}) as ProgramValue;

describe('cutToLastRows', () => {
  it('cuts after the last attention op: lastRows in place, int8 rows quantized again, the output cut', () => {
    const values = [
      value(0, 1, 'int32'), // ids
      value(1, 4), // embedded rows
      value(2, 4, 'int8'), // their quantized rows
      value(3, 1), // and scales
      value(4, 4), // a product
      value(5, 4), // attention
      value(6, 4), // a product after it, of the rows quantized before it
      value(7, 4), // the output
    ];
    const heads = {heads: 1, kvHeads: 1, headDim: 4, scale: 0.5};
    const int8 = {w: 0, ws: 0, bias: -1, k: 4, n: 4, act: 0 as const};
    const ops: ProgramOp[] = [
      {op: 'gather', ids: 0, table: 0, dim: 4, out: 1},
      {op: 'quantize', x: 1, k: 4, q: 2, qs: 3},
      {op: 'denseInt8', q: 2, qs: 3, ...int8, out: 4},
      {op: 'attention', q: 4, k: 4, v: 4, heads, cache: 0, keyMask: false, out: 5},
      {op: 'denseInt8', q: 2, qs: 3, ...int8, out: 6},
      {op: 'add', a: 5, b: 6, width: 4, out: 7},
    ];
    const cut = cutToLastRows(values, ops, 7);
    expect(cut.cachedOps).toBe(4);
    expect(cut.output).toBe(7);
    expect(cut.ops).toEqual([
      ...ops.slice(0, 4),
      {op: 'lastRows', x: 1, width: 4, out: 8},
      {op: 'quantize', x: 8, k: 4, q: 9, qs: 10},
      {op: 'lastRows', x: 5, width: 4, out: 11},
      {op: 'denseInt8', q: 9, qs: 10, ...int8, out: 6},
      {op: 'add', a: 11, b: 6, width: 4, out: 7},
    ]);
    expect(cut.values.map((v) => [v.index, v.dtype, v.rows, v.aliasOf])).toEqual([
      [0, 'int32', 'all', -1],
      [1, 'float32', 'all', -1],
      [2, 'int8', 'all', -1],
      [3, 'float32', 'all', -1],
      [4, 'float32', 'all', -1],
      [5, 'float32', 'all', -1],
      [6, 'float32', 'last', -1],
      [7, 'float32', 'last', -1],
      [8, 'float32', 'last', 1], // in place: the buffer of value 1
      [9, 'int8', 'last', -1],
      [10, 'float32', 'last', -1],
      [11, 'float32', 'last', 5],
    ]);
  });

  it('an output written by the last attention op itself is cut after it', () => {
    const values = [value(0, 1, 'int32'), value(1, 4), value(2, 4)];
    const heads = {heads: 1, kvHeads: 1, headDim: 4, scale: 0.5};
    const ops: ProgramOp[] = [
      {op: 'gather', ids: 0, table: 0, dim: 4, out: 1},
      {op: 'attention', q: 1, k: 1, v: 1, heads, cache: 0, keyMask: false, out: 2},
    ];
    const cut = cutToLastRows(values, ops, 2);
    expect([cut.cachedOps, cut.output]).toEqual([2, 3]);
    expect(cut.ops.slice(2)).toEqual([{op: 'lastRows', x: 2, width: 4, out: 3}]);
  });
});
