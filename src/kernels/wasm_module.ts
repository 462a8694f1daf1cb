/**
 * One loader for the package's WebAssembly SIMD modules (the layers' kernels, ./wasm_kernels, and
 * the decoding step's, ./step_kernels; both built by scripts/build_wasm.mjs and embedded as
 * base64). A module imports its memory (`env.memory`) and has no memory, data or start section of
 * its own, so one compiled module runs on any memory: a memory of its own, tfjs-wasm's heap, or a
 * memory of the caller's. A module with such a section is refused before it is compiled: on
 * tfjs' heap a module must write only where it is told.
 *
 * Loading never throws and never leaves a rejected promise: where WebAssembly or its SIMD
 * instructions are missing, or the module cannot be compiled or instantiated (its memory cannot
 * be reserved, e.g. under `ulimit -v`), it resolves to false and `failure()` says why. A small
 * module (under 4 KB: Chromium refuses synchronous compiles above that on the main thread) may be
 * compiled synchronously (`sync`), asynchronously where that is refused anyway. TFJS_ATTENTION_SIMD
 * (./flags) off makes `on(memory)` null and `usable()` false, as if the module had not loaded.
 */
import {simdAllowed} from './flags';

/** Which module to load, and how. */
export interface WasmModuleSpec {
  /** The module's bytes, base64. */
  base64: string;
  /** The module as failures name it, e.g. "the module", "the decoding step's module". */
  name: string;
  /** Compile synchronously first (a module under 4 KB), asynchronously where that is refused. */
  sync: boolean;
}

/** A module's loading state and its instances. `E`: its exports. */
export interface WasmModule<E> {
  /**
   * Compiles the module and instantiates it on a memory of its own (once: the first call starts
   * it, later calls share it); resolves to whether that worked. Never rejects.
   */
  ready(): Promise<boolean>;
  /** The instance on the module's own memory once loaded (whatever TFJS_ATTENTION_SIMD says), else null. */
  own(): E | null;
  /** Whether the module loaded (whatever TFJS_ATTENTION_SIMD says). */
  loaded(): boolean;
  /** Whether the module loaded and TFJS_ATTENTION_SIMD is on. */
  usable(): boolean;
  /**
   * An instance on `memory` (byte offsets given to it are offsets in `memory`), or null when the
   * module is not usable or the memory cannot be imported (a shared memory, as tfjs-wasm's
   * threaded build has).
   */
  on(memory: WebAssembly.Memory): E | null;
  /** Why the module did not load, or null when it loaded, is loading or has not been asked for. */
  failure(): string | null;
}

/** The section ids a module may not have: memory (5), start (8), data (11). */
const OWN_WRITES: ReadonlyMap<number, string> = new Map([
  [5, 'memory'],
  [8, 'start'],
  [11, 'data'],
]);

/**
 * The names of the sections of a (valid) module that would let it write where it is not told:
 * a memory, a start function or data of its own; empty when it has none.
 */
export function ownWriteSections(bytes: Uint8Array): string[] {
  const found: string[] = [];
  for (let i = 8; i < bytes.length;) {
    const id = bytes[i++];
    let len = 0;
    for (let shift = 0; ; shift += 7) {
      const b = bytes[i++];
      len += (b & 127) * 2 ** shift;
      if (!(b & 128) || i >= bytes.length) break;
    }
    const name = OWN_WRITES.get(id);
    if (name != null) found.push(name);
    i += len;
  }
  return found;
}

function decode(base64: string): Uint8Array<ArrayBuffer> {
  const bin = atob(base64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

function reason(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}

function instanceOn<E>(module: WebAssembly.Module, memory: WebAssembly.Memory): E {
  return new WebAssembly.Instance(module, {env: {memory}}).exports as unknown as E;
}

/** The loader of one module (nothing is compiled before the first `ready()`). */
export function wasmModule<E>(spec: WasmModuleSpec): WasmModule<E> {
  let compiled: WebAssembly.Module | null = null;
  let own: E | null = null;
  let failure: string | null = null;
  let loading: Promise<boolean> | null = null;

  /** The instance on a memory of its own; false, with the reason kept, where that fails. */
  function instantiate(module: WebAssembly.Module): boolean {
    try {
      own = instanceOn<E>(module, new WebAssembly.Memory({initial: 1}));
      compiled = module;
      return true;
    } catch (e) {
      failure = `${spec.name} could not be instantiated (${reason(e)})`;
      return false;
    }
  }

  function compileAsync(bytes: Uint8Array<ArrayBuffer>): Promise<boolean> {
    return WebAssembly.compile(bytes)
      .then(instantiate, (e: unknown) => {
        failure = `${spec.name} could not be compiled (${reason(e)})`;
        return false;
      })
      .catch(() => false);
  }

  function load(): Promise<boolean> {
    try {
      if (typeof WebAssembly !== 'object' || typeof atob !== 'function') {
        failure = 'WebAssembly is not available';
        return Promise.resolve(false);
      }
      const bytes = decode(spec.base64);
      if (!WebAssembly.validate(bytes)) {
        failure = 'WebAssembly SIMD is not supported here';
        return Promise.resolve(false);
      }
      const refused = ownWriteSections(bytes);
      if (refused.length > 0) {
        failure =
          `${spec.name} was refused: expected no memory, start or data section (it must write ` +
          `only where it is told, in an imported memory), received a module with ${refused.join(', ')}`;
        return Promise.resolve(false);
      }
      if (!spec.sync) return compileAsync(bytes);
      let module: WebAssembly.Module;
      try {
        module = new WebAssembly.Module(bytes);
      } catch {
        // a synchronous compile refused (e.g. a browser's main-thread limit): compile asynchronously
        return compileAsync(bytes);
      }
      return Promise.resolve(instantiate(module));
    } catch (e) {
      failure = `${spec.name} could not be loaded (${reason(e)})`;
      return Promise.resolve(false);
    }
  }

  const usable = () => compiled != null && simdAllowed();
  return {
    ready: () => (loading ??= load()),
    own: () => own,
    loaded: () => compiled != null,
    usable,
    on(memory) {
      if (compiled == null || !simdAllowed()) return null;
      try {
        return instanceOn<E>(compiled, memory);
      } catch {
        return null;
      }
    },
    failure: () => failure,
  };
}
