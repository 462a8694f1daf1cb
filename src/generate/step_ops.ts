/**
 * The compiled step's operations, each declared once in {@link STEP_OPS}: the value operands it
 * reads and writes (what the cut to the last rows moves and renames, step_cut.ts) and how it runs
 * on the kernels (kernels/step_kernels_api.ts) given the runner's buffers (compiled_step.ts). The
 * table is typed by the operation's name, so an operation of {@link ProgramOp} without an entry
 * does not compile, and the runner's dispatch is the table's. A new operation is its kernel (the
 * wasm module's and the JavaScript loop's), its member of `ProgramOp`, its entry here, and the
 * emitter method that emits it (step_program.ts, program_builder.ts).
 */
import type * as tf from '@tensorflow/tfjs-core';

import {StepActivation, type StepKernels} from '../kernels/step_kernels_api';
import {backendDense} from './backend_products';
import type {StepAttention} from './step_program';

/**
 * The operands of an int8 Dense (`denseInt8`, `denseInt8KN`): `w` a packed int8 weight's index;
 * `ws`, `bias` float weights' indices; `q`, `qs` the quantized rows and their scales.
 */
export interface Int8DenseOp {
  q: number;
  qs: number;
  w: number;
  ws: number;
  bias: number;
  k: number;
  n: number;
  act: StepActivation;
  out: number;
}

/** One op; value and weight operands are indices. */
export type ProgramOp =
  | {
      op: 'dense';
      x: number;
      w: number;
      bias: number;
      k: number;
      n: number;
      act: StepActivation;
      out: number;
    }
  | {op: 'denseT'; x: number; w: number; k: number; n: number; out: number}
  /**
   * A head-major product (Gemma's `btd,ndh->btnh`): kernel `[heads, k, h]`, bias `[heads, h]`
   * or -1; out `[rows, heads * h]`, each head's product made in `scratch` (`[rows, h]`) and
   * moved into its columns.
   */
  | {
      op: 'denseHeads';
      x: number;
      w: number;
      bias: number;
      heads: number;
      k: number;
      h: number;
      scratch: number;
      out: number;
    }
  /** Keras' per-row quantization of `x [rows, k]` into `q` (int8) and `qs` (`[rows]`). */
  | {op: 'quantize'; x: number; k: number; q: number; qs: number}
  /** Keras' int8 Dense, its kernel packed transposed `[n, k]` (a head-major kernel). */
  | ({op: 'denseInt8'} & Int8DenseOp)
  /** Keras' int8 Dense with its kernel in Keras' layout `[k, n]`, read in place. */
  | ({op: 'denseInt8KN'} & Int8DenseOp)
  | {
      op: 'denseTInt8';
      q: number;
      qs: number;
      w: number;
      ws: number;
      k: number;
      n: number;
      out: number;
    }
  | {op: 'gatherInt8'; ids: number; table: number; scale: number; dim: number; out: number}
  /**
   * Keras 3.15's int4 Dense: `w` the packed kernel's and `zero` its zero points' packed indices
   * (-1: per channel), `scale` a float weight's index.
   */
  | {
      op: 'denseInt4';
      x: number;
      w: number;
      scale: number;
      zero: number;
      blockSize: number;
      bias: number;
      k: number;
      n: number;
      act: StepActivation;
      out: number;
    }
  /** Keras 3.15's int4 tied logits on the rows quantized by `quantize`. */
  | {
      op: 'denseTInt4';
      q: number;
      qs: number;
      w: number;
      scale: number;
      zero: number;
      blockSize: number;
      k: number;
      n: number;
      out: number;
    }
  /** Keras 3.15's int4 Embedding lookup. */
  | {
      op: 'gatherInt4';
      ids: number;
      table: number;
      scale: number;
      zero: number;
      blockSize: number;
      dim: number;
      out: number;
    }
  | {
      op: 'layerNorm';
      x: number;
      gamma: number;
      beta: number;
      epsilon: number;
      dim: number;
      out: number;
    }
  /**
   * RMS normalization over each of `groups` parts of `dim` values (keras-hub's LlamaLayerNorm:
   * groups 1; per-head query / key norms: groups = heads), times `offset + gamma`; `gamma`: the
   * scale's weight index (`dim / groups` values).
   */
  | {
      op: 'rmsNorm';
      x: number;
      gamma: number;
      epsilon: number;
      dim: number;
      groups: number;
      offset: number;
      out: number;
    }
  /**
   * keras-hub's RotaryEmbedding on `heads` heads of `headDim` of each row at its position;
   * `freqs`: the inverse frequencies' constant index (`headDim / 2` values).
   */
  | {op: 'rope'; x: number; heads: number; headDim: number; freqs: number; out: number}
  /** `x * factor`. */
  | {op: 'scale'; x: number; factor: number; width: number; out: number}
  | {op: 'add'; a: number; b: number; width: number; out: number}
  | {op: 'mul'; a: number; b: number; width: number; out: number}
  | {op: 'activate'; x: number; act: StepActivation; width: number; out: number}
  | {op: 'gather'; ids: number; table: number; dim: number; out: number}
  | {
      op: 'positions';
      like: number;
      table: number;
      dim: number;
      offset: number;
      add: boolean;
      out: number;
    }
  | {
      op: 'attention';
      q: number;
      k: number;
      v: number;
      heads: StepAttention;
      cache: number;
      keyMask: boolean;
      out: number;
    }
  | {op: 'lastRows'; x: number; width: number; out: number};

/** An operation's name. */
export type OpName = ProgramOp['op'];

/** The op named `K`. */
type OpOf<K extends OpName> = Extract<ProgramOp, {op: K}>;

/** The fields of an op that hold value indices (not weights, not sizes). */
type ValueField<K extends OpName> = Exclude<keyof OpOf<K>, 'op'>;

/** What an op runs with: the runner's kernels and buffers, and the positions of this run. */
export interface OpContext {
  readonly kernels: StepKernels;
  /** Batch rows. */
  readonly B: number;
  /** New positions of this run per batch row. */
  readonly t: number;
  /** The first of them. */
  readonly start: number;
  /** The caches' length. */
  readonly maxLength: number;
  /** The byte offset of a value's buffer. */
  at(value: number): number;
  /** The byte offset of a float32 weight (index -1: absent, 0). */
  w(weight: number): number;
  /** The tensor of a float32 weight (index -1: absent, null). */
  tensor(weight: number): tf.Tensor | null;
  /**
   * Rows from which a float32 `dense` op runs on the backend's matmul (backend_products.ts), or 0:
   * never.
   */
  readonly backendRowsFrom: number;
  /** The byte offset of a packed int8 weight. */
  packed(index: number): number;
  /** The byte offset of a constant of the program (rotary inverse frequencies). */
  constant(index: number): number;
  /** The rows a value holds in this run (`B * t`, or `B` for the last rows). */
  rowsOf(value: number): number;
  /** Whether a value holds the last row of each batch row only. */
  isLast(value: number): boolean;
  /** A float32 view of the whole memory (made for this call: the memory may have grown). */
  f32(): Float32Array;
  /** The key and value caches of attention `index`. */
  cache(index: number): readonly [number, number];
  /** The key mask's offset (0: none). */
  readonly keyMask: number;
  /** Attention's scratch. */
  readonly work: number;
  /** The products of several rows' scratch (0 where no run has that many rows). */
  readonly rowsWork: number;
}

/** An operation, declared once. */
export interface OpSpec<K extends OpName> {
  /** The value operands it reads. */
  readonly reads: readonly ValueField<K>[];
  /** The values it writes. */
  readonly writes: readonly ValueField<K>[];
  /** Runs it. */
  run(o: OpOf<K>, c: OpContext): void;
}

/** Rows from which a float32 product runs `denseRows` (packed operands) rather than `dense`. */
export const DENSE_ROWS_FROM = 5;

/** Every operation: a missing entry is a compile error. */
export type StepOpTable = {readonly [K in OpName]: OpSpec<K>};

/** An int8 Dense op on `kernel` (`denseInt8` or `denseInt8KN`: the same operands). */
function int8Dense(kernel: StepKernels['denseInt8'], o: Int8DenseOp, c: OpContext): void {
  kernel(
    c.rowsOf(o.q),
    o.k,
    o.n,
    c.at(o.q),
    c.at(o.qs),
    c.packed(o.w),
    c.w(o.ws),
    c.w(o.bias),
    o.act,
    c.at(o.out),
  );
}

/** `act(x · w + bias)` of `rows` rows: packed rows for a prefill's many, else one pass per row. */
function product(
  c: OpContext,
  rows: number,
  k: number,
  n: number,
  x: number,
  w: number,
  bias: number,
  act: StepActivation,
  out: number,
): void {
  if (rows >= DENSE_ROWS_FROM) c.kernels.denseRows(rows, k, n, x, w, bias, act, out, c.rowsWork);
  else c.kernels.dense(rows, k, n, x, w, bias, act, out);
}

export const STEP_OPS: StepOpTable = {
  dense: {
    reads: ['x'],
    writes: ['out'],
    run(o, c) {
      const rows = c.rowsOf(o.x);
      if (c.backendRowsFrom > 0 && rows >= c.backendRowsFrom) {
        const [w, bias] = [c.tensor(o.w), c.tensor(o.bias)];
        if (w == null) throw new Error('compiled step: a dense op without its kernel');
        backendDense(
          () => c.f32(),
          c.kernels,
          rows,
          o.k,
          o.n,
          c.at(o.x),
          w,
          bias,
          o.act,
          c.at(o.out),
        );
      } else {
        product(c, rows, o.k, o.n, c.at(o.x), c.w(o.w), c.w(o.bias), o.act, c.at(o.out));
      }
    },
  },
  denseHeads: {
    reads: ['x'],
    writes: ['out', 'scratch'],
    run(o, c) {
      const rows = c.rowsOf(o.x);
      const {heads, k, h} = o;
      const width = heads * h;
      for (let n = 0; n < heads; n++) {
        const w = c.w(o.w) + n * k * h * 4;
        const bias = o.bias < 0 ? 0 : c.w(o.bias) + n * h * 4;
        // one row: the head's columns are contiguous, written in place
        const to = rows === 1 ? c.at(o.out) + n * h * 4 : c.at(o.scratch);
        product(c, rows, k, h, c.at(o.x), w, bias, StepActivation.None, to);
        if (rows === 1) continue;
        const f32 = c.f32();
        const [from, out] = [c.at(o.scratch) >>> 2, c.at(o.out) >>> 2];
        for (let r = 0; r < rows; r++) {
          f32.copyWithin(out + r * width + n * h, from + r * h, from + (r + 1) * h);
        }
      }
    },
  },
  denseT: {
    reads: ['x'],
    writes: ['out'],
    run: (o, c) => c.kernels.denseT(c.rowsOf(o.x), o.k, o.n, c.at(o.x), c.w(o.w), c.at(o.out)),
  },
  quantize: {
    reads: ['x'],
    writes: ['q', 'qs'],
    run: (o, c) => c.kernels.quantizeRows(c.rowsOf(o.x), o.k, c.at(o.x), c.at(o.q), c.at(o.qs)),
  },
  denseInt8: {
    reads: ['q', 'qs'],
    writes: ['out'],
    run: (o, c) => int8Dense(c.kernels.denseInt8, o, c),
  },
  denseInt8KN: {
    reads: ['q', 'qs'],
    writes: ['out'],
    run: (o, c) => int8Dense(c.kernels.denseInt8KN, o, c),
  },
  denseTInt8: {
    reads: ['q', 'qs'],
    writes: ['out'],
    run: (o, c) =>
      c.kernels.denseTInt8(
        c.rowsOf(o.q),
        o.k,
        o.n,
        c.at(o.q),
        c.at(o.qs),
        c.packed(o.w),
        c.w(o.ws),
        c.at(o.out),
      ),
  },
  gatherInt8: {
    reads: ['ids'],
    writes: ['out'],
    run: (o, c) =>
      c.kernels.gatherInt8(
        c.rowsOf(o.ids),
        o.dim,
        c.at(o.ids),
        c.packed(o.table),
        c.w(o.scale),
        c.at(o.out),
      ),
  },
  denseInt4: {
    reads: ['x'],
    writes: ['out'],
    run: (o, c) =>
      c.kernels.denseInt4KN(
        c.rowsOf(o.x),
        o.k,
        o.n,
        c.at(o.x),
        c.packed(o.w),
        c.w(o.scale),
        o.zero < 0 ? 0 : c.packed(o.zero),
        o.blockSize,
        c.w(o.bias),
        o.act,
        c.at(o.out),
      ),
  },
  denseTInt4: {
    reads: ['q', 'qs'],
    writes: ['out'],
    run: (o, c) =>
      c.kernels.denseTInt4(
        c.rowsOf(o.q),
        o.k,
        o.n,
        c.at(o.q),
        c.at(o.qs),
        c.packed(o.w),
        c.w(o.scale),
        o.zero < 0 ? 0 : c.packed(o.zero),
        o.blockSize,
        c.at(o.out),
      ),
  },
  gatherInt4: {
    reads: ['ids'],
    writes: ['out'],
    run: (o, c) =>
      c.kernels.gatherInt4(
        c.rowsOf(o.ids),
        o.dim,
        c.at(o.ids),
        c.packed(o.table),
        c.w(o.scale),
        o.zero < 0 ? 0 : c.packed(o.zero),
        o.blockSize,
        c.at(o.out),
      ),
  },
  layerNorm: {
    reads: ['x'],
    writes: ['out'],
    run: (o, c) =>
      c.kernels.layerNorm(
        c.rowsOf(o.x),
        o.dim,
        c.at(o.x),
        c.w(o.gamma),
        c.w(o.beta),
        o.epsilon,
        c.at(o.out),
      ),
  },
  rmsNorm: {
    reads: ['x'],
    writes: ['out'],
    run: (o, c) =>
      c.kernels.rmsNorm(
        c.rowsOf(o.x) * o.groups,
        o.dim / o.groups,
        c.at(o.x),
        c.w(o.gamma),
        o.epsilon,
        c.at(o.out),
        o.offset,
      ),
  },
  rope: {
    reads: ['x'],
    writes: ['out'],
    run(o, c) {
      // the last rows (after the cut) are each batch row's last position
      const last = c.isLast(o.x);
      c.kernels.rope(
        c.B,
        last ? 1 : c.t,
        last ? c.start + c.t - 1 : c.start,
        o.heads,
        o.headDim,
        c.at(o.x),
        c.constant(o.freqs),
        c.at(o.out),
      );
    },
  },
  scale: {
    reads: ['x'],
    writes: ['out'],
    run: (o, c) => c.kernels.scale(c.rowsOf(o.x) * o.width, c.at(o.x), o.factor, c.at(o.out)),
  },
  add: {
    reads: ['a', 'b'],
    writes: ['out'],
    run: (o, c) => c.kernels.add(c.rowsOf(o.a) * o.width, c.at(o.a), c.at(o.b), c.at(o.out)),
  },
  mul: {
    reads: ['a', 'b'],
    writes: ['out'],
    run: (o, c) => c.kernels.mul(c.rowsOf(o.a) * o.width, c.at(o.a), c.at(o.b), c.at(o.out)),
  },
  activate: {
    reads: ['x'],
    writes: ['out'],
    run: (o, c) => c.kernels.activate(c.rowsOf(o.x) * o.width, c.at(o.x), o.act, c.at(o.out)),
  },
  gather: {
    reads: ['ids'],
    writes: ['out'],
    run: (o, c) => c.kernels.gather(c.rowsOf(o.ids), o.dim, c.at(o.ids), c.w(o.table), c.at(o.out)),
  },
  positions: {
    reads: ['like'],
    writes: ['out'],
    run(o, c) {
      const last = c.isLast(o.like);
      const n = c.rowsOf(o.like) * o.dim;
      const f32 = c.f32();
      const [like, out] = [c.at(o.like) >>> 2, c.at(o.out) >>> 2];
      if (o.add) f32.copyWithin(out, like, like + n);
      else f32.fill(0, out, out + n);
      const first = o.offset + (last ? c.start + c.t - 1 : c.start);
      c.kernels.addPositions(c.B, last ? 1 : c.t, o.dim, first, c.w(o.table), c.at(o.out));
    },
  },
  attention: {
    reads: ['q', 'k', 'v'],
    writes: ['out'],
    run(o, c) {
      const [kCache, vCache] = c.cache(o.cache);
      const {heads, kvHeads, headDim, scale, window, softCap} = o.heads;
      const width = kvHeads * headDim;
      const {B, t, start, maxLength} = c;
      c.kernels.writeCache(B, t, width, maxLength, start, c.at(o.k), kCache);
      c.kernels.writeCache(B, t, width, maxLength, start, c.at(o.v), vCache);
      c.kernels.attend(
        B,
        t,
        heads,
        kvHeads,
        headDim,
        maxLength,
        start,
        c.at(o.q),
        kCache,
        vCache,
        o.keyMask ? c.keyMask : 0,
        scale,
        c.work,
        c.at(o.out),
        window ?? 0,
        softCap ?? 0,
      );
    },
  },
  lastRows: {
    reads: ['x'],
    writes: ['out'],
    run(o, c) {
      if (c.t === 1) return; // the rows are the last ones already (the buffer is shared)
      const f32 = c.f32();
      const [from, to] = [c.at(o.x) >>> 2, c.at(o.out) >>> 2];
      for (let b = 0; b < c.B; b++) {
        const src = from + (b * c.t + c.t - 1) * o.width;
        f32.copyWithin(to + b * o.width, src, src + o.width);
      }
    },
  },
};

/** The entry of an op, typed for any op (the table's entries are typed by their own op). */
function specOf(o: ProgramOp): OpSpec<OpName> {
  const spec = (STEP_OPS as Partial<Record<string, unknown>>)[o.op];
  if (spec == null) {
    throw new Error(
      `compiled step: expected an operation of the table (${Object.keys(STEP_OPS).join(', ')}), ` +
        `received '${String(o.op)}'`,
    );
  }
  return spec as OpSpec<OpName>;
}

/** Runs one op. */
export function runOp(o: ProgramOp, c: OpContext): void {
  specOf(o).run(o as never, c);
}

/** The value operands an op reads and the values it writes (weights are not values). */
export function operands(o: ProgramOp): {reads: number[]; writes: number[]} {
  const spec = specOf(o);
  const field = o as unknown as Record<string, number>;
  return {
    reads: spec.reads.map((f) => field[f as string]),
    writes: spec.writes.map((f) => field[f as string]),
  };
}

/** `o` with the values it reads renamed by `to` (those absent kept). */
export function renamedReads(o: ProgramOp, to: ReadonlyMap<number, number>): ProgramOp {
  const copy = {...o} as unknown as Record<string, number>;
  for (const f of specOf(o).reads)
    copy[f as string] = to.get(copy[f as string]) ?? copy[f as string];
  return copy as unknown as ProgramOp;
}
