/**
 * The package's WebAssembly SIMD kernels (wasm/kernels.ts, compiled by scripts/build_wasm.mjs
 * and embedded as base64 in ./wasm_binary). The module imports its memory, so it runs in two
 * places: on a memory of its own (tfjs' cpu backend: a call copies its inputs in, runs, and
 * copies the result out), and on tfjs-wasm's heap ({@link kernelsOnMemory}: the kernels read and
 * write the backend's tensors where they are, nothing copied).
 *
 * Loading: the module (under 4 KB) is compiled synchronously at import, which Node and browsers
 * allow for small modules (Chromium refuses synchronous compiles above 4 KB on the main thread).
 * Where a synchronous compile is refused anyway, it is compiled asynchronously and callers use
 * tfjs' kernels until it is ready ({@link wasmKernelsReady}); where WebAssembly or its SIMD
 * instructions are missing, or the module cannot be instantiated (its memory cannot be reserved,
 * e.g. under `ulimit -v`), they always do. The kernels are an optimisation: loading them never
 * throws and never leaves a rejected promise; {@link wasmKernelsFailure} says why they are off.
 * TFJS_ATTENTION_SIMD (src/kernels/flags.ts) switches them off as if they had not loaded. The
 * loading is ./wasm_module's, shared with the decoding step's module (./step_kernels).
 */
import {KERNELS_WASM_BASE64} from './wasm_binary';
import {wasmModule} from './wasm_module';

interface Exports {
  memory: WebAssembly.Memory;
  heapBase(): number;
  sgemmWorkBytes(): number;
  sgemm(
    batch: number,
    m: number,
    n: number,
    k: number,
    a: number,
    transA: number,
    b: number,
    transB: number,
    c: number,
    work: number,
  ): void;
  maskedSoftmax(
    rows: number,
    cols: number,
    x: number,
    fill: number,
    fillRows: number,
    perElement: number,
    out: number,
  ): void;
  maskedSoftmaxGrad(
    rows: number,
    cols: number,
    dy: number,
    y: number,
    fill: number,
    fillRows: number,
    perElement: number,
    out: number,
  ): void;
}

const KERNELS = wasmModule<Exports>({base64: KERNELS_WASM_BASE64, name: 'the module', sync: true});

/**
 * The kernels on `memory` (another module's, e.g. tfjs-wasm's heap), or null when the module is
 * not loaded or switched off, or the memory cannot be imported (a shared memory, as tfjs-wasm's
 * threaded build has). Byte offsets given to its functions are offsets in `memory`.
 */
export function kernelsOnMemory(memory: WebAssembly.Memory): Exports | null {
  return KERNELS.on(memory);
}

/** The functions of the kernels' module (byte offsets in its memory). */
export type KernelExports = Exports;

// loaded at import: synchronously where allowed (the module is under 4 KB)
const readyPromise: Promise<boolean> = KERNELS.ready();

/**
 * Resolves to whether the package's WebAssembly SIMD kernels are usable. They are from import on
 * wherever WebAssembly SIMD is (Node, current browsers: the module is compiled synchronously);
 * await this only where a synchronous compile may be refused, to have the fast path from the
 * first call. Until then, and where SIMD is missing or the module cannot be instantiated, products
 * and the softmax use tfjs' kernels (same results). It never rejects.
 */
export function simdKernelsReady(): Promise<boolean> {
  return readyPromise;
}

/** {@link simdKernelsReady} under its internal name. */
export const wasmKernelsReady = simdKernelsReady;

/**
 * Why the SIMD kernels did not load (no WebAssembly or SIMD, a failed compile or instantiation),
 * or null when they loaded or are still compiling.
 */
export function wasmKernelsFailure(): string | null {
  return KERNELS.failure();
}

/** Whether the SIMD kernels are usable now (loaded, and TFJS_ATTENTION_SIMD on). */
export function wasmKernelsLoaded(): boolean {
  return KERNELS.usable();
}

const align = (n: number) => (n + 15) & ~15;

/** Grows the module's memory to at least `bytes`. */
function reserve(k: Exports, bytes: number): void {
  const have = k.memory.buffer.byteLength;
  if (bytes > have) k.memory.grow(Math.ceil((bytes - have) / 65536));
}

function loaded(): Exports {
  const exportsOf = KERNELS.own();
  if (exportsOf == null) {
    throw new Error(
      `tfjs-attention: the WebAssembly kernels are not loaded (${KERNELS.failure() ?? 'still compiling'})`,
    );
  }
  return exportsOf;
}

/**
 * Places `arrays` one after the other (16-byte aligned) after `skip` scratch bytes, with `outFloats`
 * more floats for the result; returns their offsets, the result's last.
 */
function place(
  x: Exports,
  skip: number,
  arrays: Array<ArrayLike<number>>,
  outFloats: number,
): number[] {
  const offsets: number[] = [];
  let at = align(x.heapBase()) + align(skip);
  for (const a of arrays) {
    offsets.push(at);
    at = align(at + 4 * a.length);
  }
  offsets.push(at);
  reserve(x, at + 4 * outFloats);
  const buf = x.memory.buffer;
  arrays.forEach((a, i) => {
    if (a instanceof Int32Array) new Int32Array(buf, offsets[i], a.length).set(a);
    else new Float32Array(buf, offsets[i], a.length).set(a);
  });
  return offsets;
}

/**
 * Masked softmax over rows of `cols` (see src/kernels/fused_softmax.ts): row r's fill starts at
 * `fillRows[r]` in `fill`, `cols` values when `perElement`, else one. Requires
 * {@link wasmKernelsLoaded}.
 */
export function maskedSoftmax(
  logits: ArrayLike<number>,
  fill: ArrayLike<number>,
  fillRows: Int32Array,
  perElement: boolean,
  cols: number,
): Float32Array {
  const x = loaded();
  const [xo, fo, ro, out] = place(x, 0, [logits, fill, fillRows], logits.length);
  x.maskedSoftmax(fillRows.length, cols, xo, fo, ro, Number(perElement), out);
  return new Float32Array(x.memory.buffer, out, logits.length).slice();
}

/** The gradient of {@link maskedSoftmax} given its output `y` and the output's gradient `dy`. */
export function maskedSoftmaxGrad(
  dy: ArrayLike<number>,
  y: ArrayLike<number>,
  fill: ArrayLike<number>,
  fillRows: Int32Array,
  perElement: boolean,
  cols: number,
): Float32Array {
  const x = loaded();
  const [go, yo, fo, ro, out] = place(x, 0, [dy, y, fill, fillRows], y.length);
  x.maskedSoftmaxGrad(fillRows.length, cols, go, yo, fo, ro, Number(perElement), out);
  return new Float32Array(x.memory.buffer, out, y.length).slice();
}

/**
 * `op(a) · op(b)` for `batch` contiguous row-major slices: a is [m, k] ([k, m] when transA), b
 * is [k, n] ([n, k] when transB); returns the [batch, m, n] product. Requires
 * {@link wasmKernelsLoaded}.
 */
export function sgemm(
  a: ArrayLike<number>,
  b: ArrayLike<number>,
  batch: number,
  m: number,
  n: number,
  k: number,
  transA: boolean,
  transB: boolean,
): Float32Array {
  const x = loaded();
  const work = align(x.heapBase());
  // slices in groups of at most SLICE_GROUP_FLOATS (or one slice), so the module's memory (which
  // never shrinks) holds a group, not the whole batch
  const per = m * k + k * n + m * n;
  const group = Math.max(1, Math.min(batch, Math.floor(SLICE_GROUP_FLOATS / Math.max(per, 1))));
  const out = new Float32Array(batch * m * n);
  for (let s = 0; s < batch; s += group) {
    const g = Math.min(group, batch - s);
    const [aOff, bOff, cOff] = place(
      x,
      x.sgemmWorkBytes(),
      [part(a, s * m * k, g * m * k), part(b, s * k * n, g * k * n)],
      g * m * n,
    );
    x.sgemm(g, m, n, k, aOff, Number(transA), bOff, Number(transB), cOff, work);
    out.set(new Float32Array(x.memory.buffer, cOff, g * m * n), s * m * n);
  }
  return out;
}

/** Floats of one group of sgemm slices in the module's memory (16 MiB). */
const SLICE_GROUP_FLOATS = 2 ** 22;

/** `length` values of `a` from `start`: a view of a typed array, else a copy. */
function part(a: ArrayLike<number>, start: number, length: number): ArrayLike<number> {
  if (start === 0 && length === a.length) return a;
  if (ArrayBuffer.isView(a)) return (a as Float32Array).subarray(start, start + length);
  return Array.prototype.slice.call(a, start, start + length) as number[];
}
