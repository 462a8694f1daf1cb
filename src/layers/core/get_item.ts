import * as tf from '@tensorflow/tfjs-core';
import {layers, SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {formatShape, Shape, singleShape} from '../engine/shapes';
import {defineContract, LayerContract} from '../engine/contract';
import {checkConstructorArgs} from '../engine/constructor_args';

/** One index of a `GetItem`: an integer (the axis is dropped) or a slice `start:stop:step`. */
export type IndexItem =
  | number
  | {
      /** First index (negative: from the end); null: from the start. */
      start: number | null;
      /** End index, exclusive (negative: from the end); null: to the end. */
      stop: number | null;
      /** Step; null: 1. */
      step: number | null;
    };

/** Options of {@link GetItem}. */
export interface GetItemArgs extends LayerArgs {
  /** Per leading axis (batch first), as Python writes `x[:, 0, 1:3]`; later axes are kept whole. */
  index: IndexItem[];
}

interface Resolved {
  begin: number[];
  end: number[];
  strides: number[];
  shrink: number;
  shape: Shape;
}

function checkItem(item: IndexItem, i: number): void {
  const ok =
    Number.isInteger(item) ||
    (item != null &&
      typeof item === 'object' &&
      (['start', 'stop', 'step'] as const).every(
        (k) => item[k] == null || Number.isInteger(item[k]),
      ));
  if (!ok) {
    throw new Error(
      `GetItem: expected index item ${i} to be an integer or {start, stop, step}, received ${JSON.stringify(item)}`,
    );
  }
  if (typeof item === 'object' && item.step != null && item.step <= 0) {
    throw new Error(`GetItem: slice steps must be > 0, received ${item.step} at item ${i}`);
  }
}

/**
 * Keras 3's `GetItem` operation (what `x[:, 0, 1:3]` becomes in a functional model): integer
 * indices drop their axis, slices keep it, with Python's negative indices and clamping.
 *
 * @example
 * ```ts
 * import * as tf from '@tensorflow/tfjs';
 * import {GetItem} from 'tfjs-attention';
 *
 * const x = tf.randomNormal([2, 3, 4]);
 * const all = {start: null, stop: null, step: null};
 * const first = new GetItem({index: [all, 0]}).apply(x); // x[:, 0]: [2, 4]
 * ```
 */
export class GetItem extends layers.Layer {
  /**
   * The name the class is registered under for tfjs serialization (a saved model's `className`).
   * @nocollapse
   */
  static readonly className = 'GetItem';
  /** What the package knows about this class (contract.ts). */
  static readonly contract: LayerContract = defineContract({
    keras: {
      keras3: {module: 'keras.src.ops.numpy', registeredName: 'GetItem', keys: ['index']},
      keras2: {refused: "tf-keras 2 does not have (it is Keras 3's indexing operation)"},
      call: {kind: 'indexing'},
    },
    configKeys: ['index'],
    decoding: {
      kind: 'refused',
      reason: 'not known to compute each position alone (an index may select positions)',
    },
  });

  /** The `index` option. */
  readonly index: IndexItem[];

  constructor(args: GetItemArgs) {
    checkConstructorArgs('GetItem', args);
    super(args);
    if (!Array.isArray(args?.index)) {
      throw new Error(
        `GetItem: expected index to be a list of integers and slices, received ${JSON.stringify(args?.index)}`,
      );
    }
    args.index.forEach(checkItem);
    this.index = args.index.map((it) => (typeof it === 'number' ? it : {...it}));
  }

  /**
   * begin / end / strides and the output shape for an input shape. Unknown sizes (symbolic
   * shapes) give unknown output sizes; a call always has every size.
   */
  private resolve(shape: Shape): Resolved {
    if (this.index.length > shape.length) {
      throw new Error(
        `Layer '${this.name}' indexes ${this.index.length} axes of an input of shape ${formatShape(shape)}`,
      );
    }
    const r: Resolved = {begin: [], end: [], strides: [], shrink: 0, shape: []};
    shape.forEach((size, axis) => {
      const item: IndexItem =
        axis < this.index.length ? this.index[axis] : {start: null, stop: null, step: null};
      if (typeof item === 'number') {
        const i = item < 0 && size != null ? item + size : item;
        if (size != null && (i < 0 || i >= size)) {
          throw new Error(
            `Layer '${this.name}': index ${item} is out of range for axis ${axis} of size ${size}`,
          );
        }
        r.begin.push(i);
        r.end.push(i + 1);
        r.strides.push(1);
        r.shrink |= 1 << axis;
        return;
      }
      const step = item.step ?? 1;
      if (size == null) {
        r.begin.push(0);
        r.end.push(0);
        r.strides.push(step);
        r.shape.push(null);
        return;
      }
      const clamp = (v: number | null, fallback: number) =>
        v == null ? fallback : Math.min(size, Math.max(0, v < 0 ? v + size : v));
      const begin = clamp(item.start, 0);
      const end = Math.max(begin, clamp(item.stop, size));
      r.begin.push(begin);
      r.end.push(end);
      r.strides.push(step);
      r.shape.push(Math.ceil((end - begin) / step));
    });
    return r;
  }

  override computeOutputShape(inputShape: Shape | Shape[]): Shape {
    return this.resolve(singleShape(inputShape, this.name)).shape;
  }

  /**
   * Slices, then takes every step-th element by padding the axis to a multiple of the step and
   * reshaping (`[n] -> [n / step, step]`, first column): every op here has a gradient on every
   * backend (tfjs' StridedSlice has none, and Gather's needs a kernel wasm lacks).
   */
  /** A tensor in, a tensor out; a symbolic tensor in (functional model), a symbolic tensor out. */
  override apply(inputs: tf.Tensor, kwargs?: Kwargs): tf.Tensor;
  override apply(inputs: SymbolicTensor, kwargs?: Kwargs): SymbolicTensor;
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[];
  override apply(
    inputs: tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[],
    kwargs?: Kwargs,
  ): tf.Tensor | tf.Tensor[] | SymbolicTensor | SymbolicTensor[] {
    return super.apply(inputs, kwargs);
  }

  override call(inputs: tf.Tensor | tf.Tensor[], _kwargs: Kwargs): tf.Tensor {
    return tf.tidy(() => {
      const x = Array.isArray(inputs) ? inputs[0] : inputs;
      const r = this.resolve(x.shape);
      const counts = r.begin.map((b, a) => Math.max(0, Math.ceil((r.end[a] - b) / r.strides[a])));
      const spans = counts.map((n, a) => (n === 0 ? 0 : (n - 1) * r.strides[a] + 1));
      let y = tf.slice(x, r.begin, spans);
      r.strides.forEach((step, a) => {
        if (step === 1 || counts[a] === 0) return;
        const shape = y.shape;
        const padding = shape.map((_, i) => [
          0,
          i === a ? counts[a] * step - spans[a] : 0,
        ]) as Array<[number, number]>;
        const grouped = tf.reshape(tf.pad(y, padding), [
          ...shape.slice(0, a),
          counts[a],
          step,
          ...shape.slice(a + 1),
        ]);
        const first = tf.slice(
          grouped,
          grouped.shape.map(() => 0),
          grouped.shape.map((d, i) => (i === a + 1 ? 1 : d)),
        );
        y = tf.reshape(first, [...shape.slice(0, a), counts[a], ...shape.slice(a + 1)]);
      });
      // integer indices drop their axis
      return tf.reshape(
        y,
        y.shape.filter((_, a) => (r.shrink & (1 << a)) === 0),
      );
    });
  }

  override getConfig(): tf.serialization.ConfigDict {
    return {...super.getConfig(), index: this.index as unknown as tf.serialization.ConfigDictArray};
  }
}
