/**
 * Text generation with a causal language model (token ids `[batch, T]` -> logits
 * `[batch, T, vocab]`), token by token, as keras-hub's `generate` does: right-padded prompts,
 * a sampler, an end token, a total length. Functional models whose graph allows it run with a
 * key / value cache (graph_plan.ts, graph_step.ts); others recompute the prefix at each step.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {stepKernelsReady} from '../kernels/step_kernels';
import {mulberry32} from '../ops/random';
import {DecodeStep, decodeLoop} from './decode_loop';
import {
  checkMaxLength,
  checkMemory,
  checkOptionNames,
  checkPromptIds,
  checkSeed,
  checkTokenId,
  GENERATE_OPTIONS,
  promptLengthsOf,
} from './generate_checks';
import {checkModelInputs, modelInputs} from './model_inputs';
import {compiledStep, ZERO_MASK_THROUGH_TFJS} from './compiled_step';
import {notCompiled} from './step_report';
import type {StepReport} from './step_report';
import {planCachedDecoding, PlanResult, StepPlan} from './graph_plan';
import {GraphStepper} from './graph_step';
import {checkSampler, SamplerOptions} from './samplers';

/** Options of {@link generate}. */
export interface GenerateOptions extends SamplerOptions {
  /** Total length of each returned sequence, prompt included. */
  maxLength: number;
  /** Each prompt's length (prompts are right-padded); default: up to the first `padId`. */
  promptLengths?: number[];
  /**
   * Generation of a row stops after this token, or after any of these (keras-hub's
   * `stop_token_ids`); the rest of the row is `padId`.
   */
  endId?: number | readonly number[] | null;
  /** Padding token. Default 0. */
  padId?: number;
  /** Seed of the samplers that draw at random. */
  seed?: number;
  /**
   * Cached decoding: the model's graph is run one token at a time, each causal self-attention
   * with a key / value cache of `maxLength` positions, position layers with `startIndex`
   * (`cachedDecodingRefusal` says whether a model can). `true`: required (a model that cannot
   * is an error naming the layer and the reason); `false`: always recompute the whole prefix at
   * each step; unset (default): the cache when the model allows it, else recomputing (and
   * `onFallback` is told why).
   */
  useCache?: boolean;
  /** Called with the reason when `useCache` is unset and the model runs without a cache. */
  onFallback?: (reason: string) => void;
  /**
   * Called once the call has chosen its step, before the first token: whether the compiled step
   * runs, why not (the layer that declined and why, or why no cache), whether its program was
   * compiled by an earlier call; the compiled run's counters keep counting until the call ends.
   */
  onCompile?: (report: StepReport) => void;
  /**
   * Called after each step that chose tokens, with their position and the token each row chose
   * (null for a row still in its prompt or stopped): progress, timing, streaming.
   */
  onStep?: (position: number, tokens: ReadonlyArray<number | null>) => void;
  /**
   * The most memory, in bytes, a run may need by `generate`'s estimate (logits
   * `[batch, maxLength, vocab]` float32, the key / value caches, the ids), checked before
   * anything is allocated. Default 2 GiB.
   */
  memoryLimit?: number;
}

// GENERATE_OPTIONS (the names generate accepts) lists exactly the keys of GenerateOptions: a
// type error here when an option is added to one and not the other
type SameKeys<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const optionsListed: SameKeys<keyof GenerateOptions, (typeof GENERATE_OPTIONS)[number]> = true;
void optionsListed;

async function promptRows(prompts: tf.Tensor | number[][]): Promise<number[][]> {
  if (prompts instanceof tf.Tensor) {
    if (prompts.rank !== 2 || prompts.dtype !== 'int32') {
      throw new Error(
        `generate: expected int32 prompts of shape [batch, length], received ${prompts.dtype} of ` +
          `shape [${prompts.shape.join(', ')}]`,
      );
    }
    // read asynchronously: webgpu's synchronous read is unreliable (see checkLengths)
    return (await prompts.array()) as number[][];
  }
  if (
    !Array.isArray(prompts) ||
    !prompts.every((r) => Array.isArray(r) && r.every(Number.isInteger))
  ) {
    throw new Error(
      'generate: expected prompts as an int32 tensor or an array of arrays of token ids',
    );
  }
  return prompts;
}

/**
 * Generates up to `maxLength` tokens per row (prompt included) with a causal LM.
 *
 * With a key / value cache when the model's graph allows it (`useCache` unset or true): the
 * prompt positions `[0, shortest prompt - 1)` in one call, then one position per step, each
 * layer on the new positions only (graph_plan.ts says which models can); otherwise (`useCache: false`, or
 * unset and the model does not allow it, `onFallback` being told why) `model.predict` on the
 * whole prefix at each step. Both give the same tokens; `useCache: true` on a model that does
 * not allow the cache is an error naming the layer and the reason.
 *
 * ```js
 * const ids = await generate(model, [[5, 3, 0, 0]], {maxLength: 12, promptLengths: [2], endId: 1});
 * await generate(model, prompts, {maxLength: 64, onFallback: (why) => console.warn(why)});
 * ```
 *
 * @returns int32 ids `[batch, maxLength]`.
 */
export async function generate(
  model: LayersModel,
  prompts: tf.Tensor | number[][],
  options: GenerateOptions,
): Promise<tf.Tensor2D> {
  checkOptionNames(options);
  checkSampler(options);
  const vocab = checkModelInputs(model);
  const rows = await promptRows(prompts);
  const padId = checkTokenId('padId', options.padId ?? 0, vocab);
  const endIds =
    options.endId == null
      ? []
      : (Array.isArray(options.endId) ? options.endId : [options.endId]).map((id: unknown) =>
          checkTokenId('endId', id, vocab),
        );
  checkSeed(options.seed);
  const maxLength = checkMaxLength(model, options.maxLength);
  const lengths = promptLengthsOf(rows, options.promptLengths, padId, maxLength);
  checkPromptIds(rows, lengths, vocab);
  const B = rows.length;
  const planned = options.useCache === false ? null : planCachedDecoding(model);
  checkMemory(B, maxLength, vocab, planned?.plan ?? null, options.memoryLimit);
  const ids = rows.map((r, b) => [
    ...r.slice(0, lengths[b]),
    ...new Array<number>(maxLength - lengths[b]).fill(padId),
  ]);
  const rng = mulberry32(options.seed ?? Math.floor(Math.random() * 2 ** 32));
  const plan = planned == null ? null : cachePlan(planned, options);
  let step: DecodeStep;
  let report: StepReport;
  if (plan == null) {
    step = recomputingStep(model, lengths);
    report = notCompiled(planned?.reason ?? NO_CACHE);
  } else if (plan.masksZeroIds && !plan.zeroKeysExact) {
    step = untilZeroStep(plan, model, ids, lengths, maxLength, options);
    report = notCompiled(ZERO_MASK_THROUGH_TFJS);
  } else {
    await stepKernelsReady(); // the compiled step's SIMD kernels, where they load (never rejects)
    ({step, report} = compiledOrCachedStep(plan, model, ids, lengths, maxLength));
  }
  try {
    options.onCompile?.(report);
  } catch (e) {
    step.dispose();
    throw e;
  }
  await decodeLoop(step, ids, {...options, lengths, endIds}, rng);
  return tf.tensor2d(ids, [B, maxLength], 'int32');
}

/** The plan of cached decoding, or null to recompute (telling `onFallback` why). */
function cachePlan(planned: PlanResult, options: GenerateOptions): StepPlan | null {
  const {plan, reason} = planned;
  if (plan != null) return plan;
  if (options.useCache === true) {
    throw new Error(
      `generate: useCache is true but the model cannot be decoded with a cache: ${reason}`,
    );
  }
  options.onFallback?.(reason);
  return null;
}

/**
 * The cached step: at position `index`, the positions the stepper has not seen yet up to
 * `index - 1` (before the first step: the shared prompt prefix `[0, index - 1)` in one call,
 * whose logits are dropped, then position `index - 1`), giving the logits of position
 * `index - 1`, the same as recomputing. It runs even when no row is active, so that the caches
 * hold every position. A model that masks the id 0 (`masksZeroIds`): the caches keep every
 * position, and the stepper masks the keys that hold a 0, as Keras' padding mask of the whole
 * sequence does (see `recomputingMaskedQueries` for the steps it cannot give).
 */
function cachedStep(plan: StepPlan, lengths: readonly number[], maxLength: number): DecodeStep {
  const B = lengths.length;
  const stepper = new GraphStepper(plan, B, maxLength);
  const feed = (ids: number[][], from: number, to: number) => {
    const rows = ids.map((r) => r.slice(from, to));
    const chunk = tf.tensor2d(rows, [B, to - from], 'int32');
    try {
      return stepper.step(chunk, rows);
    } finally {
      chunk.dispose();
    }
  };
  return {
    next(ids, index) {
      const previous = index - 1;
      if (stepper.position < previous) feed(ids, stepper.position, previous).dispose();
      return feed(ids, previous, index);
    },
    dispose() {
      stepper.dispose();
    },
  };
}

/** Why a call without a cache plan does not compile. */
const NO_CACHE = 'useCache is false: each step recomputes the whole prefix';

/**
 * The compiled step (compiled_step.ts) where every planned node compiles on this backend, else
 * the eager cached step; either with `recomputingMaskedQueries`.
 */
function compiledOrCachedStep(
  plan: StepPlan,
  model: LayersModel,
  ids: readonly (readonly number[])[],
  lengths: readonly number[],
  maxLength: number,
): {step: DecodeStep; report: StepReport} {
  const {step: compiled, report} = compiledStep(plan, ids, lengths, maxLength, model);
  const step = recomputingMaskedQueries(
    compiled ?? cachedStep(plan, lengths, maxLength),
    plan,
    model,
    lengths,
  );
  return {step, report};
}

/**
 * `cached` (a cached step), but where the query of an active row's newest position sees no key
 * (`maskedQuery`: Keras' MultiHeadAttention masks the rows of a query of 0; any layer, a row of
 * 0s so far), Keras averages over every key of the prefix, so that step's logits come from
 * recomputing the prefix. The cached step still runs, writing the position into its caches (a
 * position holding a 0 is a masked key of every later query, so how its own row was computed
 * never reaches them). Models that do not mask the id 0: `cached` as it is.
 */
function recomputingMaskedQueries(
  cached: DecodeStep,
  plan: StepPlan,
  model: LayersModel,
  lengths: readonly number[],
): DecodeStep {
  if (!plan.masksZeroIds) return cached;
  const recomputing = recomputingStep(model, lengths);
  return {
    next(ids, index, active) {
      const logits = cached.next(ids, index, active);
      if (!active.some((a, b) => a && maskedQuery(plan, ids[b], index - 1))) return logits;
      if (logits != null && !Array.isArray(logits)) logits.dispose();
      return recomputing.next(ids, index, active);
    },
    dispose() {
      cached.dispose();
      recomputing.dispose();
    },
  };
}

/**
 * Whether the query at `position` of a row sees no key as Keras computes it (`zeroQueries`: its
 * id is 0; else every id up to it is 0), which a cache cannot give (see `recomputingMaskedQueries`).
 */
function maskedQuery(plan: StepPlan, row: readonly number[], position: number): boolean {
  if (row[position] !== 0) return false;
  return plan.zeroQueries || row.slice(0, position).every((v) => v === 0);
}

/**
 * A model whose zero mask reaches attention through tfjs' own layers (`zeroKeysExact` false):
 * the cache while no known id is 0 (every key is then kept, as with no mask), recomputing from
 * the first 0 on (a 0 in a prompt: from the start), telling `onFallback` why.
 */
function untilZeroStep(
  plan: StepPlan,
  model: LayersModel,
  ids: number[][],
  lengths: readonly number[],
  maxLength: number,
  options: GenerateOptions,
): DecodeStep {
  const why = "the model's mask of the id 0 (mask_zero) reaches attention through tfjs layers";
  if (ids.some((r, b) => r.slice(0, lengths[b]).includes(0))) {
    options.onFallback?.(`a prompt holds the id 0 and ${why}, whose mask a cache cannot follow`);
    return recomputingStep(model, lengths);
  }
  let cached: DecodeStep | null = cachedStep(plan, lengths, maxLength);
  let recomputing: DecodeStep | null = null;
  let lastActive: readonly boolean[] = new Array<boolean>(lengths.length).fill(false);
  return {
    next(rows, index, active) {
      const previous = index - 1;
      if (cached != null && lastActive.some((a, b) => a && rows[b][previous] === 0)) {
        options.onFallback?.(
          `position ${previous} holds the id 0 and ${why}: recomputing from there`,
        );
        cached.dispose();
        cached = null;
        recomputing = recomputingStep(model, lengths);
      }
      lastActive = active;
      return (cached ?? (recomputing as DecodeStep)).next(rows, index, active);
    },
    dispose() {
      cached?.dispose();
      recomputing?.dispose();
    },
  };
}

/**
 * The recomputing step: `model.predict` on the whole prefix (or the model's fixed length), the
 * logits of position `index - 1`; nothing when no row is active.
 */
function recomputingStep(model: LayersModel, lengths: readonly number[]): DecodeStep {
  const fixed = model.inputs[0].shape[1];
  return {
    next(ids, index, active) {
      if (!active.some(Boolean)) return null;
      const B = ids.length;
      // logits at position t - 1 predict token t; a causal model sees only positions < t there
      const width = fixed ?? index;
      return tf.tidy(() => {
        const known = lengths.map((n) => Math.max(n, index));
        const out = model.predict(modelInputs(model, ids, width, known)) as tf.Tensor;
        const V = out.shape[2] as number;
        return tf.reshape(tf.slice(out, [0, index - 1, 0], [B, 1, V]), [B, V]) as tf.Tensor2D;
      });
    },
    dispose() {},
  };
}
