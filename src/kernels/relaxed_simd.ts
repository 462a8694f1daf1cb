/**
 * Whether this engine has WebAssembly's relaxed SIMD, asked by validating a tiny module that uses
 * the one instruction the package needs (`i16x8.relaxed_dot_i8x16_i7x16_s`, the compiled step's
 * int8 products: ./step_kernels). Chromium and Node 22 have it;
 * Node 20 only with `--experimental-wasm-relaxed-simd`; Safari does not. Validating compiles
 * nothing and never throws here.
 */

/** `v128.const 0` (the instruction and its 16 bytes). */
const V128_ZERO = [0xfd, 0x0c, ...new Array<number>(16).fill(0)];

/**
 * A module of one function `() -> v128` returning `i16x8.relaxed_dot_i8x16_i7x16_s(0, 0)`
 * (opcode 0xfd 0x112, LEB128 0x92 0x02).
 */
export function relaxedSimdProbe(): Uint8Array<ArrayBuffer> {
  const body = [0, ...V128_ZERO, ...V128_ZERO, 0xfd, 0x92, 0x02, 0x0b];
  const code = [1, body.length, ...body];
  return new Uint8Array([
    ...[0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00], // magic, version 1
    ...[0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b], // types: () -> v128
    ...[0x03, 0x02, 0x01, 0x00], // functions: one of type 0
    ...[0x0a, code.length, ...code], // code
  ]);
}

/** Whether the engine validates {@link relaxedSimdProbe}: false where WebAssembly or relaxed SIMD is missing. */
export function relaxedSimdSupported(): boolean {
  try {
    return typeof WebAssembly === 'object' && WebAssembly.validate(relaxedSimdProbe());
  } catch {
    return false;
  }
}
