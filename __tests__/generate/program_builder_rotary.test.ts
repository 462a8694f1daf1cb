/**
 * The rotary decoders' emitter methods (src/generate/program_builder.ts): `rope` before and after
 * the cut to the last rows (step_cut.ts moves it; after the cut each row is its batch row's last
 * position), `rmsNorm` with groups and an offset, `scale`, and their refusals; programs run op by
 * op on the plain-JavaScript kernels and compared with loops of the formulas written here.
 */
import * as tf from '@tensorflow/tfjs';

import {jsStepKernels} from '../../src/kernels/step_kernels_js';
import {ProgramBuilder, type StepProgram} from '../../src/generate/program_builder';
import {runOp, type OpContext} from '../../src/generate/step_ops';
import type {StepValue, StepWeight} from '../../src/generate/step_program';
import {values} from '../helpers/kernel_reference';

const f = Math.fround;

/** Runs `program` on positions start .. start + t - 1 of B rows of `ids`; returns its output rows. */
function run(
  program: StepProgram,
  ids: number[][],
  start: number,
  t: number,
  maxLength: number,
): Float32Array {
  const memory = new WebAssembly.Memory({initial: 16});
  let top = 16;
  const alloc = (bytes: number) => {
    const at = top;
    top = (top + bytes + 15) & ~15;
    if (top > memory.buffer.byteLength) {
      memory.grow(Math.ceil((top - memory.buffer.byteLength) / 65536));
    }
    return at;
  };
  const B = ids.length;
  const offsets: number[] = [];
  for (const v of program.values) {
    offsets.push(v.aliasOf >= 0 ? offsets[v.aliasOf] : alloc(B * t * v.width * 4));
  }
  const put = (a: Float32Array) => {
    const at = alloc(a.length * 4);
    new Float32Array(memory.buffer, at, a.length).set(a);
    return at;
  };
  const weights = program.weights.map((w) => put(w.dataSync() as Float32Array));
  const constants = program.constants.map(put);
  const caches = program.caches.map((w) => [
    alloc(B * maxLength * w * 4),
    alloc(B * maxLength * w * 4),
  ]);
  const idView = new Int32Array(memory.buffer, offsets[program.ids], B * t);
  ids.forEach((row, b) => row.slice(start, start + t).forEach((id, i) => (idView[b * t + i] = id)));
  const c: OpContext = {
    kernels: jsStepKernels(memory),
    B,
    t,
    start,
    maxLength,
    at: (v) => offsets[v],
    w: (i) => (i < 0 ? 0 : weights[i]),
    tensor: () => null,
    backendRowsFrom: 0,
    packed: () => 0,
    constant: (i) => constants[i],
    rowsOf: (v) => (program.values[v].rows === 'all' ? B * t : B),
    isLast: (v) => program.values[v].rows === 'last',
    f32: () => new Float32Array(memory.buffer),
    cache: (i) => [caches[i][0], caches[i][1]],
    keyMask: 0,
    work: alloc(maxLength * 4),
    rowsWork: 0,
  };
  for (const o of program.ops) runOp(o, c);
  const out = program.values[program.logits];
  return new Float32Array(memory.buffer, offsets[program.logits], B * out.width).slice();
}

/** The rotary formula on one row at `position` (float64, the angle float32). */
function ropeRow(
  x: ArrayLike<number>,
  position: number,
  heads: number,
  headDim: number,
  freqs: Float32Array,
) {
  const out = new Float64Array(x.length);
  const half = headDim / 2;
  for (let h = 0; h < heads; h++) {
    for (let j = 0; j < half; j++) {
      const a = f(position * freqs[j]);
      const [x1, x2] = [x[h * headDim + j], x[h * headDim + j + half]];
      out[h * headDim + j] = x1 * Math.cos(a) - x2 * Math.sin(a);
      out[h * headDim + j + half] = x2 * Math.cos(a) + x1 * Math.sin(a);
    }
  }
  return out;
}

const maxDiff = (a: ArrayLike<number>, b: ArrayLike<number>) =>
  Array.from(a).reduce((m, v, i) => Math.max(m, Math.abs(v - b[i])), 0);

describe('rotary ops through the emitter', () => {
  const [vocab, heads, headDim] = [7, 2, 4];
  const width = heads * headDim;
  let table: tf.Tensor;
  let scale: tf.Tensor;
  const freqs = new Float32Array([1, 0.1]);
  beforeAll(() => {
    table = tf.tensor2d(values(vocab * width, 3), [vocab, width]);
    scale = tf.tensor1d(values(headDim, 4));
  });
  afterAll(() => tf.dispose([table, scale]));
  const rowOf = (id: number) =>
    (table.dataSync() as Float32Array).subarray(id * width, (id + 1) * width);

  /** ids -> embedded rows -> attention (every key, identity q / k / v) -> f(rows) (after the cut). */
  function program(after: (emit: ProgramBuilder['emit'], x: StepValue) => StepValue): StepProgram {
    const builder = new ProgramBuilder(() => ({declined: 'no sublayers here'}));
    const {emit} = builder;
    const w = emit.weight(table) as StepWeight;
    const x = emit.gather(builder.ids, w, width);
    const attended = emit.attention(x, x, x, {heads, kvHeads: heads, headDim, scale: 1});
    return builder.finish(after(emit, emit.add(attended, x)));
  }

  it("rope after the last attention runs on each batch row's last position (the cut), as the formula there", () => {
    const p = program((emit, y) => emit.rope(y, heads, headDim, freqs));
    // the rope op comes after the cut: it reads the last rows
    const at = p.ops.findIndex((o) => o.op === 'rope');
    expect(at).toBeGreaterThan(p.cachedOps);
    expect(p.values[p.logits].rows).toBe('last');
    const ids = [
      [1, 2, 3, 4, 5],
      [6, 5, 4, 3, 2],
    ];
    // without the rope: the rows it rotates (the same program cut at the same place)
    const plain = run(
      program((_emit, y) => y),
      ids,
      0,
      5,
      8,
    );
    const got = run(p, ids, 0, 5, 8);
    for (let b = 0; b < 2; b++) {
      const want = ropeRow(plain.subarray(b * width, (b + 1) * width), 4, heads, headDim, freqs);
      expect(maxDiff(got.subarray(b * width, (b + 1) * width), want)).toBeLessThan(1e-6);
    }
    // and at another start: positions 2 .. 4 run, the last is still 4
    const later = run(p, ids, 2, 3, 8);
    const plainLater = run(
      program((_emit, y) => y),
      ids,
      2,
      3,
      8,
    );
    const want0 = ropeRow(plainLater.subarray(0, width), 4, heads, headDim, freqs);
    expect(maxDiff(later.subarray(0, width), want0)).toBeLessThan(1e-6);
    // position 0 would leave the rows as they are: the test sees the rotation
    expect(maxDiff(later.subarray(0, width), plainLater.subarray(0, width))).toBeGreaterThan(1e-3);
  });

  it('rope before attention rotates every row at its own position', () => {
    const builder = new ProgramBuilder(() => ({declined: 'no sublayers here'}));
    const {emit} = builder;
    const x = emit.gather(builder.ids, emit.weight(table) as StepWeight, width);
    const r = emit.rope(x, heads, headDim, freqs);
    // the rotated rows of the ids are the program's output up to the cut: read them as the
    // attention's values with a query that sees one key only (scale 0: equal weights over 1)
    const p = builder.finish(
      emit.attention(r, r, r, {heads, kvHeads: heads, headDim, scale: 0, window: 1}),
    );
    const ids = [[3, 1, 4]];
    const got = run(p, ids, 0, 3, 4);
    // the last row's output: its own value, rotated at position 2
    expect(maxDiff(got, ropeRow(rowOf(4), 2, heads, headDim, freqs))).toBeLessThan(1e-6);
  });

  it('rmsNorm with groups (per head) and an offset, and scale = loops of the formulas', () => {
    const builder = new ProgramBuilder(() => ({declined: 'no sublayers here'}));
    const {emit} = builder;
    const x = emit.gather(builder.ids, emit.weight(table) as StepWeight, width);
    const normed = emit.rmsNorm(x, emit.weight(scale) as StepWeight, 1e-6, {
      groups: heads,
      offset: 1,
    });
    const p = builder.finish(emit.scale(normed, 0.5));
    const got = run(p, [[2]], 0, 1, 2);
    const row = rowOf(2);
    const g = scale.dataSync();
    const want: number[] = [];
    for (let h = 0; h < heads; h++) {
      const part = row.subarray(h * headDim, (h + 1) * headDim);
      const ms = part.reduce((a, v) => a + v * v, 0) / headDim;
      part.forEach((v, j) => want.push(((v / Math.sqrt(ms + f(1e-6))) * (1 + g[j])) / 2));
    }
    expect(maxDiff(got, want)).toBeLessThan(1e-6);
  });

  it('refuses a rope of the wrong shape, groups that do not divide the width, a window of 0', () => {
    const builder = new ProgramBuilder(() => ({declined: 'no sublayers here'}));
    const {emit} = builder;
    const x = emit.gather(builder.ids, emit.weight(table) as StepWeight, width);
    expect(() => emit.rope(x, heads, headDim, new Float32Array(3))).toThrow(
      /rope: expected rows of 2 heads x 4 \(an even head size\) and 2 inverse frequencies, received rows of 8 and 3 frequencies/,
    );
    expect(() => emit.rope(x, 8, 1, new Float32Array(0))).toThrow(/an even head size/);
    expect(() => emit.rmsNorm(x, emit.weight(scale) as StepWeight, 1e-6, {groups: 3})).toThrow(
      /rmsNorm: expected groups to be a positive divisor of the width 8, received 3/,
    );
    expect(() =>
      emit.attention(x, x, x, {heads, kvHeads: heads, headDim, scale: 1, window: 0}),
    ).toThrow(
      /expected a sliding window of a positive whole number of positions or null, received 0/,
    );
    expect(() =>
      emit.attention(x, x, x, {heads, kvHeads: heads, headDim, scale: 1, softCap: -1}),
    ).toThrow(/expected a positive soft cap or null, received -1/);
  });
});
