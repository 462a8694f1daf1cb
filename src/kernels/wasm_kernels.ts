/**
 * The package's WebAssembly SIMD kernels (wasm/kernels.ts, compiled by scripts/build_wasm.mjs
 * and embedded as base64 in ./wasm_binary), with their own memory: a call copies its inputs in,
 * runs, and copies the result out.
 *
 * Loading: the module (under 4 KB) is compiled synchronously at import, which Node and browsers
 * allow for small modules (Chromium refuses synchronous compiles above 4 KB on the main thread).
 * Where a synchronous compile is refused anyway, it is compiled asynchronously and callers use
 * tfjs' kernels until it is ready ({@link wasmKernelsReady}); where WebAssembly or its SIMD
 * instructions are missing, they always do.
 */
import {KERNELS_WASM_BASE64} from './wasm_binary';

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
}

let exportsOf: Exports | null = null;
let readyPromise: Promise<boolean> = Promise.resolve(false);

function decode(base64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(base64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

function instantiate(module: WebAssembly.Module): void {
  exportsOf = new WebAssembly.Instance(module, {}).exports as unknown as Exports;
}

function load(): void {
  if (typeof WebAssembly !== 'object' || typeof atob !== 'function') return;
  const bytes = decode(KERNELS_WASM_BASE64);
  if (!WebAssembly.validate(bytes)) return; // no SIMD here
  try {
    instantiate(new WebAssembly.Module(bytes));
    readyPromise = Promise.resolve(true);
  } catch {
    // a synchronous compile refused (e.g. a browser's main-thread limit): compile asynchronously
    readyPromise = WebAssembly.compile(bytes).then(
      (m) => (instantiate(m), true),
      () => false,
    );
  }
}

load();

/** Resolves to whether the SIMD kernels are usable (they are from import on, almost everywhere). */
export function wasmKernelsReady(): Promise<boolean> {
  return readyPromise;
}

/** Whether the SIMD kernels are usable now. */
export function wasmKernelsLoaded(): boolean {
  return exportsOf != null;
}

const align = (n: number) => (n + 15) & ~15;

/** Grows the module's memory to at least `bytes`. */
function reserve(k: Exports, bytes: number): void {
  const have = k.memory.buffer.byteLength;
  if (bytes > have) k.memory.grow(Math.ceil((bytes - have) / 65536));
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
  const x = exportsOf;
  if (x == null) throw new Error('tfjs-attention: the WebAssembly kernels are not loaded');
  const work = align(x.heapBase());
  const aOff = align(work + x.sgemmWorkBytes());
  const bOff = align(aOff + 4 * batch * m * k);
  const cOff = align(bOff + 4 * batch * k * n);
  const end = cOff + 4 * batch * m * n;
  reserve(x, end);
  const buf = x.memory.buffer;
  new Float32Array(buf, aOff, batch * m * k).set(a);
  new Float32Array(buf, bOff, batch * k * n).set(b);
  x.sgemm(batch, m, n, k, aOff, Number(transA), bOff, Number(transB), cOff, work);
  return new Float32Array(x.memory.buffer, cOff, batch * m * n).slice();
}
