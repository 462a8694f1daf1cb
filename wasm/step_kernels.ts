// WebAssembly SIMD kernels of a compiled decoding step, in AssemblyScript (compiled by
// scripts/build_wasm.mjs into src/kernels/step_kernels_binary.ts). The interface, with every
// argument's meaning, is src/kernels/step_kernels_api.ts (`StepKernels`). As in wasm/kernels.ts
// the memory is imported and the module has no data, no start function and no allocator: the
// caller places every array (tfjs-wasm's heap, where the weights already are, or a memory of the
// package's own from heapBase() on) and passes byte offsets. Weight offsets of 0 mean "absent".
//
// This entry file only re-exports; its exports are the module's. The kernels live by job, beside
// the layers' (wasm/kernels.ts):
// - simd/: shared SIMD math (horizontal sums; exp for x <= 0, shared with the masked softmax)
// - products/dense.ts: float32 products for few rows (one row streams the weight once; 4 x 8
//   tiles over 256-deep blocks); products/dense_t.ts: against a transposed table (tied logits)
// - packed/dense_rows.ts: a prompt's prefill on packed rows and panels (the 4 x 8 tile and the
//   packing of packed/tile_4x8.ts and packed/panels.ts, shared with the layers' sgemm)
// - int8/dense.ts: Keras 3's int8 quantization and products (exact int32 sums);
//   int8/dense_kn.ts: the same product on a kernel in Keras' layout [k, n], and int8 transposes
//   (their 16 x 16 register transpose in repack/int8.ts)
// - int4/: Keras 3's int4 layers on their packed bytes (two values a byte): dense_kn.ts the Dense
//   kernel in Keras' layout (float32 inputs, weight-only), dense_t.ts the tied logits (int8 rows
//   against the table), gather.ts the Embedding lookup
// - attention/attend.ts: attention over the cache; attention/cache.ts: cache writes
// - ops/: norms (layer, RMS), activations and a product's epilogue, add, mul and scale, rotary
//   embeddings, embeddings (gathers, positions), argmax

export {heapBase} from './heap_base';
export {activate} from './ops/activations';
export {add, mul, scale} from './ops/elementwise';
export {dense} from './products/dense';
export {denseRowsWorkBytes, denseRows} from './packed/dense_rows';
export {denseT} from './products/dense_t';
export {quantizeRows, denseInt8, denseTInt8} from './int8/dense';
export {denseInt8KN, transposeInt8} from './int8/dense_kn';
export {denseInt4KN} from './int4/dense_kn';
export {denseTInt4} from './int4/dense_t';
export {gatherInt4} from './int4/gather';
export {layerNorm, rmsNorm} from './ops/norms';
export {rope} from './ops/rope';
export {gather} from './ops/embeddings';
export {gatherInt8, addPositions} from './ops/embeddings';
export {writeCache} from './attention/cache';
export {attend} from './attention/attend';
export {argmax} from './ops/argmax';
