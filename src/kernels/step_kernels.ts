/**
 * The WebAssembly SIMD implementation of {@link StepKernels} (wasm/step_kernels.ts, compiled by
 * scripts/build_wasm.mjs and embedded as base64 in ./step_kernels_binary). Like the layers'
 * module (./wasm_kernels) it imports its memory and has no data, start function or allocator,
 * so one compiled module runs on any memory: tfjs-wasm's heap, where the weights already are
 * (`stepKernelsOn(memory)` with the heap of `wasmHeap`'s backend), or a memory of the caller's
 * own (`new WebAssembly.Memory(...)`, arrays placed from {@link stepKernelsHeapBase} on) on tfjs'
 * cpu backend and tfjs-node.
 *
 * The module is larger than 4 KB, so it is compiled asynchronously (Chromium refuses synchronous
 * compiles above 4 KB on the main thread), once, on the first {@link stepKernelsReady}. Loading
 * never throws and never leaves a rejected promise: where WebAssembly or its SIMD instructions are
 * missing, or the compile fails, it resolves to false and {@link stepKernelsFailure} says why.
 * TFJS_ATTENTION_SIMD (src/kernels/flags.ts) off makes it as if the module had not loaded. The
 * loading is ./wasm_module's, shared with the layers' module.
 *
 * Where the engine validates relaxed SIMD (./relaxed_simd), a second, small module is loaded
 * beside it: the same int8 products (`denseInt8`, `denseTInt8`) built with relaxed SIMD
 * (wasm/step_int8_relaxed.ts, ./step_int8_relaxed_binary), their int32 sums equal to the plain
 * module's exactly. Instantiated on the same memory, it supplies those two kernels where
 * TFJS_ATTENTION_RELAXED_SIMD allows it (`kind` 'simd-relaxed'); elsewhere, or where it failed to
 * load, the plain module's run, silently.
 */
import {relaxedSimdAllowed, simdAllowed} from './flags';
import {relaxedSimdSupported} from './relaxed_simd';
import {STEP_INT8_RELAXED_WASM_BASE64} from './step_int8_relaxed_binary';
import {STEP_KERNELS_WASM_BASE64} from './step_kernels_binary';
import type {StepActivation, StepKernels} from './step_kernels_api';
import {wasmModule, type WasmModule} from './wasm_module';

/**
 * The module's exports: the kernels of {@link StepKernels} with the same arguments, the optional
 * ones required (a missing argument would reach the module as NaN).
 */
interface Exports {
  heapBase(): number;
  layerNorm(...args: Parameters<StepKernels['layerNorm']>): void;
  rmsNorm(...args: Required<Parameters<StepKernels['rmsNorm']>>): void;
  rope(...args: Parameters<StepKernels['rope']>): void;
  scale(...args: Parameters<StepKernels['scale']>): void;
  dense(...args: Parameters<StepKernels['dense']>): void;
  denseRows(...args: Parameters<StepKernels['denseRows']>): void;
  denseRowsWorkBytes(): number;
  denseT(...args: Parameters<StepKernels['denseT']>): void;
  quantizeRows(...args: Parameters<StepKernels['quantizeRows']>): void;
  denseInt8(...args: Parameters<StepKernels['denseInt8']>): void;
  denseTInt8(...args: Parameters<StepKernels['denseTInt8']>): void;
  denseInt8KN(...args: Parameters<StepKernels['denseInt8KN']>): void;
  denseInt4KN(...args: Parameters<StepKernels['denseInt4KN']>): void;
  denseTInt4(...args: Parameters<StepKernels['denseTInt4']>): void;
  add(...args: Parameters<StepKernels['add']>): void;
  mul(...args: Parameters<StepKernels['mul']>): void;
  activate(n: number, x: number, act: StepActivation, out: number): void;
  gather(...args: Parameters<StepKernels['gather']>): void;
  gatherInt8(...args: Parameters<StepKernels['gatherInt8']>): void;
  gatherInt4(...args: Parameters<StepKernels['gatherInt4']>): void;
  transposeInt8(...args: Parameters<StepKernels['transposeInt8']>): void;
  addPositions(...args: Parameters<StepKernels['addPositions']>): void;
  writeCache(...args: Parameters<StepKernels['writeCache']>): void;
  attend(...args: Required<Parameters<StepKernels['attend']>>): void;
  argmax(...args: Parameters<StepKernels['argmax']>): void;
}

/** The relaxed SIMD module's exports: the int8 products, as the step module's. */
type RelaxedExports = Pick<Exports, 'denseInt8' | 'denseTInt8'>;

// larger than 4 KB: compiled asynchronously, on the first stepKernelsReady(); the loader is made
// on first use too, so a bundle that never asks for the step's kernels leaves the module out
let step: WasmModule<Exports> | null = null;
function stepModule(): WasmModule<Exports> {
  step ??= wasmModule<Exports>({
    base64: STEP_KERNELS_WASM_BASE64,
    name: "the decoding step's module",
    sync: false,
  });
  return step;
}

// made (and compiled) once the engine validates relaxed SIMD; asked again at each
// stepKernelsReady() until then (an engine flag may turn it on later in a process: Node 20's
// --experimental-wasm-relaxed-simd through v8.setFlagsFromString)
let relaxed: WasmModule<RelaxedExports> | null = null;
function relaxedModule(): WasmModule<RelaxedExports> | null {
  if (relaxed == null && relaxedSimdSupported()) {
    relaxed = wasmModule<RelaxedExports>({
      base64: STEP_INT8_RELAXED_WASM_BASE64,
      name: "the decoding step's relaxed SIMD module",
      sync: false,
    });
  }
  return relaxed;
}

/** The relaxed SIMD int8 products on `memory` where loaded and allowed, else null. */
function relaxedOn(memory: WebAssembly.Memory): RelaxedExports | null {
  const m = relaxed;
  if (m == null || !m.loaded()) return null;
  try {
    if (!relaxedSimdAllowed()) return null;
  } catch {
    return null; // tfjs' flags unreadable: the plain products
  }
  return m.on(memory);
}

/**
 * Compiles the decoding step's SIMD module (once; later calls share the result), and its relaxed
 * SIMD int8 products where the engine has relaxed SIMD, and resolves to whether the step module is
 * usable: false where WebAssembly SIMD is missing, the compile failed ({@link stepKernelsFailure}
 * says why) or TFJS_ATTENTION_SIMD is off. Never rejects; the relaxed module failing to load only
 * leaves the plain products in place.
 */
export function stepKernelsReady(): Promise<boolean> {
  return Promise.all([stepModule().ready(), relaxedModule()?.ready()]).then(([ok]) => {
    try {
      return ok && simdAllowed();
    } catch {
      return false; // tfjs' flags unreadable: as if the module had not loaded
    }
  });
}

/** Why the decoding step's module is not usable, or null when it loaded or has not been asked for. */
export function stepKernelsFailure(): string | null {
  if (stepModule().loaded() && !simdAllowed()) return 'TFJS_ATTENTION_SIMD is off';
  return stepModule().failure();
}

/**
 * The first byte offset a caller may use on a memory of its own (the module keeps no data, so
 * this is its stack-free heap base, 16-aligned); 0 before {@link stepKernelsReady} resolved true.
 */
export function stepKernelsHeapBase(): number {
  return stepModule().own()?.heapBase() ?? 0;
}

/**
 * A memory of the caller's own for the kernels, with at least `bytes` usable bytes from
 * {@link stepKernelsHeapBase} on (tfjs' cpu backend and tfjs-node, where there is no wasm heap).
 * It grows with `memory.grow`; the kernels see the grown memory.
 */
export function stepKernelsMemory(bytes: number): WebAssembly.Memory {
  const pages = Math.max(1, Math.ceil((stepKernelsHeapBase() + Math.max(0, bytes)) / 65536));
  return new WebAssembly.Memory({initial: pages});
}

/**
 * The SIMD kernels on `memory` (tfjs-wasm's heap or a memory of the caller's own): every offset
 * given to them is a byte offset in `memory`. Null when the module has not loaded (await
 * {@link stepKernelsReady} first), TFJS_ATTENTION_SIMD is off, or the memory cannot be imported
 * (a shared memory, as tfjs-wasm's threaded build has). The int8 products are the relaxed SIMD
 * module's (`kind` 'simd-relaxed') where it loaded and TFJS_ATTENTION_RELAXED_SIMD is on.
 */
export function stepKernelsOn(memory: WebAssembly.Memory): StepKernels | null {
  const x = stepModule().on(memory);
  if (x == null) return null;
  const int8 = relaxedOn(memory);
  return {
    memory,
    kind: int8 == null ? 'simd' : 'simd-relaxed',
    layerNorm: x.layerNorm,
    // the optional arguments given (a missing one would reach the module as NaN)
    rmsNorm: (rows, dim, at, gamma, epsilon, out, offset = 0) =>
      x.rmsNorm(rows, dim, at, gamma, epsilon, out, offset),
    rope: x.rope,
    scale: x.scale,
    dense: x.dense,
    denseRows: x.denseRows,
    denseRowsWorkBytes: x.denseRowsWorkBytes(),
    denseT: x.denseT,
    quantizeRows: x.quantizeRows,
    denseInt8: (int8 ?? x).denseInt8,
    denseTInt8: (int8 ?? x).denseTInt8,
    // the step module's on either: its plain SIMD sums are the kernel layout's fastest
    denseInt8KN: x.denseInt8KN,
    denseInt4KN: x.denseInt4KN,
    denseTInt4: x.denseTInt4,
    add: x.add,
    mul: x.mul,
    activate: x.activate,
    gather: x.gather,
    gatherInt8: x.gatherInt8,
    gatherInt4: x.gatherInt4,
    transposeInt8: x.transposeInt8,
    addPositions: x.addPositions,
    writeCache: x.writeCache,
    attend: (
      B,
      t,
      heads,
      kvHeads,
      headDim,
      maxLength,
      start,
      q,
      k,
      v,
      mask,
      sc,
      work,
      out,
      window = 0,
      softCap = 0,
    ) =>
      x.attend(
        B,
        t,
        heads,
        kvHeads,
        headDim,
        maxLength,
        start,
        q,
        k,
        v,
        mask,
        sc,
        work,
        out,
        window,
        softCap,
      ),
    argmax: x.argmax,
  };
}
