// WebAssembly SIMD kernels of a compiled decoding step, in AssemblyScript (compiled by
// scripts/build_wasm.mjs into src/kernels/step_kernels_binary.ts). The interface, with every
// argument's meaning, is src/kernels/step_kernels_api.ts (`StepKernels`). As in wasm/kernels.ts
// the memory is imported and the module has no data, no start function and no allocator: the
// caller places every array (tfjs-wasm's heap, where the weights already are, or a memory of the
// package's own from heapBase() on) and passes byte offsets. Weight offsets of 0 mean "absent".
//
// The kernels live in wasm/step/, one job a file; this entry file's exports are the module's:
// - step/activations.ts: the activations (float64 scalar math, float32 four at a time), a
//   product's epilogue; step/elementwise.ts: add and mul; step/simd.ts: horizontal sums
// - step/dense.ts: float32 products for few rows (one row streams the weight once; 4 x 8 tiles
//   over 256-deep blocks); step/dense_rows.ts: a prompt's prefill on packed rows and panels;
//   step/dense_t.ts: products against a transposed table (tied logits)
// - step/int8_dense.ts: Keras 3's int8 quantization and products (exact int32 sums);
//   step/int8_pack.ts: int8 weights held as float32 packed as int8 (as they are or transposed)
// - step/norms.ts: layer and RMS norms; step/embeddings.ts: gathers, positions; step/cache.ts:
//   cache writes; step/attention.ts: attention over the cache; step/argmax.ts: argmax
// - ../exp_neg.ts: exp(x) for x <= 0, shared with wasm/kernels.ts

/** First free byte after the module's static data, 16-aligned. */
export function heapBase(): usize {
  return (__heap_base + 15) & ~(<usize>15);
}

export {activate} from './step/activations';
export {add, mul} from './step/elementwise';
export {dense} from './step/dense';
export {denseRowsWorkBytes, denseRows} from './step/dense_rows';
export {denseT} from './step/dense_t';
export {quantizeRows, denseInt8, denseTInt8} from './step/int8_dense';
export {layerNorm, rmsNorm} from './step/norms';
export {gather} from './step/embeddings';
export {packInt8, packInt8T} from './step/int8_pack';
export {gatherInt8, addPositions} from './step/embeddings';
export {writeCache} from './step/cache';
export {attend} from './step/attention';
export {argmax} from './step/argmax';
