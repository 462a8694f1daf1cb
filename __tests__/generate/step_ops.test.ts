/**
 * The compiled step's operation table (src/generate/step_ops.ts): every operation of `ProgramOp`
 * has its one entry (an entry left out is a type error, checked here), the cut's operands and the
 * runner's dispatch come from it, and an operation outside it is an error naming it, never an op
 * that silently does nothing.
 */
import {
  DENSE_ROWS_FROM,
  operands,
  ProgramOp,
  renamedReads,
  runOp,
  STEP_OPS,
  StepOpTable,
  type OpContext,
} from '../../src/generate/step_ops';

describe('the operation table', () => {
  it('a table without an entry for an operation does not type-check', () => {
    const partial = Object.fromEntries(
      Object.entries(STEP_OPS).filter(([name]) => name !== 'lastRows'),
    ) as Omit<StepOpTable, 'lastRows'>;
    // @ts-expect-error an operation left out of the table (here lastRows) is a type error
    const missing: StepOpTable = partial;
    expect(Object.keys(missing)).not.toContain('lastRows');
  });

  it("each operation's operands are its entry's: reads and writes by field, renamed for the cut", () => {
    const attention: ProgramOp = {
      op: 'attention',
      q: 1,
      k: 2,
      v: 3,
      heads: {heads: 2, kvHeads: 1, headDim: 4, scale: 0.5},
      cache: 0,
      keyMask: false,
      out: 4,
    };
    expect(operands(attention)).toEqual({reads: [1, 2, 3], writes: [4]});
    const quantize: ProgramOp = {op: 'quantize', x: 5, k: 8, q: 6, qs: 7};
    expect(operands(quantize)).toEqual({reads: [5], writes: [6, 7]});
    expect(renamedReads(attention, new Map([[2, 9]]))).toEqual({...attention, k: 9});
    // the weights and the output are not renamed
    const dense: ProgramOp = {op: 'dense', x: 1, w: 1, bias: 1, k: 4, n: 4, act: 0, out: 1};
    expect(renamedReads(dense, new Map([[1, 8]]))).toEqual({...dense, x: 8});
  });

  it('the runner dispatches through the table; an operation outside it is an error naming it', () => {
    const calls: unknown[][] = [];
    const context = {
      kernels: {add: (...args: unknown[]) => calls.push(args)},
      B: 2,
      t: 3,
      at: (v: number) => v * 16,
      rowsOf: () => 6,
    } as unknown as OpContext;
    runOp({op: 'add', a: 1, b: 2, width: 4, out: 3}, context);
    expect(calls).toEqual([[24, 16, 32, 48]]);
    expect(() => runOp({op: 'rmsNormal'} as unknown as ProgramOp, context)).toThrow(
      /compiled step: expected an operation of the table \(dense, .*lastRows\), received 'rmsNormal'/,
    );
  });

  it('one rows threshold: a float32 product of DENSE_ROWS_FROM rows or more packs them (denseRows), fewer run row by row (dense)', () => {
    const calls: string[] = [];
    const context = (rows: number) =>
      ({
        kernels: {
          dense: () => calls.push(`dense ${rows}`),
          denseRows: () => calls.push(`denseRows ${rows}`),
        },
        at: () => 0,
        w: () => 0,
        rowsOf: () => rows,
        rowsWork: 16,
      }) as unknown as OpContext;
    const dense: ProgramOp = {op: 'dense', x: 0, w: 0, bias: -1, k: 4, n: 4, act: 0, out: 1};
    for (const rows of [1, DENSE_ROWS_FROM - 1, DENSE_ROWS_FROM, DENSE_ROWS_FROM + 1]) {
      runOp(dense, context(rows));
    }
    expect(DENSE_ROWS_FROM).toBe(5);
    expect(calls).toEqual(['dense 1', 'dense 4', 'denseRows 5', 'denseRows 6']);
  });

  it('every entry reads and writes value fields and runs', () => {
    for (const [name, spec] of Object.entries(STEP_OPS)) {
      expect([name, spec.writes.length > 0, typeof spec.run]).toEqual([name, true, 'function']);
    }
  });
});
