/**
 * Matrix products through the package's own kernels and layouts. On tfjs' cpu and wasm backends
 * they run the package's WebAssembly SIMD sgemm (src/kernels/wasm_kernels.ts): tfjs' cpu matMul
 * is a plain JavaScript loop, and tfjs-wasm runs batched products through a plain loop nest and
 * its transpose flags slowly. On wasm the sgemm runs in the backend's own heap (operands read
 * where they are, the product written into the output). Gradients are products themselves,
 * through the same kernel.
 *
 * Without the SIMD module (not yet compiled, or no SIMD), on wasm the forward pass and gradients
 * avoid matMul's transpose flags where they are slow: `matMul(a, b, true, false)` of
 * [512,256]ᵀ·[512,256] takes ~55 ms against ~4 ms for an explicit transpose and a plain matMul
 * (transposeB is as slow), and tfjs' matMul gradient uses both flags. Elsewhere the flags are
 * fast and a transpose is a copy, so the flags are kept.
 *
 * A product whose inner dimension is 0 is zeros, made here without any backend's matMul:
 * tfjs-wasm's (XNNPACK's 2-D products) leaves its output unwritten then, i.e. stale heap values.
 */
import * as tf from '@tensorflow/tfjs-core';

import {sgemm, wasmKernelsLoaded} from './wasm_kernels';
import {readF32, wasmHeap, writeF32} from './backend_io';
import {ownKernels} from './flags';

const KERNEL = 'TfjsAttentionMatMul';

function registerKernels(): void {
  if (tf.getKernel(KERNEL, 'cpu') != null) return;
  for (const kind of ['cpu', 'wasm'] as const) {
    tf.registerKernel({
      kernelName: KERNEL,
      backendName: kind,
      kernelFunc: ({inputs, backend, attrs}) => {
        const {a, b} = inputs as {a: tf.TensorInfo; b: tf.TensorInfo};
        const {transposeA, transposeB} = attrs as unknown as {
          transposeA: boolean;
          transposeB: boolean;
        };
        const r = a.shape.length;
        const lead = a.shape.slice(0, r - 2);
        const batch = lead.reduce((p, d) => p * d, 1);
        const [a0, a1] = a.shape.slice(r - 2);
        const [b0, b1] = b.shape.slice(r - 2);
        const [m, k] = transposeA ? [a1, a0] : [a0, a1];
        const n = transposeB ? b0 : b1;
        const heap = kind === 'wasm' ? wasmHeap(backend) : null;
        if (heap != null) {
          // in tfjs-wasm's heap: the inputs where they are, the product straight into the output
          const out = heap.output([...lead, m, n]);
          if (batch * m * n > 0) {
            const [ao, bo, co] = [heap.offset(a), heap.offset(b), heap.offset(out)];
            heap.kernels.sgemm(batch, m, n, k, ao, +transposeA, bo, +transposeB, co, heap.work);
          }
          return out;
        }
        const out = sgemm(
          readF32(kind, backend, a),
          readF32(kind, backend, b),
          batch,
          m,
          n,
          k,
          transposeA,
          transposeB,
        );
        return writeF32(kind, backend, [...lead, m, n], out);
      },
    });
  }
  tf.registerGradient({
    kernelName: KERNEL,
    inputsToSave: ['a', 'b'],
    gradFunc: (dy, saved, attrs) => {
      const [A, B] = saved;
      const {transposeA, transposeB} = attrs as unknown as {
        transposeA: boolean;
        transposeB: boolean;
      };
      const g = dy as tf.Tensor;
      if (!transposeA && !transposeB)
        return {a: () => mm(g, B, false, true), b: () => mm(A, g, true, false)};
      if (!transposeA && transposeB) return {a: () => mm(g, B), b: () => mm(g, A, true, false)};
      if (transposeA && !transposeB) return {a: () => mm(B, g, false, true), b: () => mm(A, g)};
      return {a: () => mm(B, g, true, true), b: () => mm(g, A, true, true)};
    },
  });
}

registerKernels();

/**
 * Whether `op(a) · op(b)` runs the package's SIMD sgemm: cpu or wasm, float32, equal batch shapes
 * and inner sizes (anything else goes to tfjs, which broadcasts or reports the mismatch).
 */
function simd(a: tf.Tensor, b: tf.Tensor, transposeA: boolean, transposeB: boolean): boolean {
  const backend = tf.getBackend();
  const r = a.rank;
  return (
    ownKernels() &&
    (backend === 'cpu' || backend === 'wasm') &&
    wasmKernelsLoaded() &&
    a.dtype === 'float32' &&
    b.dtype === 'float32' &&
    r >= 2 &&
    r === b.rank &&
    a.shape.slice(0, r - 2).every((d, i) => d === b.shape[i]) &&
    a.shape[transposeA ? r - 2 : r - 1] === b.shape[transposeB ? r - 1 : r - 2]
  );
}

/** Whether explicit transposes beat matMul's transpose flags on the current backend. */
export function explicitTransposes(): boolean {
  return ownKernels() && tf.getBackend() === 'wasm';
}

function swapLast(x: tf.Tensor): tf.Tensor {
  const perm = x.shape.map((_, i) => i);
  const r = x.rank;
  [perm[r - 2], perm[r - 1]] = [perm[r - 1], perm[r - 2]];
  return tf.transpose(x, perm);
}

/** Per-slice multiply-adds above which wasm's batched matMul loses to a loop of 2-D products. */
const LOOP_MACS = 2 ** 21;

/**
 * tfjs-wasm runs 2-D products through XNNPACK and batched ones through a plain loop nest, ~10x
 * slower for large slices ([4,2048,32]·[4,32,2048]: 1430 ms batched, 125 ms as four 2-D
 * products); small slices ([32,128,32]·[32,32,128]) are faster batched (per-op overhead).
 */
function batchedOnWasm(a: tf.Tensor, b: tf.Tensor): tf.Tensor {
  const r = a.rank;
  if (r !== 3 || b.rank !== 3 || a.shape[0] !== b.shape[0] || a.shape[0] === 1) {
    return tf.matMul(a, b);
  }
  const [, m, k] = a.shape as [number, number, number];
  const cols = b.shape[2] as number;
  if (m * k * cols < LOOP_MACS) {
    return tf.matMul(a, b);
  }
  const as = tf.unstack(a);
  const bs = tf.unstack(b);
  return tf.stack(as.map((x, i) => tf.matMul(x, bs[i]))); // [n, m, cols]
}

function product(a: tf.Tensor, b: tf.Tensor, transposeA: boolean, transposeB: boolean): tf.Tensor {
  if (explicitTransposes()) {
    return batchedOnWasm(transposeA ? swapLast(a) : a, transposeB ? swapLast(b) : b);
  }
  return tf.matMul(a, b, transposeA, transposeB);
}

/**
 * The shape of `op(a) · op(b)` when its inner dimension is 0 on both sides (and the batch shapes
 * broadcast), else null (a non-empty or invalid product, for the backend's matMul).
 */
function emptyInnerShape(
  a: tf.Tensor,
  b: tf.Tensor,
  transposeA: boolean,
  transposeB: boolean,
): number[] | null {
  const [ra, rb] = [a.rank, b.rank];
  if (ra < 2 || rb < 2 || a.dtype !== b.dtype) return null;
  const ka = a.shape[transposeA ? ra - 2 : ra - 1];
  const kb = b.shape[transposeB ? rb - 1 : rb - 2];
  if (ka !== 0 || kb !== 0) return null;
  let lead: number[];
  try {
    lead = tf.broadcast_util.assertAndGetBroadcastShape(
      a.shape.slice(0, ra - 2),
      b.shape.slice(0, rb - 2),
    );
  } catch {
    return null; // tfjs' matMul reports the mismatch
  }
  const m = a.shape[transposeA ? ra - 1 : ra - 2];
  const n = b.shape[transposeB ? rb - 2 : rb - 1];
  return [...lead, m, n];
}

/** Zeros of `shape`, with (empty) zero gradients for `a` and `b` so the product stays differentiable. */
function zeroProduct(a: tf.Tensor, b: tf.Tensor, shape: number[]): tf.Tensor {
  const f = tf.customGrad(((x: tf.Tensor, y: tf.Tensor) => ({
    value: tf.zeros(shape, x.dtype),
    gradFunc: () => [tf.zerosLike(x), tf.zerosLike(y)],
  })) as unknown as Parameters<typeof tf.customGrad>[0]);
  return f(a, b);
}

/**
 * `tf.matMul(a, b, transposeA, transposeB)`, except that a product whose inner dimension is 0
 * gives zeros without calling the backend's matMul (tfjs-wasm's leaves stale heap values then).
 */
export function matMul(
  a: tf.Tensor,
  b: tf.Tensor,
  transposeA = false,
  transposeB = false,
): tf.Tensor {
  const empty = emptyInnerShape(a, b, transposeA, transposeB);
  if (empty != null) return zeroProduct(a, b, empty);
  return tf.matMul(a, b, transposeA, transposeB);
}

/**
 * `op(a) · op(b)` (op = transpose of the last two axes when the flag is set; equal batch shapes),
 * with gradients that are themselves {@link product}s, so no slow transpose flag is used in
 * training either.
 */
export function mm(a: tf.Tensor, b: tf.Tensor, transposeA = false, transposeB = false): tf.Tensor {
  const empty = emptyInnerShape(a, b, transposeA, transposeB);
  if (empty != null) return zeroProduct(a, b, empty);
  if (simd(a, b, transposeA, transposeB)) {
    return tf.engine().runKernel(KERNEL, {a, b}, {transposeA, transposeB} as never) as tf.Tensor;
  }
  if (!explicitTransposes()) {
    return tf.matMul(a, b, transposeA, transposeB);
  }
  // (on wasm also large batched products become loops of 2-D products, see batchedOnWasm)
  const f = tf.customGrad(((x: tf.Tensor, y: tf.Tensor, save: tf.GradSaveFunc) => {
    save([x, y]);
    return {
      value: product(x, y, transposeA, transposeB),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [A, B] = saved;
        if (!transposeA && !transposeB)
          return [product(dy, B, false, true), product(A, dy, true, false)];
        if (!transposeA && transposeB)
          return [product(dy, B, false, false), product(dy, A, true, false)];
        if (transposeA && !transposeB)
          return [product(B, dy, false, true), product(A, dy, false, false)];
        return [product(B, dy, true, true), product(dy, A, true, true)];
      },
    };
  }) as unknown as Parameters<typeof tf.customGrad>[0]);
  return f(a, b);
}

/**
 * `x · w` (or `x · wᵀ` with `transposeW`) for 2-D `x` `[rows, k]` where `w` is a weight, the same
 * tensor at every call: never a copy of `w`. The package's SIMD product where it runs (cpu, wasm;
 * it reads `w` where it is, in either layout), else tfjs' matMul with its transpose flag — also
 * on wasm without the SIMD module, where {@link mm} would transpose explicitly: a transposed
 * copy per call, which also costs tfjs-wasm the packed weights XNNPACK caches per weight tensor.
 *
 * One row on wasm (a decoding step at batch 1) goes to tfjs' product too: the SIMD sgemm packs
 * all of `w` at every call, slowly when `w` is transposed, while tfjs-wasm keeps XNNPACK's packed
 * `w` ([1,256]·[256,5000]: 0.16 against 0.92 ms) or runs its plain loop on a transposed `w`
 * ([1,256]·[5000,256]ᵀ: 2.3-2.8 against 5-6 ms); from a few rows on the SIMD sgemm wins.
 */
export function weightProduct(x: tf.Tensor, w: tf.Tensor, transposeW = false): tf.Tensor {
  const empty = emptyInnerShape(x, w, false, transposeW);
  if (empty != null) return zeroProduct(x, w, empty);
  const oneRowOnWasm = tf.getBackend() === 'wasm' && x.rank === 2 && x.shape[0] === 1;
  if (!oneRowOnWasm && simd(x, w, false, transposeW)) {
    return tf.engine().runKernel(KERNEL, {a: x, b: w}, {
      transposeA: false,
      transposeB: transposeW,
    } as never) as tf.Tensor;
  }
  return tf.matMul(x, w, false, transposeW);
}
