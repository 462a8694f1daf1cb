/**
 * The compiled decoding step: a cached-decoding plan compiled into one program of kernel ops
 * (step_compile.ts), run on flat buffers allocated once per `generate` call in one WebAssembly
 * memory (step_memory.ts): the activations of batch x the longest chunk, each attention's keys
 * and values `[B, maxLength, kvHeads * headDim]`, the ids, the key mask `[B, maxLength]` bytes and
 * the attention's scratch; the weights copied in (cpu, tensorflow) and the int8 weights of int8
 * layers packed as int8 stay with the model between calls (kept_step_memory.ts). A
 * step writes the new ids, runs the ops and reads the logits of each row's last position as
 * Float32Array rows: no tfjs tensor, no tfjs kernel.
 *
 * Positions: the first step runs the shortest prompt's positions in one call (the time to first
 * token: one batched pass of the prompt rows, the logits of its last rows only), then one position
 * per step. A step that must catch up more positions than the buffers hold runs them in chunks of
 * the shortest prompt's length, all but the last through the ops up to the last attention's only
 * (their logits are not read).
 */
import * as tf from '@tensorflow/tfjs-core';

import {COMPILED_STEP} from '../kernels/flags';
import type {StepKernels} from '../kernels/step_kernels_api';
import {notCompiled} from './step_report';
import type {CompiledRunReport, StepReport} from './step_report';
import type {DecodeStep} from './decode_loop';
import type {StepPlan} from './graph_plan';
import {CompileResult, compileStep, StepProgram} from './step_compile';
import {DENSE_ROWS_FROM, OpContext, runOp} from './step_ops';
import {chooseStepKernels} from './step_kernels_choice';
import {backendRowsFrom} from './backend_products';
import {stepRulesVersion} from './step_rules';
import {programBuffers} from './step_buffers';
import {StepMemory, stepMemory} from './step_memory';
import {keepsMemory, runMemory, RunMemory} from './kept_step_memory';
import {stepFitReason} from './step_fit';
import type {LayersModel} from '@tensorflow/tfjs-layers';

export {DENSE_ROWS_FROM} from './step_ops';
export type {CompiledRunReport, StepReport} from './step_report';

/** A compiled step, or the reason there is none; with the report `generate` hands `onCompile`. */
export type CompiledStepResult =
  | {step: DecodeStep; reason: null; report: StepReport}
  | {step: null; reason: string; report: StepReport};

/** Why a model whose mask of the id 0 reaches attention through tfjs layers does not compile. */
export const ZERO_MASK_THROUGH_TFJS = 'the mask of the id 0 reaches attention through tfjs layers';

/**
 * The compiled step of `plan` for these prompts, or the reason there is none. With `model` (the
 * plan's), its memory (weights copied in, int8 weights packed) is kept with the model for the
 * next call (kept_step_memory.ts); without, it is freed when the step is disposed.
 */
export function compiledStep(
  plan: StepPlan,
  ids: readonly (readonly number[])[],
  lengths: readonly number[],
  maxLength: number,
  model?: LayersModel,
): CompiledStepResult {
  const reuse = {reused: false};
  const made = compile(plan, ids, lengths, maxLength, reuse, model);
  if (made.step == null) {
    return {step: null, reason: made.reason, report: notCompiled(made.reason, reuse.reused)};
  }
  const report = {compiled: true, reason: null, programReused: reuse.reused, run: made.step.report};
  return {step: made.step, reason: null, report};
}

function compile(
  plan: StepPlan,
  ids: readonly (readonly number[])[],
  lengths: readonly number[],
  maxLength: number,
  reuse: {reused: boolean},
  model?: LayersModel,
): {step: CompiledRunner; reason: null} | {step: null; reason: string} {
  if (!tf.env().getBool(COMPILED_STEP)) {
    return {step: null, reason: `${COMPILED_STEP} is off`};
  }
  if (plan.masksZeroIds && !plan.zeroKeysExact) {
    return {step: null, reason: ZERO_MASK_THROUGH_TFJS};
  }
  if (plan.masksZeroIds) {
    const b = ids.findIndex((r) => r[0] === 0);
    if (b >= 0) {
      return {
        step: null,
        reason:
          `row ${b} starts with the id 0, which the model masks: its first queries would see no ` +
          'key, which the compiled attention does not compute (Keras averages over every key)',
      };
    }
  }
  const compiled = compileOnce(plan, reuse);
  if (compiled.program == null) return {step: null, reason: compiled.reason};
  const packed = model != null && keepsMemory(model, compiled.program);
  const tooBig = stepFitReason(compiled.program, lengths.length, maxLength, packed);
  if (tooBig != null) return {step: null, reason: tooBig};
  const found = model == null ? ownRunMemory() : runMemory(model, compiled.program);
  if (found.memory == null) return {step: null, reason: found.reason};
  const {memory, done} = found;
  try {
    return {
      step: new CompiledRunner(compiled.program, memory, lengths, maxLength, done),
      reason: null,
    };
  } catch (e) {
    done();
    throw e;
  }
}

/** A memory for one run, freed when it ends. */
function ownRunMemory(): RunMemory {
  const found = stepMemory();
  if (found.memory == null) return {memory: null, done: null, reason: found.reason};
  const memory = found.memory;
  memory.beginRun();
  return {memory, done: () => memory.dispose(), reason: null};
}

/**
 * Programs compiled before, by the model output they compute: `generate` plans a model again at
 * each call, and compiling its plan takes a few tenths of a millisecond of the time to the first
 * token (the layers' rules read their configs), so a program is kept for the next call while
 * what it was compiled from is unchanged (see {@link programKey}).
 */
const programs = new WeakMap<object, {key: unknown[]; result: CompileResult}>();

/**
 * What a program depends on, compared by identity: the plan's nodes (their calls, kinds and row
 * layout) and flags, the rules registered so far (a rule registered since may compile a node that
 * declined), and each planned layer's weight variables (setWeights writes into the same
 * variables, which the program reads at run time; a layer given other variables compiles again).
 */
function programKey(plan: StepPlan): unknown[] {
  const key: unknown[] = [
    plan.input,
    plan.padding,
    plan.masksZeroIds,
    plan.zeroKeysExact,
    plan.zeroQueries,
    stepRulesVersion(),
  ];
  for (const p of plan.nodes) {
    key.push(p.node, p.kind, p.flattenRows === true);
    const {weights} = p.layer as unknown as {weights?: Array<{read(): tf.Tensor}>};
    key.push(weights?.length ?? -1);
    for (const w of weights ?? []) key.push(w.read());
  }
  return key;
}

/** `compileStep(plan)`, or the program compiled for the same key before (`reuse.reused`). */
function compileOnce(plan: StepPlan, reuse: {reused: boolean}): CompileResult {
  const key = programKey(plan);
  const known = programs.get(plan.output);
  const disposed = (ts: tf.Tensor[]) => ts.some((t) => t.isDisposed);
  if (
    known != null &&
    known.key.length === key.length &&
    known.key.every((v, i) => v === key[i]) &&
    !(known.result.program != null && disposed(known.result.program.weights)) &&
    !(known.result.program != null && disposed(known.result.program.packed.map((p) => p.tensor)))
  ) {
    reuse.reused = true;
    return known.result;
  }
  const result = compileStep(plan);
  programs.set(plan.output, {key, result});
  return result;
}

/** Runs a program on its buffers. */
class CompiledRunner implements DecodeStep, OpContext {
  readonly kernels: StepKernels;
  readonly B: number;
  private readonly chunk: number;
  private readonly offsets: number[];
  private readonly weights: number[];
  private readonly packedAt: number[];
  private readonly constants: number[];
  private readonly caches: Array<[number, number]>;
  readonly keyMask: number;
  readonly work: number;
  readonly rowsWork: number;
  readonly backendRowsFrom: number;
  /** Its counters (the report's `run`). */
  readonly report: CompiledRunReport;
  /** Positions written so far (the next run starts there). */
  private position = 0;
  /** The first position of the run in progress (OpContext). */
  start = 0;
  /** Its positions per batch row (OpContext). */
  t = 1;

  constructor(
    private readonly program: StepProgram,
    private readonly memory: StepMemory,
    lengths: readonly number[],
    readonly maxLength: number,
    private readonly done: () => void,
  ) {
    const B = lengths.length;
    this.B = B;
    this.chunk = Math.max(1, Math.min(...lengths));
    this.kernels = chooseStepKernels(memory.memory);
    this.backendRowsFrom = backendRowsFrom(memory.kind);
    // the weights first: kept in the memory from call to call, below the run's buffers
    this.weights = program.weights.map((t) => memory.weight(t));
    this.packedAt = program.packed.map((p) =>
      // int4 bytes (two values each, any byte) skip the relaxed products' int8 range check
      memory.int8Weight(p.tensor, this.kernels, p.transposeRows, p.heads, p.int4 !== true),
    );
    // the values share one block where their lives do not overlap (step_buffers.ts)
    const plan = programBuffers(program, B * this.chunk, B);
    const block = memory.alloc(plan.bytes);
    this.offsets = plan.offsets.map((at) => block + at);
    this.constants = program.constants.map((values) => {
      const at = memory.alloc(values.length * 4);
      new Float32Array(memory.memory.buffer, at, values.length).set(values);
      return at;
    });
    const cacheBytes = (width: number) => B * maxLength * width * 4;
    this.caches = program.caches.map((w) => [
      memory.alloc(cacheBytes(w)),
      memory.alloc(cacheBytes(w)),
    ]);
    this.keyMask = program.usesKeyMask ? memory.alloc(B * maxLength) : 0;
    this.work = memory.alloc(maxLength * 4);
    // the products of a prefill's rows: one scratch for every call, allocated once here
    this.rowsWork =
      B * this.chunk >= DENSE_ROWS_FROM ? memory.alloc(this.kernels.denseRowsWorkBytes) : 0;
    this.report = {
      kernels: this.kernels.kind,
      memory: memory.kind,
      runs: 0,
      ops: program.ops.length,
      weightOffsets: this.weights,
      weightIds: program.weights.map((t) => t.id),
      packedOffsets: this.packedAt,
      packedIds: program.packed.map((p) => p.tensor.id),
      counts: memory.counts,
    };
  }

  next(ids: number[][], index: number, active: readonly boolean[]): Float32Array[] {
    void active; // every row runs, so that the caches hold every position
    const previous = index - 1;
    // positions up to `previous` in chunks; the chunk that ends there runs the whole program (its
    // last rows give the logits), the others the ops up to the last attention's
    while (this.position + this.chunk <= previous) {
      this.run(ids, this.position, this.chunk, false);
    }
    const t = previous + 1 - this.position;
    // a position already written is an error (run's message says which were expected)
    this.run(ids, t < 1 ? previous : this.position, Math.max(1, t), true);
    const V = this.program.values[this.program.logits].width;
    const at = this.offsets[this.program.logits];
    const logits = new Float32Array(this.memory.memory.buffer, at, this.B * V);
    return ids.map((_, b) => logits.slice(b * V, (b + 1) * V));
  }

  /** Runs positions `start .. start + t - 1` (the ops up to the last attention's, unless `full`). */
  private run(ids: number[][], start: number, t: number, full: boolean): void {
    if (start !== this.position || start + t > this.maxLength) {
      throw new Error(
        `generate: the compiled step expected position ${this.position} (of at most ` +
          `${this.maxLength}), received positions ${start} to ${start + t - 1}`,
      );
    }
    const {B} = this;
    const buffer = this.memory.memory.buffer;
    const idsAt = this.offsets[this.program.ids];
    const idView = new Int32Array(buffer, idsAt, B * t);
    const mask =
      this.keyMask === 0 ? null : new Uint8Array(buffer, this.keyMask, B * this.maxLength);
    for (let b = 0; b < B; b++) {
      for (let i = 0; i < t; i++) {
        const id = ids[b][start + i];
        idView[b * t + i] = id;
        if (mask != null) mask[b * this.maxLength + start + i] = id === 0 ? 0 : 1;
      }
    }
    const end = full ? this.program.ops.length : this.program.cachedOps;
    this.start = start;
    this.t = t;
    for (let i = 0; i < end; i++) runOp(this.program.ops[i], this);
    this.position = start + t;
    this.report.runs++;
  }

  at(value: number): number {
    return this.offsets[value];
  }

  w(weight: number): number {
    return weight < 0 ? 0 : this.weights[weight];
  }

  tensor(weight: number): tf.Tensor | null {
    return weight < 0 ? null : this.program.weights[weight];
  }

  packed(index: number): number {
    return this.packedAt[index];
  }

  constant(index: number): number {
    return this.constants[index];
  }

  rowsOf(value: number): number {
    return this.program.values[value].rows === 'all' ? this.B * this.t : this.B;
  }

  isLast(value: number): boolean {
    return this.program.values[value].rows === 'last';
  }

  f32(): Float32Array {
    return new Float32Array(this.memory.memory.buffer);
  }

  cache(index: number): readonly [number, number] {
    return this.caches[index];
  }

  dispose(): void {
    this.done();
  }
}
