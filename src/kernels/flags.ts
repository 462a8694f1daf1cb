/**
 * The package's switches, as tfjs environment flags (`tf.env().set(name, value)`), so tests and
 * users can turn a fast path off without touching module state.
 *
 * - `TFJS_ATTENTION_OWN_KERNELS` (default true): the package's own kernels and product layouts:
 *   the WebAssembly SIMD products (sgemm) on the cpu and wasm backends, the fused masked softmax
 *   (SIMD) and the head-transpose kernels on cpu; on wasm without the SIMD module, products with
 *   explicit transposes (and loops of 2-D products for large batched ones). Off, every op is
 *   tfjs' own.
 * - `TFJS_ATTENTION_SIMD` (default true): the WebAssembly SIMD module (src/kernels/wasm_kernels.ts)
 *   where it loaded. Off, every caller takes the path it takes where the module did not load (no
 *   SIMD, a compile not yet done, an instantiation refused): tfjs' kernels, the JavaScript
 *   softmax loop on cpu, explicit transposes on wasm. Tests use it to reach those paths.
 * - `TFJS_ATTENTION_RELAXED_SIMD` (default false: measured no faster on x64, where V8 lowers the
 *   dot to pmaddubsw; turn it on where it measures faster): the compiled decoding step's int8 products
 *   (`denseInt8`, `denseTInt8`) on WebAssembly's relaxed SIMD (`i16x8.relaxed_dot_i8x16_i7x16_s`,
 *   src/kernels/step_kernels.ts) where the engine validates it (Chromium and Node 22 do; Node 20
 *   only with `--experimental-wasm-relaxed-simd`); the sums are exact, equal to the plain SIMD
 *   module's. Off, or where relaxed SIMD is missing (Safari), the plain SIMD module's products run.
 *   The step report's `kernels` says which ran ('simd-relaxed' or 'simd'). On, an int8 weight
 *   holding -128 (outside Keras' [-127, 127]; the relaxed products negate weights) is refused.
 * - `TFJS_ATTENTION_BLOCK_ABOVE` (default 2^23): score elements of one call above which attention
 *   runs in blocks of queries when a layer's `chunkSize` is not set.
 * - `TFJS_ATTENTION_BLOCK_TARGET` (default -1, automatic: 2^21, or 2^23 on tfjs-node's
 *   `tensorflow` backend): score elements per block then. tfjs-node keeps tensors in native
 *   memory and its kernels lose to per-block work on small blocks (at 2048 tokens, 4 heads:
 *   ~56 ms in blocks of 2^21 elements, ~40 ms in blocks of 2^23, peaking at 48 and 144 MiB
 *   against 271 MiB whole); in a wasm heap or a browser tab memory is the scarcer.
 * - `TFJS_ATTENTION_COMPILED_STEP` (default true): `generate`'s compiled decoding step
 *   (generate/compiled_step.ts) where the model compiles. Off, cached decoding runs the eager
 *   stepper (each layer called on the new positions).
 * - `TFJS_ATTENTION_STEP_BACKEND_ROWS` (default -1, automatic: 8 on tfjs-node's `tensorflow`
 *   backend, never elsewhere): the rows (batch x positions of one run) from which the compiled
 *   step's float32 products run on the backend's own matmul, reading the model's weight tensors
 *   (generate/backend_products.ts): a prompt's prefill on TensorFlow's matmul. 0: never. Never on
 *   tfjs-wasm, whose heap the step shares.
 * - `TFJS_ATTENTION_WASM_MEMORY_BYTES` (default 2^32, 4 GiB: the most tfjs-wasm 4.22's heap grows
 *   to): the memory the loaders assume tfjs-wasm can hold; a model whose weights do not fit in
 *   what is left of it is refused before any weight is allocated (kernels/backend_capacity.ts). Lower
 *   it to keep room for other work in a page, or where a browser grants WebAssembly less (iOS).
 */
import * as tf from '@tensorflow/tfjs-core';

export const OWN_KERNELS = 'TFJS_ATTENTION_OWN_KERNELS';
export const BLOCK_ABOVE = 'TFJS_ATTENTION_BLOCK_ABOVE';
export const BLOCK_TARGET = 'TFJS_ATTENTION_BLOCK_TARGET';
export const SIMD = 'TFJS_ATTENTION_SIMD';
export const RELAXED_SIMD = 'TFJS_ATTENTION_RELAXED_SIMD';
export const COMPILED_STEP = 'TFJS_ATTENTION_COMPILED_STEP';
export const STEP_BACKEND_ROWS = 'TFJS_ATTENTION_STEP_BACKEND_ROWS';
export const WASM_MEMORY_BYTES = 'TFJS_ATTENTION_WASM_MEMORY_BYTES';

tf.env().registerFlag(OWN_KERNELS, () => true);
tf.env().registerFlag(BLOCK_ABOVE, () => 2 ** 23);
tf.env().registerFlag(BLOCK_TARGET, () => -1);
tf.env().registerFlag(SIMD, () => true);
tf.env().registerFlag(RELAXED_SIMD, () => false);
tf.env().registerFlag(COMPILED_STEP, () => true);
tf.env().registerFlag(STEP_BACKEND_ROWS, () => -1);
tf.env().registerFlag(WASM_MEMORY_BYTES, () => 2 ** 32);

/** Whether the package's own kernels and product layouts are on. */
export function ownKernels(): boolean {
  return tf.env().getBool(OWN_KERNELS);
}

/** Whether the WebAssembly SIMD module may be used (TFJS_ATTENTION_SIMD); whether it loaded is asked of wasm_kernels.ts. */
export function simdAllowed(): boolean {
  return tf.env().getBool(SIMD);
}

/**
 * Whether the compiled step's int8 products may run on relaxed SIMD (TFJS_ATTENTION_RELAXED_SIMD);
 * whether the engine has it is asked of relaxed_simd.ts.
 */
export function relaxedSimdAllowed(): boolean {
  return tf.env().getBool(RELAXED_SIMD);
}

/** The automatic query-block thresholds, in score elements. */
export function blockThresholds(): {above: number; target: number} {
  const set = tf.env().getNumber(BLOCK_TARGET);
  const target = set >= 0 ? set : tf.getBackend() === 'tensorflow' ? 2 ** 23 : 2 ** 21;
  return {above: tf.env().getNumber(BLOCK_ABOVE), target};
}
