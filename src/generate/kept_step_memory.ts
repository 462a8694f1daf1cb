/**
 * The compiled step's memory kept with its model between `generate` calls: the weights copied in
 * (tfjs' cpu and tensorflow backends; each copy then becomes its tensor's values, so that the
 * weights are held once: weight_aliases.ts) and the int8 weights packed (every backend) once, not
 * at every call (a first token at GPT-2 small's shape on cpu spent most of its time copying).
 * A weight whose tensor's data changed since (`setWeights`, an optimizer's update, `assign`) is
 * copied or packed again at its next use (step_memory.ts checks each against its tensor's data).
 * Freed by `model.dispose()` and by {@link releaseGenerateMemory}; dropped for a new one when the
 * model's program or the backend changed. A call made while another call on the same model is
 * still running gets a memory of its own, freed when it ends.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {takeArena} from '../kernels/weight_arena';
import {onModelDispose} from '../layers/engine/model_dispose';
import {StepMemory, stepMemory} from './step_memory';

/** A memory kept with a model. */
interface Kept {
  memory: StepMemory;
  /** The backend and the program it was made for. */
  backend: tf.KernelBackend;
  program: object;
  /** A run is using it. */
  busy: boolean;
  /** Released while busy: freed when the run ends (`withModel`: by the model's dispose). */
  released: boolean;
  withModel: boolean;
  /** Takes the dispose hook back. */
  unhook: () => void;
}

const kept = new WeakMap<LayersModel, Kept>();

/** A step memory for one run, and what ends the run (`done`). */
export type RunMemory =
  {memory: StepMemory; done: () => void; reason: null} | {memory: null; done: null; reason: string};

/**
 * Frees `k`; `withModel`: the model is being disposed, its weights with it, so the tensors that
 * read their values from the memory (weight_aliases.ts) are not given copies first.
 */
function free(model: LayersModel, k: Kept, withModel = false): void {
  k.unhook();
  k.memory.dispose(withModel);
  if (kept.get(model) === k) kept.delete(model);
}

/** Whether `k` was made for `program` on the backend in use. */
const madeFor = (k: Kept, program: object) => k.backend === tf.backend() && k.program === program;

/** Whether `model` keeps a memory made for `program` on the backend in use (its int8 weights packed). */
export function keepsMemory(model: LayersModel, program: object): boolean {
  const k = kept.get(model);
  return k != null && madeFor(k, program);
}

/**
 * The memory of a run of `program` on `model`: the one kept with the model when it was made for
 * the same program on the same backend and no run is using it, else a new one (kept unless
 * another run holds the kept one). `done` ends the run: its buffers freed, the weights kept.
 */
export function runMemory(model: LayersModel, program: object): RunMemory {
  const backend = tf.backend();
  let k = kept.get(model);
  if (k != null && !k.busy && !madeFor(k, program)) {
    free(model, k);
    k = undefined;
  }
  if (k != null && k.busy) {
    // another call on this model is running: a memory of its own for this one
    const found = stepMemory();
    if (found.memory == null) return {memory: null, done: null, reason: found.reason};
    const own = found.memory;
    own.beginRun();
    return {memory: own, done: () => own.dispose(), reason: null};
  }
  if (k == null) {
    // kept: on the memory the model's weights were loaded into, if any (read where they are),
    // and the weights it copies in become their tensors' values (held once)
    const found = stepMemory(true, takeArena(model));
    if (found.memory == null) return {memory: null, done: null, reason: found.reason};
    const made: Kept = {
      memory: found.memory,
      backend,
      program,
      busy: false,
      released: false,
      withModel: false,
      unhook: () => undefined,
    };
    made.unhook = onModelDispose(model, () => releaseKept(model, made, true));
    kept.set(model, made);
    k = made;
  }
  const run = k;
  run.busy = true;
  run.memory.beginRun();
  return {
    memory: run.memory,
    done: () => {
      run.memory.endRun();
      run.busy = false;
      if (run.released) free(model, run, run.withModel);
    },
    reason: null,
  };
}

function releaseKept(model: LayersModel, k: Kept, withModel = false): void {
  if (k.busy) {
    k.released = true;
    k.withModel ||= withModel;
  } else free(model, k, withModel);
}

/**
 * Frees the memory `generate` keeps with `model` between calls (on tfjs' cpu and tensorflow
 * backends a copy of its weights; on every backend its int8 weights packed as int8); the next
 * `generate` call makes it again. `model.dispose()` frees it too. A call still running keeps it
 * until it ends. Nothing happens when there is none.
 *
 * ```js
 * await generate(model, prompts, {maxLength: 32}); // copies the weights once, keeps them
 * releaseGenerateMemory(model);                     // gives that memory back now
 * ```
 */
export function releaseGenerateMemory(model: LayersModel): void {
  const k = kept.get(model);
  if (k != null) releaseKept(model, k);
}
