// WebAssembly SIMD kernels of tfjs-attention's layers, in AssemblyScript (compiled by
// scripts/build_wasm.mjs into src/kernels/wasm_binary.ts). The memory is imported and the module
// has no data of its own: no allocator, the caller places every array (in a memory of the
// package's own from heapBase() on, or in tfjs-wasm's heap where its tensors are) and passes
// byte offsets.
//
// This entry file only re-exports; its exports are the module's. The kernels live by job beside
// the decoding step's (wasm/step_kernels.ts):
// - packed/sgemm.ts: batched products with transposes, packed blocks, 4 x 8 tiles
//   (packed/tile_4x8.ts and packed/panels.ts, shared with the step's prefill)
// - attention/masked_softmax.ts: the masked softmax and its gradient (simd/exp_neg.ts)

export {heapBase} from './heap_base';
export {sgemmWorkBytes, sgemm} from './packed/sgemm';
export {maskedSoftmax, maskedSoftmaxGrad} from './attention/masked_softmax';
