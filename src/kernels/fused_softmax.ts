/**
 * Masked softmax over the last axis with a `fill` tensor: where `fill` is 0 the logit is kept,
 * elsewhere it is replaced by the fill value (as `where(mask, logits, fill)` would), then softmax.
 *
 * On tfjs' cpu backend this is one fused kernel (SIMD where the package's WebAssembly module is
 * loaded): its softmax runs max, subtract, exp, sum and divide as separate kernels (~128 ms for
 * [32,128,128] here) and masking costs another full pass (~60 ms), against ~10 ms for the loop,
 * with a fused gradient `dx = y * (dy - Σ dy·y)` (0 at replaced logits). On wasm the same SIMD
 * kernel runs in the backend's heap. Other backends compose `softmax(where(mask, logits, fill))`;
 * on wasm without the package's module in its heap, where `where` is slow,
 * `softmax(logits * keep + fill)` when every logit is finite.
 */
import * as tf from '@tensorflow/tfjs-core';

import {maskedSoftmax, maskedSoftmaxGrad, wasmKernelsLoaded} from './wasm_kernels';
import {readF32, wasmHeap, writeF32} from './backend_io';
import {ownKernels} from './flags';

const FORWARD = 'TfjsAttentionMaskedSoftmax';
const BACKWARD = 'TfjsAttentionMaskedSoftmaxGrad';

/** For each row of `shape[:-1]`, the offset of its row in a broadcast `fillShape`. */
function fillRowOffsets(
  shape: number[],
  fillShape: number[],
): {offsets: Int32Array; perElement: boolean} {
  const rank = shape.length;
  const rows = shape.slice(0, rank - 1).reduce((p, d) => p * d, 1);
  const cols = shape[rank - 1];
  const perElement = fillShape[rank - 1] !== 1;
  const rowStride = perElement ? cols : 1;
  // strides of the fill over the leading axes (0 where broadcast)
  const strides: number[] = new Array(rank - 1).fill(0);
  let s = rowStride;
  for (let i = rank - 2; i >= 0; i--) {
    strides[i] = fillShape[i] === 1 ? 0 : s;
    s *= fillShape[i];
  }
  const offsets = new Int32Array(rows);
  const idx = new Array(rank - 1).fill(0);
  for (let r = 0; r < rows; r++) {
    let off = 0;
    for (let i = 0; i < rank - 1; i++) off += idx[i] * strides[i];
    offsets[r] = off;
    for (let i = rank - 2; i >= 0; i--) {
      if (++idx[i] < shape[i]) break;
      idx[i] = 0;
    }
  }
  return {offsets, perElement};
}

/** The plain-loop masked softmax (where the SIMD module is missing). */
function softmaxLoop(
  x: ArrayLike<number>,
  b: ArrayLike<number>,
  offsets: Int32Array,
  perElement: boolean,
  cols: number,
): Float32Array {
  const out = new Float32Array(x.length);
  for (let r = 0; r < offsets.length; r++) {
    const base = r * cols;
    const bo = offsets[r];
    let max = -Infinity;
    for (let j = 0; j < cols; j++) {
      const f = perElement ? b[bo + j] : b[bo];
      const v = f === 0 ? x[base + j] : f;
      out[base + j] = v;
      if (v > max) max = v;
    }
    let sum = 0;
    for (let j = 0; j < cols; j++) {
      const e = Math.exp(out[base + j] - max);
      out[base + j] = e;
      sum += e;
    }
    const inv = 1 / sum;
    for (let j = 0; j < cols; j++) out[base + j] *= inv;
  }
  return out;
}

/** The plain-loop gradient `dx = y * (dy - Σ dy·y)`, 0 at replaced logits. */
function softmaxGradLoop(
  g: ArrayLike<number>,
  p: ArrayLike<number>,
  b: ArrayLike<number>,
  offsets: Int32Array,
  perElement: boolean,
  cols: number,
): Float32Array {
  const out = new Float32Array(p.length);
  for (let r = 0; r < offsets.length; r++) {
    const base = r * cols;
    const bo = offsets[r];
    let dot = 0;
    for (let j = 0; j < cols; j++) dot += g[base + j] * p[base + j];
    for (let j = 0; j < cols; j++) {
      // a replaced (masked) logit does not reach the output: its gradient is 0
      const f = perElement ? b[bo + j] : b[bo];
      out[base + j] = f === 0 ? p[base + j] * (g[base + j] - dot) : 0;
    }
  }
  return out;
}

function registerKernels(): void {
  if (tf.getKernel(FORWARD, 'cpu') != null) return;
  for (const kind of ['cpu', 'wasm'] as const) {
    tf.registerKernel({
      kernelName: FORWARD,
      backendName: kind,
      kernelFunc: ({inputs, backend}) => {
        const {logits, fill} = inputs as {logits: tf.TensorInfo; fill: tf.TensorInfo};
        const shape = logits.shape;
        const cols = shape[shape.length - 1];
        const {offsets, perElement} = fillRowOffsets(shape, fill.shape);
        const heap = kind === 'wasm' ? wasmHeap(backend) : null;
        if (heap != null) {
          // in tfjs-wasm's heap: read the logits where they are, write into the output
          const out = heap.output(shape);
          if (offsets.length * cols > 0) {
            const [xo, fo, oo] = [heap.offset(logits), heap.offset(fill), heap.offset(out)];
            heap.withInt32(offsets, (ro) =>
              heap.kernels.maskedSoftmax(offsets.length, cols, xo, fo, ro, +perElement, oo),
            );
          }
          return out;
        }
        const x = readF32(kind, backend, logits);
        const b = readF32(kind, backend, fill);
        const y = wasmKernelsLoaded()
          ? maskedSoftmax(x, b, offsets, perElement, cols)
          : softmaxLoop(x, b, offsets, perElement, cols);
        return writeF32(kind, backend, shape, y);
      },
    });
    tf.registerKernel({
      kernelName: BACKWARD,
      backendName: kind,
      kernelFunc: ({inputs, backend}) => {
        const {dy, y, fill} = inputs as {dy: tf.TensorInfo; y: tf.TensorInfo; fill: tf.TensorInfo};
        const shape = y.shape;
        const cols = shape[shape.length - 1];
        const {offsets, perElement} = fillRowOffsets(shape, fill.shape);
        const heap = kind === 'wasm' ? wasmHeap(backend) : null;
        if (heap != null) {
          const out = heap.output(shape);
          if (offsets.length * cols > 0) {
            const [go, yo, fo] = [heap.offset(dy), heap.offset(y), heap.offset(fill)];
            const oo = heap.offset(out);
            heap.withInt32(offsets, (ro) =>
              heap.kernels.maskedSoftmaxGrad(offsets.length, cols, go, yo, fo, ro, +perElement, oo),
            );
          }
          return out;
        }
        const g = readF32(kind, backend, dy);
        const p = readF32(kind, backend, y);
        const b = readF32(kind, backend, fill);
        const dx = wasmKernelsLoaded()
          ? maskedSoftmaxGrad(g, p, b, offsets, perElement, cols)
          : softmaxGradLoop(g, p, b, offsets, perElement, cols);
        return writeF32(kind, backend, shape, dx);
      },
    });
  }
  tf.registerGradient({
    kernelName: FORWARD,
    inputsToSave: ['fill'],
    outputsToSave: [true],
    gradFunc: (dy, saved) => {
      const [fill, y] = saved;
      return {
        logits: () => tf.engine().runKernel(BACKWARD, {dy: dy as tf.Tensor, y, fill}) as tf.Tensor,
        // the fill is a mask: constant, never differentiated in practice
        fill: () => tf.zerosLike(fill),
      };
    },
  });
}

registerKernels();

/**
 * Whether the fused kernel runs here: tfjs' cpu backend, or wasm where the package's kernels run
 * in its heap.
 */
function fused(logits: tf.Tensor): boolean {
  if (!ownKernels() || logits.dtype !== 'float32') return false;
  const backend = tf.getBackend();
  return backend === 'cpu' || (backend === 'wasm' && wasmHeap(tf.backend()) != null);
}

/**
 * Masked softmax over the last axis. `fill` (or null: no mask) has the rank of `logits` and
 * broadcasts to it (e.g. `[batch, 1, 1, keys]` against `[batch, heads, queries, keys]`); 0 keeps
 * a logit, any other value replaces it.
 */
export function softmaxWithFill(logits: tf.Tensor, fill: tf.Tensor | null): tf.Tensor {
  if (fill != null && fill.rank !== logits.rank) {
    throw new Error(`softmaxWithFill: fill of rank ${fill.rank} for logits of rank ${logits.rank}`);
  }
  // the fused kernels index the fill by these rules: a fill that does not broadcast would be read
  // out of its bounds
  if (fill != null && fill.shape.some((d, i) => d !== 1 && d !== logits.shape[i])) {
    throw new Error(
      `softmaxWithFill: fill of shape [${fill.shape}] does not broadcast to logits [${logits.shape}]`,
    );
  }
  if (fused(logits)) {
    const b = fill ?? tf.zeros(new Array(logits.rank).fill(1));
    const y = tf.engine().runKernel(FORWARD, {logits, fill: b}) as tf.Tensor;
    if (fill == null) b.dispose();
    return y;
  }
  return tf.tidy(() => {
    if (fill == null) return tf.softmax(logits);
    const keepBool = tf.equal(fill, 0); // small: the mask's shape
    // On wasm `where` over the scores costs ~10x a broadcast multiply-add (72 vs 7 ms for
    // [4, 8, 128, 128]), but 0 * Inf = NaN: the multiply-add is taken only when every logit is
    // finite, so a masked Inf / NaN logit is replaced, never multiplied.
    if (ownKernels() && tf.getBackend() === 'wasm' && allFinite(logits)) {
      return tf.softmax(tf.add(tf.mul(logits, tf.cast(keepBool, logits.dtype)), fill));
    }
    const shape = logits.shape;
    return tf.softmax(
      tf.where(tf.broadcastTo(keepBool, shape), logits, tf.broadcastTo(fill, shape)),
    );
  });
}

/** Whether every element is finite: one sum (NaN or infinite if any element is), read back. */
function allFinite(x: tf.Tensor): boolean {
  const sum = tf.sum(x);
  const finite = Number.isFinite(sum.dataSync()[0]);
  sum.dispose();
  return finite;
}
