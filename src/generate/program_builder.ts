/**
 * The builder of one compiled step's program (step_compile.ts drives it node by node): its values,
 * the weights it reads (float32, and int8 packed by the runtime), each attention's cache, and its
 * ops, made through the {@link StepEmitter} handed to the layers' compile rules; `finish` cuts it
 * to each row's last position after the last attention op (step_cut.ts) and gives the program.
 * The int8 and int4 layers' emitters are quantized_emitters.ts'.
 */
import type * as tf from '@tensorflow/tfjs-core';

import {StepActivation} from '../kernels/step_kernels_api';
import type {GraphLayer} from '../layers/engine/contract';
import type {
  StepDecline,
  StepEmitter,
  StepValue,
  StepWeight,
  StepWeightSource,
} from './step_program';
import {cutToLastRows} from './step_cut';
import {quantizedEmitters} from './quantized_emitters';
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
    const need = (w: StepWeight, size: number, what: string) => {
      if (w.size !== size) {
        throw new Error(`${what}: expected a weight of ${size} values, received ${w.size}`);
      }
    };

    // the int8 and int4 layers' weights and ops (quantized_emitters.ts)
    const quantizedPart = quantizedEmitters({
      newValue,
      val,
      f32,
      wt,
      need,
      tensorOf,
      floatWeight,
      push: (op) => ops.push(op),
    });
    const packed = quantizedPart.packed;

    const emit: StepEmitter = {
      ...quantizedPart.emitters,
      weight(source: StepWeightSource): StepWeight | StepDecline {
        const t = tensorOf(source);
        if (t.dtype !== 'float32') {
          return {declined: `a weight of dtype ${t.dtype} (only float32 weights compile)`};
        }
        return floatWeight(t);
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
