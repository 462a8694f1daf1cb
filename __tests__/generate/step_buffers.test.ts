/**
 * Where a compiled step's values live (src/generate/step_buffers.ts): values whose lives overlap
 * never share a byte, values whose lives do not may, an alias (a cut's last rows) keeps its
 * value's place and life. Lives are worked out here from the ops' own fields, apart from the
 * planner's use of `operands`.
 */
import type {ProgramValue} from '../../src/generate/program_builder';
import {planBuffers, programBuffers} from '../../src/generate/step_buffers';
import type {StepProgram} from '../../src/generate/program_builder';
import type {ProgramOp} from '../../src/generate/step_ops';

const value = (index: number, width: number, rows: 'all' | 'last' = 'all', aliasOf = -1) =>
  ({index, width, dtype: 'float32', rows, aliasOf}) as ProgramValue;

/** Each value's [first, last] op (input -1, output ops.length), from the ops' fields. */
function lives(values: ProgramValue[], ops: ProgramOp[], input: number, output: number) {
  const root = (v: number): number => (values[v].aliasOf >= 0 ? root(values[v].aliasOf) : v);
  const span = new Map<number, [number, number]>();
  const use = (v: number, at: number) => {
    const r = root(v);
    const s = span.get(r) ?? [at, at];
    span.set(r, [Math.min(s[0], at), Math.max(s[1], at)]);
  };
  use(input, -1);
  ops.forEach((o, i) => {
    const f = o as unknown as Record<string, number>;
    const fields =
      o.op === 'add' || o.op === 'mul'
        ? ['a', 'b', 'out']
        : o.op === 'gather'
          ? ['ids', 'out']
          : ['x', 'out'];
    for (const k of fields) use(f[k], i);
  });
  use(output, ops.length);
  return {span, root};
}

/** Every pair of values whose lives overlap occupies disjoint bytes. */
function expectNoClash(
  values: ProgramValue[],
  ops: ProgramOp[],
  input: number,
  output: number,
  rowsAll: number,
) {
  const plan = planBuffers(values, ops, input, output, rowsAll, 1);
  const {span, root} = lives(values, ops, input, output);
  const bytes = (v: ProgramValue) => (v.rows === 'all' ? rowsAll : 1) * v.width * 4;
  const roots = [...span.keys()];
  for (const a of roots) {
    expect(plan.offsets[a] % 16).toBe(0);
    expect(plan.offsets[a] + bytes(values[a])).toBeLessThanOrEqual(plan.bytes);
    for (const b of roots) {
      if (a >= b) continue;
      const [fa, la] = span.get(a)!;
      const [fb, lb] = span.get(b)!;
      if (fa <= lb && fb <= la) {
        const disjoint =
          plan.offsets[a] + bytes(values[a]) <= plan.offsets[b] ||
          plan.offsets[b] + bytes(values[b]) <= plan.offsets[a];
        expect({a, b, disjoint}).toEqual({a, b, disjoint: true});
      }
    }
  }
  for (let v = 0; v < values.length; v++) {
    if (span.has(root(v))) expect(plan.offsets[v]).toBe(plan.offsets[root(v)]);
  }
  return plan;
}

describe('planBuffers', () => {
  it('a chain: a value dead before the next is written shares its bytes; live ones never', () => {
    // ids(0) -> gather(1) -> activate(2) -> activate(3) -> add(3, 1)(4) -> activate(5)
    const values = [0, 1, 2, 3, 4, 5].map((i) => value(i, i === 0 ? 1 : 8));
    const ops: ProgramOp[] = [
      {op: 'gather', ids: 0, table: 0, dim: 8, out: 1},
      {op: 'activate', x: 1, act: 0, width: 8, out: 2},
      {op: 'activate', x: 2, act: 0, width: 8, out: 3},
      {op: 'add', a: 3, b: 1, width: 8, out: 4},
      {op: 'activate', x: 4, act: 0, width: 8, out: 5},
    ] as ProgramOp[];
    const plan = expectNoClash(values, ops, 0, 5, 4);
    // an op's output never takes its input's bytes (3 is written while 2 is read)
    expect(plan.offsets[3]).not.toBe(plan.offsets[2]);
    // 5 is written (op 4) after 1, 2 and 3 died (ops 3, 2, 3): it takes the bytes of one of them
    expect([plan.offsets[1], plan.offsets[2], plan.offsets[3]]).toContain(plan.offsets[5]);
    // four float32 rows of 8 each: three values alive at once at most, plus the ids
    expect(plan.bytes).toBeLessThan(5 * 4 * 8 * 4);
  });

  it('an alias (the last rows cut in place) keeps its value’s place and life', () => {
    const values = [
      value(0, 1),
      value(1, 8),
      value(2, 8),
      value(3, 8, 'last', 1),
      value(4, 8, 'last'),
    ];
    const ops: ProgramOp[] = [
      {op: 'gather', ids: 0, table: 0, dim: 8, out: 1},
      {op: 'activate', x: 1, act: 0, width: 8, out: 2},
      {op: 'lastRows', x: 1, width: 8, out: 3},
      {op: 'add', a: 3, b: 3, width: 8, out: 4},
    ] as ProgramOp[];
    const plan = expectNoClash(values, ops, 0, 4, 4);
    expect(plan.offsets[3]).toBe(plan.offsets[1]);
    // 1 lives through its alias' read (op 3): 4 cannot take its bytes
    expect(plan.offsets[4]).not.toBe(plan.offsets[1]);
  });

  it('random programs: no two live values share a byte', () => {
    let seed = 7;
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let trial = 0; trial < 50; trial++) {
      const values = [value(0, 1)];
      const ops: ProgramOp[] = [];
      values.push(value(1, 1 + rand(40)));
      ops.push({op: 'gather', ids: 0, table: 0, dim: values[1].width, out: 1} as ProgramOp);
      for (let i = 0; i < 30; i++) {
        const out = values.length;
        const a = 1 + rand(out - 1);
        const b = 1 + rand(out - 1);
        values.push(value(out, values[a].width));
        ops.push(
          rand(2) === 0
            ? ({op: 'activate', x: a, act: 0, width: values[a].width, out} as ProgramOp)
            : ({op: 'add', a, b, width: values[a].width, out} as ProgramOp),
        );
      }
      expectNoClash(values, ops, 0, values.length - 1, 1 + rand(8));
    }
  });

  it("programBuffers: a program's plan made once per row counts, the plan planBuffers gives", () => {
    const values = [value(0, 1), value(1, 8), value(2, 8)];
    const ops = [
      {op: 'gather', ids: 0, table: 0, dim: 8, out: 1},
      {op: 'activate', x: 1, act: 0, width: 8, out: 2},
    ] as ProgramOp[];
    const program = {values, ops, ids: 0, logits: 2} as unknown as StepProgram;
    const first = programBuffers(program, 4, 1);
    expect(first).toEqual(planBuffers(values, ops, 0, 2, 4, 1));
    expect(programBuffers(program, 4, 1)).toBe(first);
    const other = programBuffers(program, 8, 2);
    expect(other).not.toBe(first);
    expect(other).toEqual(planBuffers(values, ops, 0, 2, 8, 2));
    // another program with the same rows is planned for itself
    expect(programBuffers({...program} as StepProgram, 4, 1)).not.toBe(first);
  });
});
