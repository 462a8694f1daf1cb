/**
 * Weights loaded into a WebAssembly memory that the compiled step then runs in
 * (src/kernels/weight_arena.ts): `holdWeight` makes tensors whose values are views of the arena
 * (followed as it grows); which weights an arena takes on each backend; the loader's arena
 * (`loadKerasHubPreset` on cpu, and tfjs-node's int8 bytes) taken by the first `generate` call,
 * whose step then copies none of them in, with the tokens of the eager stepper. References: the
 * bytes each weight was filled with, and the model's own predictions.
 */
import * as path from 'path';

import * as tf from '@tensorflow/tfjs';

import {generate, loadKerasHubPreset, releaseGenerateMemory} from '../../src';
import type {CompiledRunReport, StepReport} from '../../src';
import {
  ARENA_MAX_BYTES,
  arenaTakes,
  currentWeightArena,
  setArenaOf,
  takeArena,
  WeightArena,
  weightArenaFor,
  withWeightArena,
} from '../../src/kernels/weight_arena';
import {heldValues} from '../helpers/backend_values';
import {describeBackends} from '../helpers/backends';
import {lcg} from '../helpers/data';

const FIXTURES = path.join(__dirname, '..', 'fixtures');

const fillWith = (src: Uint8Array) => (out: Uint8Array, at: number) => out.set(src, at);

describeBackends('weight arena', (backend) => {
  it('which weights an arena takes: cpu float32 and int8 bytes, tfjs-node int8 bytes, wasm none', () => {
    const want: Record<string, [boolean, boolean, boolean]> = {
      cpu: [true, true, false],
      tensorflow: [false, true, false],
      wasm: [false, false, false],
    };
    expect([arenaTakes('float32'), arenaTakes('bool'), arenaTakes('int32')]).toEqual(want[backend]);
    const some = [
      {dtype: 'float32' as const, bytes: 400},
      {dtype: 'bool' as const, bytes: 100},
    ];
    expect(weightArenaFor(some) != null).toBe(backend !== 'wasm');
    expect(weightArenaFor([{dtype: 'int32', bytes: 400}])).toBeNull();
    // past what a WebAssembly memory can hold with room for the step's buffers
    expect(weightArenaFor([{dtype: 'bool', bytes: ARENA_MAX_BYTES + 1}])).toBeNull();
  });

  it('withWeightArena sets the current arena while it runs, and restores it, also on a throw', () => {
    const a = new WeightArena();
    const b = new WeightArena();
    expect(currentWeightArena()).toBeNull();
    withWeightArena(a, () => {
      expect(currentWeightArena()).toBe(a);
      expect(() =>
        withWeightArena(b, () => {
          expect(currentWeightArena()).toBe(b);
          throw new Error('stop');
        }),
      ).toThrow('stop');
      expect(currentWeightArena()).toBe(a);
    });
    expect(currentWeightArena()).toBeNull();
  });

  if (backend === 'wasm') return; // weights live in tfjs-wasm's heap, read in place there

  it('holdWeight: tensors whose values are views of the arena, still right after it grew', () => {
    const arena = new WeightArena();
    const floats = lcg(3000, 1);
    const bytes = Uint8Array.from({length: 5001}, (_, i) => (i * 37) % 256);
    const f = arena.holdWeight([30, 100], 'float32', fillWith(new Uint8Array(floats.buffer)));
    const q = arena.holdWeight([5001], 'bool', fillWith(bytes));
    expect(arena.held).toBe(2);
    expect(heldValues(f)?.buffer).toBe(arena.memory.buffer);
    expect(heldValues(q)?.buffer).toBe(arena.memory.buffer);
    expect(heldValues(q)?.byteOffset).toBe(arena.aliases.offsetOf(q));
    expect((heldValues(q)?.byteOffset ?? 0) % 16).toBe(0);
    const grows = arena.grows;
    // 3 MB more: the memory grows, its former buffer detached
    const big = arena.holdWeight([750_000], 'float32', () => undefined);
    expect(arena.grows).toBeGreaterThan(grows);
    expect(Array.from(f.dataSync())).toEqual(Array.from(floats));
    expect(Array.from(heldValues(q) as Uint8Array)).toEqual(Array.from(bytes));
    expect(Array.from(big.dataSync().subarray(0, 3))).toEqual([0, 0, 0]);
    tf.dispose([f, q, big]);
  });

  it("takeArena gives a model's arena once", () => {
    const model = {};
    const arena = new WeightArena();
    arena.holdWeight([4], 'bool', () => undefined).dispose();
    expect(takeArena(model)).toBeNull();
    setArenaOf(model, arena);
    expect(takeArena(model)).toBe(arena);
    expect(takeArena(model)).toBeNull();
  });

  const cases: Array<[string, boolean]> = [
    ['lora/gpt2/preset', false],
    ['int8_files/gpt2_preset', true],
    ['lora/llama3_int8/merged_preset', true],
  ];
  for (const [name, int8] of cases) {
    it(`${name}: loaded into an arena; generate reads it in place, with the eager stepper's tokens`, async () => {
      const preset = await loadKerasHubPreset(path.join(FIXTURES, name));
      const model = preset.model;
      try {
        // the weights the arena takes on this backend are views of one memory
        const taken = model.weights.map((w) => w.read()).filter((t) => arenaTakes(t.dtype));
        expect(taken.some((t) => t.dtype === 'bool')).toBe(int8);
        if (!int8 && backend === 'tensorflow') {
          // tfjs-node: float32 weights stay the backend's own (TensorFlow takes them for the prefill)
          expect(taken).toEqual([]);
          return;
        }
        expect(taken.length).toBeGreaterThan(0);
        const buffers = new Set(taken.map((t) => heldValues(t)?.buffer));
        expect(buffers.size).toBe(1);
        const arena = [...buffers][0];
        expect(arena).toBeDefined();
        const values = taken.map((t) => Array.from(t.dataSync()));
        const prompts = [[1, 5, 9, 3]];
        let report: StepReport | null = null;
        const out = await generate(model, prompts, {
          maxLength: 10,
          onCompile: (r) => {
            report = r;
          },
        });
        const got = await out.array();
        out.dispose();
        const r = report as StepReport | null;
        expect(r?.reason ?? null).toBeNull();
        const run = r?.run as CompiledRunReport;
        // the step copied in only what the arena did not take (tfjs-node: float32 weights)
        const others = new Set(
          model.weights
            .map((w) => w.read())
            .filter((t) => !arenaTakes(t.dtype))
            .map((t) => t.id),
        );
        const read = [...run.weightIds, ...run.packedIds];
        expect(run.counts.uploads).toBe(read.filter((id) => others.has(id)).length);
        expect(read.some((id) => !others.has(id))).toBe(true);
        expect(taken.every((t) => heldValues(t)?.buffer === arena || heldValues(t) == null)).toBe(
          true,
        );
        // the eager stepper (the model's own predictions, no step memory): the same tokens
        const eager = await generate(model, prompts, {maxLength: 10, useCache: false});
        expect(await eager.array()).toEqual(got);
        eager.dispose();
        // released: each weight its own values again, unchanged
        releaseGenerateMemory(model);
        expect(taken.some((t) => heldValues(t)?.buffer === arena)).toBe(false);
        expect(taken.map((t) => Array.from(t.dataSync()))).toEqual(values);
      } finally {
        preset.dispose();
      }
    });
  }
});
