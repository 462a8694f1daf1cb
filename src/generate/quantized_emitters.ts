/**
 * The compiled step's emitters of Keras 3's quantized layers (program_builder.ts gives them its
 * values and weights through an {@link EmitContext}): the int8 and int4 weights as the runtime
 * reads them (their bytes where they are held, `packed`; their scales float32 weights), and the
 * ops on them.
 *
 * int8 layers (Keras 3's `_int8_call`): a product quantizes its input rows first (a `quantize`
 * op into an int8 value and its per-row scales, made once per value and shared by the products
 * that read it, e.g. an attention's query, key and value projections), then multiplies them by
 * the int8 weight exactly. int4 layers (Keras 3.15's weight-only `_int4_call`) multiply their
 * float rows by the packed weight; the tied int4 logits quantize their rows as int8's do.
 */
import type * as tf from '@tensorflow/tfjs-core';

import {INT8_DTYPE, isInt8Tensor} from '../ops/int8';
import type {PackedInt8, ProgramValue} from './program_builder';
import type {ProgramOp} from './step_ops';
import type {
  StepEmitter,
  StepInt4Weight,
  StepInt8Weight,
  StepValue,
  StepWeight,
  StepWeightSource,
} from './step_program';

/** A value a rule may read: float32 or the ids. */
type RuleValue = ProgramValue & StepValue;

/** What the quantized emitters need of the program being built. */
export interface EmitContext {
  /** A new value of `width` (float32 unless said). */
  newValue(width: number, dtype?: 'float32' | 'int32'): RuleValue;
  newValue(width: number, dtype: 'int8'): ProgramValue;
  /** A value of this program, checked. */
  val(v: StepValue): RuleValue;
  /** A float32 value of this program, checked (`what` names the op in the error). */
  f32(v: StepValue, what: string): RuleValue;
  /** A float32 weight's index. */
  wt(w: StepWeight): number;
  /** Checks a weight's size. */
  need(w: StepWeight, size: number, what: string): void;
  /** The tensor a weight is read from. */
  tensorOf(source: StepWeightSource): tf.Tensor;
  /** A float32 weight of the program (one index per distinct tensor). */
  floatWeight(t: tf.Tensor): {index: number; size: number};
  /** Appends an op. */
  push(op: ProgramOp): void;
}

interface ProgramInt4Weight extends StepInt4Weight {
  /** Its packed bytes. */
  readonly packed: tf.Tensor;
  /** Its int8 zero points (grouped), or null. */
  readonly zero: tf.Tensor | null;
  /** Its scale's index in `weights`. */
  readonly scale: number;
}

interface ProgramInt8Weight extends StepInt8Weight {
  /** Its values (int8 held as bytes). */
  readonly tensor: tf.Tensor;
  /** Its scale's index in `weights`. */
  readonly scale: number;
}

/** The emitter methods of the quantized layers. */
export type QuantizedEmitters = Pick<
  StepEmitter,
  | 'int8Weight'
  | 'int4Weight'
  | 'denseInt8'
  | 'denseHeadsInt8'
  | 'denseTInt8'
  | 'gatherInt8'
  | 'denseInt4'
  | 'denseTInt4'
  | 'gatherInt4'
>;

/**
 * The quantized emitters of one program, and the bytes they read (`packed`: each tensor once
 * per layout, in the order the ops first read them).
 */
export function quantizedEmitters(ctx: EmitContext): {
  emitters: QuantizedEmitters;
  packed: PackedInt8[];
} {
  const packed: PackedInt8[] = [];
  const packedIndex = new Map<string, number>();
  /** The quantized rows of a value (by its index), made once. */
  const quantized = new Map<number, {q: number; qs: number}>();
  /** The quantized rows of `x` (Keras quantizes each product's input; the same rows give the same values). */
  const quantizedRows = (x: RuleValue) => {
    const known = quantized.get(x.index);
    if (known != null) return known;
    const q = ctx.newValue(x.width, 'int8');
    const qs = ctx.newValue(1);
    ctx.push({op: 'quantize', x: x.index, k: x.width, q: q.index, qs: qs.index});
    const made = {q: q.index, qs: qs.index};
    quantized.set(x.index, made);
    return made;
  };
  /** The index in `packed` of bytes in a layout (see PackedInt8; int4 bytes as held). */
  const bytesAt = (tensor: tf.Tensor, transposeRows = 0, heads = 1, int4 = false): number => {
    const key = `${tensor.id}/${transposeRows}/${heads}${int4 ? '/int4' : ''}`;
    let index = packedIndex.get(key);
    if (index == null) {
      index = packed.length;
      packed.push(int4 ? {tensor, transposeRows, heads, int4} : {tensor, transposeRows, heads});
      packedIndex.set(key, index);
    }
    return index;
  };
  const int8 = (w: StepInt8Weight) => w as ProgramInt8Weight;
  const int4 = (w: StepInt4Weight) => w as ProgramInt4Weight;
  const packedOf = (w: StepInt8Weight, transposeRows: number, heads = 1) =>
    bytesAt(int8(w).tensor, transposeRows, heads);
  const int4Bytes = (tensor: tf.Tensor) => bytesAt(tensor, 0, 1, true);
  const zeroOf = (w: StepInt4Weight) => {
    const z = int4(w).zero;
    return z == null ? -1 : int4Bytes(z);
  };

  const emitters: QuantizedEmitters = {
    int8Weight(source, scaleSource) {
      const [t, s] = [ctx.tensorOf(source), ctx.tensorOf(scaleSource)];
      if (!isInt8Tensor(t) || s.dtype !== 'float32') {
        return {
          declined:
            `an int8 weight of dtype ${t.dtype} with a scale of dtype ${s.dtype} (expected ` +
            `int8 values held as bytes, dtype '${INT8_DTYPE}', and a float32 scale)`,
        };
      }
      const w: ProgramInt8Weight = {
        tensor: t,
        size: t.size,
        scale: ctx.floatWeight(s).index,
        scaleSize: s.size,
      };
      return w;
    },
    int4Weight(weight) {
      const {rows, cols, blockSize, packAxis, groupAxis} = weight.layout;
      if (packAxis !== 1) {
        return {declined: 'an int4 weight packed along its first axis (an untied reverse table)'};
      }
      const [p, s] = [weight.packed.read(), weight.scale.read()];
      const z = weight.zero?.read() ?? null;
      if (!isInt8Tensor(p) || s.dtype !== 'float32' || (z != null && !isInt8Tensor(z))) {
        return {
          declined:
            `an int4 weight of dtype ${p.dtype} with a scale of dtype ${s.dtype} and zero ` +
            `points of dtype ${z?.dtype ?? 'none'} (expected bytes, float32 and int8 bytes)`,
        };
      }
      const grouped = blockSize > 0;
      if (grouped !== (z != null) || (grouped && weight.gIdx == null)) {
        return {declined: 'an int4 weight whose zero points or groups are missing'};
      }
      if (grouped) {
        // the kernels take Keras' groups, floor(i / blockSize): any other g_idx is declined
        const g = (weight.gIdx as {read(): tf.Tensor}).read().dataSync();
        for (let i = 0; i < g.length; i++) {
          if (g[i] !== Math.floor(i / blockSize)) {
            return {
              declined: `an int4 weight whose g_idx is not floor(i / ${blockSize}) at ${i}`,
            };
          }
        }
      }
      const w: ProgramInt4Weight = {
        rows,
        cols,
        blockSize,
        groupAxis,
        packed: p,
        zero: z,
        scale: ctx.floatWeight(s).index,
      };
      return w;
    },
    denseInt8(x, kernel, bias, units, act) {
      const xv = ctx.f32(x, 'denseInt8');
      ctx.need(kernel, xv.width * units, 'denseInt8 kernel');
      if (kernel.scaleSize !== units) {
        throw new Error(
          `denseInt8: expected a kernel scale of ${units} values, received ${kernel.scaleSize}`,
        );
      }
      if (bias != null) ctx.need(bias, units, 'denseInt8 bias');
      const {q, qs} = quantizedRows(xv);
      const out = ctx.newValue(units);
      // the kernel read as it is held, in Keras' layout [k, n] (in place on tfjs-wasm's heap)
      ctx.push({
        op: 'denseInt8KN',
        q,
        qs,
        w: packedOf(kernel, 0),
        ws: int8(kernel).scale,
        bias: bias == null ? -1 : ctx.wt(bias),
        k: xv.width,
        n: units,
        act,
        out: out.index,
      });
      return out;
    },
    denseHeadsInt8(x, kernel, bias, heads, headDim, act) {
      const xv = ctx.f32(x, 'denseHeadsInt8');
      const units = heads * headDim;
      ctx.need(kernel, heads * xv.width * headDim, 'denseHeadsInt8 kernel');
      if (kernel.scaleSize !== units) {
        throw new Error(
          `denseHeadsInt8: expected a kernel scale of ${units} values, received ${kernel.scaleSize}`,
        );
      }
      if (bias != null) ctx.need(bias, units, 'denseHeadsInt8 bias');
      const {q, qs} = quantizedRows(xv);
      const out = ctx.newValue(units);
      // the kernel packed head by head into denseInt8's layout: one int8 product
      ctx.push({
        op: 'denseInt8',
        q,
        qs,
        w: packedOf(kernel, xv.width, heads),
        ws: int8(kernel).scale,
        bias: bias == null ? -1 : ctx.wt(bias),
        k: xv.width,
        n: units,
        act,
        out: out.index,
      });
      return out;
    },
    denseTInt8(x, table, rows) {
      const xv = ctx.f32(x, 'denseTInt8');
      ctx.need(table, xv.width * rows, 'denseTInt8 table');
      if (table.scaleSize !== rows) {
        throw new Error(
          `denseTInt8: expected a table scale of ${rows} values, received ${table.scaleSize}`,
        );
      }
      const {q, qs} = quantizedRows(xv);
      const out = ctx.newValue(rows);
      ctx.push({
        op: 'denseTInt8',
        q,
        qs,
        w: packedOf(table, 0),
        ws: int8(table).scale,
        k: xv.width,
        n: rows,
        out: out.index,
      });
      return out;
    },
    denseInt4(x, kernel, bias, units, act) {
      const xv = ctx.f32(x, 'denseInt4');
      if (kernel.rows !== xv.width || kernel.cols !== units || kernel.groupAxis !== 0) {
        throw new Error(
          `denseInt4: expected an int4 kernel [${xv.width}, ${units}] grouped along its rows, ` +
            `received [${kernel.rows}, ${kernel.cols}] grouped along axis ${kernel.groupAxis}`,
        );
      }
      if (bias != null) ctx.need(bias, units, 'denseInt4 bias');
      const out = ctx.newValue(units);
      ctx.push({
        op: 'denseInt4',
        x: xv.index,
        w: int4Bytes(int4(kernel).packed),
        scale: int4(kernel).scale,
        zero: zeroOf(kernel),
        blockSize: kernel.blockSize,
        bias: bias == null ? -1 : ctx.wt(bias),
        k: xv.width,
        n: units,
        act,
        out: out.index,
      });
      return out;
    },
    denseTInt4(x, table, rows) {
      const xv = ctx.f32(x, 'denseTInt4');
      if (table.rows !== rows || table.cols !== xv.width || table.groupAxis !== 1) {
        throw new Error(
          `denseTInt4: expected an int4 table [${rows}, ${xv.width}] grouped along its rows' ` +
            `width, received [${table.rows}, ${table.cols}]`,
        );
      }
      const {q, qs} = quantizedRows(xv);
      const out = ctx.newValue(rows);
      ctx.push({
        op: 'denseTInt4',
        q,
        qs,
        w: int4Bytes(int4(table).packed),
        scale: int4(table).scale,
        zero: zeroOf(table),
        blockSize: table.blockSize,
        k: xv.width,
        n: rows,
        out: out.index,
      });
      return out;
    },
    gatherInt4(ids, table, dim) {
      const iv = ctx.val(ids);
      if (iv.dtype !== 'int32')
        throw new Error(`gatherInt4 expects the int32 ids, received ${iv.dtype}`);
      if (table.cols !== dim || table.groupAxis !== 1) {
        throw new Error(
          `gatherInt4: expected an int4 table of rows of ${dim} grouped along them, received ` +
            `[${table.rows}, ${table.cols}]`,
        );
      }
      const out = ctx.newValue(dim);
      ctx.push({
        op: 'gatherInt4',
        ids: iv.index,
        table: int4Bytes(int4(table).packed),
        scale: int4(table).scale,
        zero: zeroOf(table),
        blockSize: table.blockSize,
        dim,
        out: out.index,
      });
      return out;
    },
    gatherInt8(ids, table, dim) {
      const iv = ctx.val(ids);
      if (iv.dtype !== 'int32')
        throw new Error(`gatherInt8 expects the int32 ids, received ${iv.dtype}`);
      if (table.size % dim !== 0 || table.scaleSize !== table.size / dim) {
        throw new Error(
          `gatherInt8: expected a table of rows of ${dim} with one scale per row, received ` +
            `${table.size} values and ${table.scaleSize} scales`,
        );
      }
      const out = ctx.newValue(dim);
      ctx.push({
        op: 'gatherInt8',
        ids: iv.index,
        table: packedOf(table, 0),
        scale: int8(table).scale,
        dim,
        out: out.index,
      });
      return out;
    },
  };
  return {emitters, packed};
}
