// The decoding step's int8 products again, built with relaxed SIMD (scripts/build_wasm.mjs,
// `--enable relaxed-simd`, into src/kernels/step_int8_relaxed_binary.ts): the same sources as
// wasm/step_kernels.ts' denseInt8 and denseTInt8, their int32 sums made by
// wasm/int8/dots_relaxed.ts (`i16x8.relaxed_dot_i8x16_i7x16_s`, the sign moved to the weight), equal
// to the plain module's exactly. src/kernels/step_kernels.ts instantiates it beside the step
// module on the same memory where the engine validates relaxed SIMD and
// TFJS_ATTENTION_RELAXED_SIMD allows it; every other kernel stays the step module's.

export {denseInt8, denseTInt8} from './int8/dense';
