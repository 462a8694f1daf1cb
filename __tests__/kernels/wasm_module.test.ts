/**
 * The one loader of the package's WebAssembly modules (src/kernels/wasm_module.ts), on small
 * modules written byte by byte: a module that imports its memory loads (synchronously or not) and
 * runs on any memory; one with a memory, start or data section of its own is refused before it is
 * compiled (as scripts/build_wasm.mjs refuses to build one); TFJS_ATTENTION_SIMD off leaves no
 * instance to call, so callers take their JavaScript paths; loading never rejects.
 */
import * as tf from '@tensorflow/tfjs';

import {SIMD} from '../../src/kernels/flags';
import {ownWriteSections, wasmModule} from '../../src/kernels/wasm_module';
import {STEP_KERNELS_WASM_BASE64} from '../../src/kernels/step_kernels_binary';
import {KERNELS_WASM_BASE64} from '../../src/kernels/wasm_binary';
import {useBackend} from '../helpers/backends';
import {withFlags} from '../helpers/kernels';

const HEADER = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
/** A section: its id, its payload's length, the payload. */
const section = (id: number, payload: number[]) => [id, payload.length, ...payload];
const text = (s: string) => [s.length, ...Array.from(s, (c) => c.charCodeAt(0))];

const TYPE_I32 = section(1, [1, 0x60, 0, 1, 0x7f]); // () -> i32
const TYPE_VOID = section(1, [1, 0x60, 0, 0]); // () -> ()
const IMPORT_MEMORY = section(2, [1, ...text('env'), ...text('memory'), 2, 0, 1]);
const ONE_FUNCTION = section(3, [1, 0]);
const OWN_MEMORY = section(5, [1, 0, 1]);
const EXPORT_BASE = section(7, [1, ...text('base'), 0, 0]);
const START = section(8, [0]);
const CODE_I32 = section(10, [1, 4, 0, 0x41, 16, 0x0b]); // i32.const 16
const CODE_VOID = section(10, [1, 2, 0, 0x0b]);
const DATA = section(11, [1, 0, 0x41, 0, 0x0b, 1, 42]); // one byte at 0

const base64 = (bytes: number[]) => Buffer.from(bytes).toString('base64');
/** `base()` = 16, its memory imported: what the package's modules are. */
const GOOD = [
  ...HEADER,
  ...TYPE_I32,
  ...IMPORT_MEMORY,
  ...ONE_FUNCTION,
  ...EXPORT_BASE,
  ...CODE_I32,
];
const WITH_MEMORY = [
  ...HEADER,
  ...TYPE_I32,
  ...ONE_FUNCTION,
  ...OWN_MEMORY,
  ...EXPORT_BASE,
  ...CODE_I32,
];
const WITH_DATA = [...GOOD, ...DATA];
const WITH_START = [
  ...HEADER,
  ...TYPE_VOID,
  ...IMPORT_MEMORY,
  ...ONE_FUNCTION,
  ...START,
  ...CODE_VOID,
];

interface Base {
  base(): number;
}

describe('the WebAssembly modules loader', () => {
  beforeAll(() => useBackend('cpu'));

  it('the hand-written modules are valid WebAssembly, and the package modules have no section of their own', () => {
    for (const bytes of [GOOD, WITH_MEMORY, WITH_DATA, WITH_START]) {
      expect(WebAssembly.validate(new Uint8Array(bytes))).toBe(true);
    }
    expect(ownWriteSections(new Uint8Array(GOOD))).toEqual([]);
    expect(ownWriteSections(new Uint8Array(WITH_MEMORY))).toEqual(['memory']);
    expect(ownWriteSections(new Uint8Array(WITH_DATA))).toEqual(['data']);
    expect(ownWriteSections(new Uint8Array(WITH_START))).toEqual(['start']);
    for (const b64 of [KERNELS_WASM_BASE64, STEP_KERNELS_WASM_BASE64]) {
      expect(ownWriteSections(Buffer.from(b64, 'base64'))).toEqual([]);
    }
  });

  it('a module that imports its memory loads synchronously, on a memory of its own and on any other', async () => {
    const mod = wasmModule<Base>({base64: base64(GOOD), name: 'the test module', sync: true});
    expect(mod.loaded()).toBe(false); // nothing compiled before the first ready()
    const ready = mod.ready();
    expect(mod.loaded()).toBe(true); // synchronously
    expect(mod.ready()).toBe(ready); // once
    await expect(ready).resolves.toBe(true);
    expect(mod.usable()).toBe(true);
    expect(mod.failure()).toBeNull();
    expect(mod.own()?.base()).toBe(16);
    expect(mod.on(new WebAssembly.Memory({initial: 2}))?.base()).toBe(16);
    // a shared memory cannot be imported (the module's memory is not shared): null, no throw
    expect(mod.on(new WebAssembly.Memory({initial: 1, maximum: 2, shared: true}))).toBeNull();
  });

  it('compiles asynchronously when not sync: not loaded until ready() resolves', async () => {
    const mod = wasmModule<Base>({base64: base64(GOOD), name: 'the test module', sync: false});
    const ready = mod.ready();
    expect(mod.loaded()).toBe(false);
    await expect(ready).resolves.toBe(true);
    expect(mod.loaded()).toBe(true);
    expect(mod.own()?.base()).toBe(16);
  });

  it('TFJS_ATTENTION_SIMD off: loaded, but not usable and no instance on a memory (callers take their JavaScript paths)', async () => {
    const mod = wasmModule<Base>({base64: base64(GOOD), name: 'the test module', sync: true});
    await expect(mod.ready()).resolves.toBe(true);
    await withFlags({[SIMD]: false}, () => {
      expect(tf.env().getBool(SIMD)).toBe(false);
      expect(mod.loaded()).toBe(true);
      expect(mod.usable()).toBe(false);
      expect(mod.on(new WebAssembly.Memory({initial: 1}))).toBeNull();
    });
    expect(mod.usable()).toBe(true);
    expect(mod.on(new WebAssembly.Memory({initial: 1}))).not.toBeNull();
  });

  it.each([
    ['memory', WITH_MEMORY],
    ['data', WITH_DATA],
    ['start', WITH_START],
  ])(
    'refuses a module with a %s section before compiling it: ready() resolves false and says why',
    async (what, bytes) => {
      for (const sync of [true, false]) {
        const mod = wasmModule<Base>({base64: base64(bytes), name: 'the test module', sync});
        await expect(mod.ready()).resolves.toBe(false);
        expect(mod.loaded()).toBe(false);
        expect(mod.usable()).toBe(false);
        expect(mod.own()).toBeNull();
        expect(mod.on(new WebAssembly.Memory({initial: 1}))).toBeNull();
        expect(mod.failure()).toBe(
          'the test module was refused: expected no memory, start or data section (it must write ' +
            `only where it is told, in an imported memory), received a module with ${what}`,
        );
      }
    },
  );

  it('bytes that are not a module it can run: false and why, never a rejection', async () => {
    const mod = wasmModule<Base>({
      base64: base64([...HEADER, 0x7f]),
      name: 'the test module',
      sync: true,
    });
    await expect(mod.ready()).resolves.toBe(false);
    expect(mod.failure()).toBe('WebAssembly SIMD is not supported here');
    const failing = wasmModule<Base>({base64: '%%%', name: 'the test module', sync: true});
    await expect(failing.ready()).resolves.toBe(false);
    expect(failing.failure()).toMatch(
      /^the test module could not be loaded \(InvalidCharacterError/,
    );
  });
});
