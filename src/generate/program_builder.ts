/**
 * The builder of one compiled step's program (step_compile.ts drives it node by node): its values,
 * the weights it reads (float32, and int8 packed by the runtime), each attention's cache, and its
 * ops, made through the {@link StepEmitter} handed to the layers' compile rules; `finish` cuts it
 * to each row's last position after the last attention op (step_cut.ts) and gives the program.
 *
 * int8 layers (Keras 3's `_int8_call`): a product quantizes its input rows first (a `quantize`
 * op into an int8 value and its per-row scales, made once per value and shared by the products
 * that read it, e.g. an attention's query, key and value projections), then multiplies them by
 * the int8 weight (packed as int8 in the memory, `packed`) exactly.
 */
import type * as tf from '@tensorflow/tfjs-core';

import {StepActivation} from '../kernels/step_kernels_api';
import type {GraphLayer} from '../layers/engine/contract';
import {INT8_DTYPE, isInt8Tensor} from '../ops/int8';
import type {
  StepDecline,
  StepEmitter,
  StepInt4Weight,
  StepInt8Weight,
  StepValue,
  StepWeight,
  StepWeightSource,
} from './step_program';
import {cutToLastRows} from './step_cut';
import type {ProgramOp} from './step_ops';

/**
 * A value of the program: `all` rows `[B * t, width]`, or the `last` row of each batch row
 * `[B, width]`; float32, the int32 ids, or int8 (quantized rows, never handed to a rule).
 */
export interface ProgramValue {
  readonly width: number;
  readonly dtype: 'float32' | 'int32' | 'int8';
  readonly index: number;
  readonly rows: 'all' | 'last';
  /** The value whose buffer this one shares (the last rows cut in place), or -1. */
  readonly aliasOf: number;
}

/** A value a rule may read: float32 or the ids. */
type RuleValue = ProgramValue & StepValue;

interface ProgramWeight extends StepWeight {
  readonly index: number;
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
  /** Its values (whole numbers held in float32). */
  readonly tensor: tf.Tensor;
  /** Its scale's index in `weights`. */
  readonly scale: number;
}

/**
 * An int8 weight (bytes, ops/int8.ts) as the runtime reads it: `transposeRows` 0 as it is held
 * (read in place on tfjs-wasm's heap: a table for lookups and the tied logits, a kernel `[k, n]`
 * in Keras' layout for `denseInt8KN`); > 0 a head-major kernel `[heads, transposeRows, headDim]`
 * packed transposed, head by head (`denseInt8`'s layout of `[transposeRows, heads * headDim]`),
 * into memory of the step's own.
 */
export interface PackedInt8 {
  readonly tensor: tf.Tensor;
  readonly transposeRows: number;
  readonly heads: number;
  /** Bytes of an int4 weight (its values two to a byte, or its int8 zero points), as held. */
  readonly int4?: boolean;
}

/** A compiled step. */
export interface StepProgram {
  values: ProgramValue[];
  /** The float32 weights' tensors, in weight-index order (one per distinct tensor). */
  weights: tf.Tensor[];
  /** The int8 weights, packed as int8 by the runtime (one per distinct tensor and layout). */
  packed: PackedInt8[];
  ops: ProgramOp[];
  /** The ids value (int32, width 1). */
  ids: number;
  /** The logits value (`last` rows, width vocab). */
  logits: number;
  /** The number of ops up to the last attention's (a chunk whose logits are dropped runs these). */
  cachedOps: number;
  /** Each attention's cache width (kvHeads * headDim), by cache index. */
  caches: number[];
  /** Whether an attention reads the key mask (a mask_zero model). */
  usesKeyMask: boolean;
  /** float32 constants the ops read (rotary inverse frequencies), by constant index. */
  constants: Float32Array[];
}

const ACTIVATIONS: Record<string, StepActivation> = {
  linear: StepActivation.None,
  relu: StepActivation.Relu,
  gelu: StepActivation.GeluErf,
  geluApproximate: StepActivation.GeluTanh,
  gelu_approximate: StepActivation.GeluTanh,
  swish: StepActivation.Silu,
  silu: StepActivation.Silu,
  tanh: StepActivation.Tanh,
  sigmoid: StepActivation.Sigmoid,
};

/** Builds one program; `compileSublayer` compiles a sublayer through its own rule (`emit.layer`). */
export class ProgramBuilder {
  /** The emitter the rules emit through. */
  readonly emit: StepEmitter;
  /** The ids value (int32, width 1): the program's input. */
  readonly ids: StepValue;
  /** Whether the attention ops emitted from now on read the key mask (the node being compiled). */
  keyMask: (on: boolean) => void;
  /** The program computing `output` (the logits), cut to each row's last position. */
  finish: (output: StepValue) => StepProgram;

  constructor(
    compileSublayer: (layer: GraphLayer, inputs: StepValue[]) => StepValue[] | StepDecline,
  ) {
    const values: ProgramValue[] = [];
    const weights: tf.Tensor[] = [];
    const weightIndex = new Map<number, number>();
    const packed: PackedInt8[] = [];
    const packedIndex = new Map<string, number>();
    /** The quantized rows of a value (by its index), made once. */
    const quantized = new Map<number, {q: number; qs: number}>();
    const ops: ProgramOp[] = [];
    const caches: number[] = [];
    const constants: Float32Array[] = [];
    let usesKeyMask = false;
    let nodeKeyMask = false;

    function newValue(width: number, dtype?: 'float32' | 'int32'): RuleValue;
    function newValue(width: number, dtype: 'int8'): ProgramValue;
    function newValue(width: number, dtype: ProgramValue['dtype'] = 'float32'): ProgramValue {
      const v: ProgramValue = {index: values.length, width, dtype, rows: 'all', aliasOf: -1};
      values.push(v);
      return v;
    }
    const val = (v: StepValue): RuleValue => {
      const p = v as RuleValue;
      if (values[p.index] !== p) throw new Error('a step value of another program');
      return p;
    };
    const f32 = (v: StepValue, what: string) => {
      const p = val(v);
      if (p.dtype !== 'float32')
        throw new Error(`${what} expects float32 rows, received ${p.dtype}`);
      return p;
    };
    const wt = (w: StepWeight): number => (w as ProgramWeight).index;
    const tensorOf = (source: StepWeightSource): tf.Tensor =>
      'read' in source && typeof source.read === 'function' ? source.read() : (source as tf.Tensor);
    const floatWeight = (t: tf.Tensor): ProgramWeight => {
      let index = weightIndex.get(t.id);
      if (index == null) {
        index = weights.length;
        weights.push(t);
        weightIndex.set(t.id, index);
      }
      return {index, size: t.size};
    };
    /** The quantized rows of `x` (Keras quantizes each product's input; the same rows give the same values). */
    const quantize = (x: RuleValue) => {
      const known = quantized.get(x.index);
      if (known != null) return known;
      const q = newValue(x.width, 'int8');
      const qs = newValue(1);
      ops.push({op: 'quantize', x: x.index, k: x.width, q: q.index, qs: qs.index});
      const made = {q: q.index, qs: qs.index};
      quantized.set(x.index, made);
      return made;
    };
    const int8 = (w: StepInt8Weight) => w as ProgramInt8Weight;
    const int4 = (w: StepInt4Weight) => w as ProgramInt4Weight;
    /** The index in `packed` of an int4 weight's bytes (values or zero points), as held. */
    const int4Bytes = (tensor: tf.Tensor): number => {
      const key = `${tensor.id}/int4`;
      let index = packedIndex.get(key);
      if (index == null) {
        index = packed.length;
        packed.push({tensor, transposeRows: 0, heads: 1, int4: true});
        packedIndex.set(key, index);
      }
      return index;
    };
    const zeroOf = (w: StepInt4Weight) => {
      const z = int4(w).zero;
      return z == null ? -1 : int4Bytes(z);
    };
    /** The index in `packed` of an int8 weight in a layout (see PackedInt8). */
    const packedOf = (w: StepInt8Weight, transposeRows: number, heads = 1): number => {
      const {tensor} = int8(w);
      const key = `${tensor.id}/${transposeRows}/${heads}`;
      let index = packedIndex.get(key);
      if (index == null) {
        index = packed.length;
        packed.push({tensor, transposeRows, heads});
        packedIndex.set(key, index);
      }
      return index;
    };
    const need = (w: StepWeight, size: number, what: string) => {
      if (w.size !== size) {
        throw new Error(`${what}: expected a weight of ${size} values, received ${w.size}`);
      }
    };

    const emit: StepEmitter = {
      weight(source: StepWeightSource): StepWeight | StepDecline {
        const t = tensorOf(source);
        if (t.dtype !== 'float32') {
          return {declined: `a weight of dtype ${t.dtype} (only float32 weights compile)`};
        }
        return floatWeight(t);
      },
      int8Weight(source, scaleSource) {
        const [t, s] = [tensorOf(source), tensorOf(scaleSource)];
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
          scale: floatWeight(s).index,
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
          scale: floatWeight(s).index,
        };
        return w;
      },
      activation(name) {
        if (name == null) return StepActivation.None;
        return typeof name === 'string' && name in ACTIVATIONS ? ACTIVATIONS[name] : null;
      },
      dense(x, kernel, bias, units, act) {
        const xv = f32(x, 'dense');
        need(kernel, xv.width * units, 'dense kernel');
        if (bias != null) need(bias, units, 'dense bias');
        const out = newValue(units);
        ops.push({
          op: 'dense',
          x: xv.index,
          w: wt(kernel),
          bias: bias == null ? -1 : wt(bias),
          k: xv.width,
          n: units,
          act,
          out: out.index,
        });
        return out;
      },
      denseHeads(x, kernel, bias, heads, headDim) {
        const xv = f32(x, 'denseHeads');
        need(kernel, heads * xv.width * headDim, 'denseHeads kernel');
        if (bias != null) need(bias, heads * headDim, 'denseHeads bias');
        const scratch = newValue(headDim);
        const out = newValue(heads * headDim);
        ops.push({
          op: 'denseHeads',
          x: xv.index,
          w: wt(kernel),
          bias: bias == null ? -1 : wt(bias),
          heads,
          k: xv.width,
          h: headDim,
          scratch: scratch.index,
          out: out.index,
        });
        return out;
      },
      denseT(x, table, rows) {
        const xv = f32(x, 'denseT');
        need(table, xv.width * rows, 'denseT table');
        const out = newValue(rows);
        ops.push({op: 'denseT', x: xv.index, w: wt(table), k: xv.width, n: rows, out: out.index});
        return out;
      },
      denseInt8(x, kernel, bias, units, act) {
        const xv = f32(x, 'denseInt8');
        need(kernel, xv.width * units, 'denseInt8 kernel');
        if (kernel.scaleSize !== units) {
          throw new Error(
            `denseInt8: expected a kernel scale of ${units} values, received ${kernel.scaleSize}`,
          );
        }
        if (bias != null) need(bias, units, 'denseInt8 bias');
        const {q, qs} = quantize(xv);
        const out = newValue(units);
        // the kernel read as it is held, in Keras' layout [k, n] (in place on tfjs-wasm's heap)
        ops.push({
          op: 'denseInt8KN',
          q,
          qs,
          w: packedOf(kernel, 0),
          ws: int8(kernel).scale,
          bias: bias == null ? -1 : wt(bias),
          k: xv.width,
          n: units,
          act,
          out: out.index,
        });
        return out;
      },
      denseHeadsInt8(x, kernel, bias, heads, headDim, act) {
        const xv = f32(x, 'denseHeadsInt8');
        const units = heads * headDim;
        need(kernel, heads * xv.width * headDim, 'denseHeadsInt8 kernel');
        if (kernel.scaleSize !== units) {
          throw new Error(
            `denseHeadsInt8: expected a kernel scale of ${units} values, received ${kernel.scaleSize}`,
          );
        }
        if (bias != null) need(bias, units, 'denseHeadsInt8 bias');
        const {q, qs} = quantize(xv);
        const out = newValue(units);
        // the kernel packed head by head into denseInt8's layout: one int8 product
        ops.push({
          op: 'denseInt8',
          q,
          qs,
          w: packedOf(kernel, xv.width, heads),
          ws: int8(kernel).scale,
          bias: bias == null ? -1 : wt(bias),
          k: xv.width,
          n: units,
          act,
          out: out.index,
        });
        return out;
      },
      denseTInt8(x, table, rows) {
        const xv = f32(x, 'denseTInt8');
        need(table, xv.width * rows, 'denseTInt8 table');
        if (table.scaleSize !== rows) {
          throw new Error(
            `denseTInt8: expected a table scale of ${rows} values, received ${table.scaleSize}`,
          );
        }
        const {q, qs} = quantize(xv);
        const out = newValue(rows);
        ops.push({
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
      layerNorm(x, gamma, beta, epsilon) {
        const xv = f32(x, 'layerNorm');
        if (gamma != null) need(gamma, xv.width, 'layerNorm gamma');
        if (beta != null) need(beta, xv.width, 'layerNorm beta');
        const out = newValue(xv.width);
        ops.push({
          op: 'layerNorm',
          x: xv.index,
          gamma: gamma == null ? -1 : wt(gamma),
          beta: beta == null ? -1 : wt(beta),
          epsilon,
          dim: xv.width,
          out: out.index,
        });
        return out;
      },
      rmsNorm(x, scale, epsilon, options = {}) {
        const xv = f32(x, 'rmsNorm');
        const {groups = 1, offset = 0} = options;
        if (!(Number.isInteger(groups) && groups > 0 && xv.width % groups === 0)) {
          throw new Error(
            `rmsNorm: expected groups to be a positive divisor of the width ${xv.width}, ` +
              `received ${groups}`,
          );
        }
        if (!Number.isFinite(offset)) {
          throw new Error(`rmsNorm: expected a finite offset, received ${offset}`);
        }
        need(scale, xv.width / groups, 'rmsNorm scale');
        const out = newValue(xv.width);
        ops.push({
          op: 'rmsNorm',
          x: xv.index,
          gamma: wt(scale),
          epsilon,
          dim: xv.width,
          groups,
          offset,
          out: out.index,
        });
        return out;
      },
      rope(x, heads, headDim, inverseFrequencies) {
        const xv = f32(x, 'rope');
        if (
          !(Number.isInteger(heads) && heads > 0 && headDim > 0 && headDim % 2 === 0) ||
          xv.width !== heads * headDim ||
          inverseFrequencies.length !== headDim / 2
        ) {
          throw new Error(
            `rope: expected rows of ${heads} heads x ${headDim} (an even head size) and ` +
              `${headDim / 2} inverse frequencies, received rows of ${xv.width} and ` +
              `${inverseFrequencies.length} frequencies`,
          );
        }
        const out = newValue(xv.width);
        const freqs = constants.length;
        constants.push(Float32Array.from(inverseFrequencies));
        ops.push({op: 'rope', x: xv.index, heads, headDim, freqs, out: out.index});
        return out;
      },
      scale(x, factor) {
        const xv = f32(x, 'scale');
        const out = newValue(xv.width);
        ops.push({op: 'scale', x: xv.index, factor, width: xv.width, out: out.index});
        return out;
      },
      add: (a, b) => elementwise('add', a, b),
      mul: (a, b) => elementwise('mul', a, b),
      activate(x, act) {
        const xv = f32(x, 'activate');
        const out = newValue(xv.width);
        ops.push({op: 'activate', x: xv.index, act, width: xv.width, out: out.index});
        return out;
      },
      gather(ids, table, dim) {
        const iv = val(ids);
        if (iv.dtype !== 'int32')
          throw new Error(`gather expects the int32 ids, received ${iv.dtype}`);
        if (table.size % dim !== 0)
          throw new Error(`gather: a table of ${table.size} values is not rows of ${dim}`);
        const out = newValue(dim);
        ops.push({op: 'gather', ids: iv.index, table: wt(table), dim, out: out.index});
        return out;
      },
      denseInt4(x, kernel, bias, units, act) {
        const xv = f32(x, 'denseInt4');
        if (kernel.rows !== xv.width || kernel.cols !== units || kernel.groupAxis !== 0) {
          throw new Error(
            `denseInt4: expected an int4 kernel [${xv.width}, ${units}] grouped along its rows, ` +
              `received [${kernel.rows}, ${kernel.cols}] grouped along axis ${kernel.groupAxis}`,
          );
        }
        if (bias != null) need(bias, units, 'denseInt4 bias');
        const out = newValue(units);
        ops.push({
          op: 'denseInt4',
          x: xv.index,
          w: int4Bytes(int4(kernel).packed),
          scale: int4(kernel).scale,
          zero: zeroOf(kernel),
          blockSize: kernel.blockSize,
          bias: bias == null ? -1 : wt(bias),
          k: xv.width,
          n: units,
          act,
          out: out.index,
        });
        return out;
      },
      denseTInt4(x, table, rows) {
        const xv = f32(x, 'denseTInt4');
        if (table.rows !== rows || table.cols !== xv.width || table.groupAxis !== 1) {
          throw new Error(
            `denseTInt4: expected an int4 table [${rows}, ${xv.width}] grouped along its rows' ` +
              `width, received [${table.rows}, ${table.cols}]`,
          );
        }
        const {q, qs} = quantize(xv);
        const out = newValue(rows);
        ops.push({
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
        const iv = val(ids);
        if (iv.dtype !== 'int32')
          throw new Error(`gatherInt4 expects the int32 ids, received ${iv.dtype}`);
        if (table.cols !== dim || table.groupAxis !== 1) {
          throw new Error(
            `gatherInt4: expected an int4 table of rows of ${dim} grouped along them, received ` +
              `[${table.rows}, ${table.cols}]`,
          );
        }
        const out = newValue(dim);
        ops.push({
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
        const iv = val(ids);
        if (iv.dtype !== 'int32')
          throw new Error(`gatherInt8 expects the int32 ids, received ${iv.dtype}`);
        if (table.size % dim !== 0 || table.scaleSize !== table.size / dim) {
          throw new Error(
            `gatherInt8: expected a table of rows of ${dim} with one scale per row, received ` +
              `${table.size} values and ${table.scaleSize} scales`,
          );
        }
        const out = newValue(dim);
        ops.push({
          op: 'gatherInt8',
          ids: iv.index,
          table: packedOf(table, 0),
          scale: int8(table).scale,
          dim,
          out: out.index,
        });
        return out;
      },
      positions(like, table, dim, offset, add) {
        const lv = val(like);
        if (add && lv.width !== dim)
          throw new Error(`positions: rows of ${lv.width} plus positions of ${dim}`);
        if (table.size % dim !== 0)
          throw new Error(`positions: a table of ${table.size} values is not rows of ${dim}`);
        const out = newValue(dim);
        ops.push({
          op: 'positions',
          like: lv.index,
          table: wt(table),
          dim,
          offset,
          add,
          out: out.index,
        });
        return out;
      },
      attention(q, k, v, heads) {
        const [qv, kv, vv] = [f32(q, 'attention'), f32(k, 'attention'), f32(v, 'attention')];
        const {heads: H, kvHeads, headDim, window, softCap} = heads;
        if (window != null && !(Number.isInteger(window) && window > 0)) {
          throw new Error(
            `attention: expected a sliding window of a positive whole number of positions or ` +
              `null, received ${window}`,
          );
        }
        if (softCap != null && !(Number.isFinite(softCap) && softCap > 0)) {
          throw new Error(`attention: expected a positive soft cap or null, received ${softCap}`);
        }
        if (
          qv.width !== H * headDim ||
          kv.width !== kvHeads * headDim ||
          vv.width !== kvHeads * headDim ||
          H % kvHeads !== 0
        ) {
          throw new Error(
            `attention: expected queries of ${H} x ${headDim} and keys / values of ${kvHeads} x ${headDim}, ` +
              `received widths ${qv.width}, ${kv.width}, ${vv.width}`,
          );
        }
        const out = newValue(qv.width);
        const cache = caches.length;
        caches.push(kvHeads * headDim);
        usesKeyMask = usesKeyMask || nodeKeyMask;
        ops.push({
          op: 'attention',
          q: qv.index,
          k: kv.index,
          v: vv.index,
          heads: {...heads},
          cache,
          keyMask: nodeKeyMask,
          out: out.index,
        });
        return out;
      },
      layer: (layer, inputs) => compileSublayer(layer, inputs),
    };

    function elementwise(op: 'add' | 'mul', a: StepValue, b: StepValue): StepValue {
      const [av, bv] = [f32(a, op), f32(b, op)];
      if (av.width !== bv.width)
        throw new Error(`${op}: widths ${av.width} and ${bv.width} differ`);
      const out = newValue(av.width);
      ops.push({op, a: av.index, b: bv.index, width: av.width, out: out.index});
      return out;
    }

    this.emit = emit;
    this.ids = newValue(1, 'int32');
    this.keyMask = (on) => {
      nodeKeyMask = on;
    };
    this.finish = (output) => {
      const cut = cutToLastRows(values, ops, val(output).index);
      return {
        values: cut.values,
        weights,
        packed,
        ops: cut.ops,
        ids: (this.ids as RuleValue).index,
        logits: cut.output,
        cachedOps: cut.cachedOps,
        caches,
        usesKeyMask,
        constants,
      };
    };
  }
}
