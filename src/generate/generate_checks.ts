/**
 * What `generate` checks before it allocates anything: the option names, token ids (prompts,
 * `padId`, `endId`: whole numbers in int32 and in the vocabulary), the seed, the prompt lengths,
 * `maxLength` against the model's position limit, and a memory estimate against `memoryLimit`.
 * Each error says what failed, what was expected and what was received.
 */
import type {LayersModel} from '@tensorflow/tfjs-layers';

import {camelCase} from '../layers/engine/config_objects';
import type {StepPlan} from './graph_plan';

/** Every option `generate` accepts (GenerateOptions and SamplerOptions). */
export const GENERATE_OPTIONS = [
  'maxLength',
  'promptLengths',
  'endId',
  'padId',
  'seed',
  'useCache',
  'onFallback',
  'onStep',
  'memoryLimit',
  'sampler',
  'k',
  'p',
  'temperature',
  'onCompile',
] as const;

/** Default `memoryLimit`: 2 GiB. */
export const DEFAULT_MEMORY_LIMIT = 2 ** 31;

const INT32_MAX = 2 ** 31 - 1;

function show(value: unknown): string {
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  if (typeof value === 'function') return 'a function';
  if (value === undefined) return 'undefined';
  const json = JSON.stringify(value);
  return json === undefined ? String(value) : json.length > 80 ? `${json.slice(0, 77)}...` : json;
}

/**
 * Throws unless `options` is an object whose keys are all among `known` (default: `generate`'s
 * options); `fn` names the public function in the error.
 */
export function checkOptionNames(
  options: unknown,
  known: readonly string[] = GENERATE_OPTIONS,
  fn = 'generate',
): void {
  if (options == null || typeof options !== 'object' || Array.isArray(options)) {
    throw new Error(
      `${fn}: expected options to be an object such as {maxLength: 32}, received ${show(options)}`,
    );
  }
  for (const [name, value] of Object.entries(options)) {
    if (known.includes(name)) {
      checkOptionKind(name, value, fn);
      continue;
    }
    const camel = camelCase(name);
    const near = closestName(camel, known);
    const hint =
      camel !== name && known.includes(camel)
        ? ` (did you mean ${camel}?)`
        : near != null
          ? ` (did you mean ${near}?)`
          : '';
    throw new Error(
      `${fn}: unknown option '${name}'${hint}; expected options among ${known.join(', ')}`,
    );
  }
}

/** The options that take true or false, and those that take a function (undefined: unset). */
const BOOLEAN_OPTIONS: ReadonlySet<string> = new Set(['useCache', 'stripPrompt']);
const FUNCTION_OPTIONS: ReadonlySet<string> = new Set(['onFallback', 'onStep', 'onToken']);

/** Throws unless a flag is a boolean and a callback a function (`stripPrompt: 'yes'` is refused). */
function checkOptionKind(name: string, value: unknown, fn: string): void {
  if (value === undefined) return;
  if (BOOLEAN_OPTIONS.has(name) && typeof value !== 'boolean') {
    throw new Error(`${fn}: expected options.${name} to be true or false, received ${show(value)}`);
  }
  if (FUNCTION_OPTIONS.has(name) && typeof value !== 'function') {
    throw new Error(`${fn}: expected options.${name} to be a function, received ${show(value)}`);
  }
}

/** Levenshtein distance of two short strings, case-insensitive. */
function editDistance(a: string, b: string): number {
  const [x, y] = [a.toLowerCase(), b.toLowerCase()];
  let row = Array.from({length: y.length + 1}, (_, j) => j);
  for (let i = 1; i <= x.length; i++) {
    const next = [i];
    for (let j = 1; j <= y.length; j++) {
      next[j] = Math.min(row[j] + 1, next[j - 1] + 1, row[j - 1] + (x[i - 1] === y[j - 1] ? 0 : 1));
    }
    row = next;
  }
  return row[y.length];
}

/** The known name a misspelt one most likely meant (at most 2 edits, and under a third of it). */
function closestName(name: string, known: readonly string[]): string | null {
  let best: string | null = null;
  let bestDistance = Infinity;
  for (const k of known) {
    const d = editDistance(name, k);
    if (d < bestDistance) [best, bestDistance] = [k, d];
  }
  return bestDistance <= Math.min(2, Math.floor(name.length / 3)) ? best : null;
}

/** The range token ids must lie in, for the error messages. */
function idRange(vocab: number | null): string {
  return vocab == null ? `[0, ${INT32_MAX}]` : `[0, ${vocab})`;
}

function isTokenId(v: unknown, vocab: number | null): v is number {
  return (
    Number.isInteger(v) &&
    (v as number) >= 0 &&
    (v as number) <= INT32_MAX &&
    (vocab == null || (v as number) < vocab)
  );
}

/** Returns `value` when it is a token id (a whole number in int32 and in the vocabulary). */
export function checkTokenId(name: string, value: unknown, vocab: number | null): number {
  if (!isTokenId(value, vocab)) {
    throw new Error(
      `generate: expected ${name} to be a token id, a whole number in ${idRange(vocab)}, ` +
        `received ${show(value)}`,
    );
  }
  return value;
}

/** Throws unless `seed` is unset or a whole number in [0, 2**32) (mulberry32's state). */
export function checkSeed(seed: unknown, fn = 'generate'): void {
  if (
    seed !== undefined &&
    !(Number.isInteger(seed) && (seed as number) >= 0 && (seed as number) < 2 ** 32)
  ) {
    throw new Error(
      `${fn}: expected seed to be a whole number in [0, ${2 ** 32}), received ${show(seed)}`,
    );
  }
}

/** Throws unless every prompt id (before each row's prompt length) is a token id. */
export function checkPromptIds(
  rows: number[][],
  lengths: readonly number[],
  vocab: number | null,
): void {
  rows.forEach((r, b) => {
    for (let j = 0; j < lengths[b]; j++) {
      if (!isTokenId(r[j], vocab)) {
        throw new Error(
          `generate: prompt ${b} holds ${show(r[j])} at position ${j}; expected token ids, ` +
            `whole numbers in ${idRange(vocab)}`,
        );
      }
    }
  });
}

/**
 * Each prompt's length: `promptLengths` when given (an array of whole numbers, one per prompt,
 * each in [1, min(maxLength, row length)]), else up to the first `padId` of each row.
 */
export function promptLengthsOf(
  rows: number[][],
  promptLengths: unknown,
  padId: number,
  maxLength: number,
): number[] {
  const B = rows.length;
  if (promptLengths !== undefined && !Array.isArray(promptLengths)) {
    throw new Error(
      `generate: expected promptLengths to be an array of ${B} whole numbers (one per prompt), ` +
        `received ${show(promptLengths)}`,
    );
  }
  const lengths: unknown[] =
    promptLengths ??
    rows.map((r) => {
      const i = r.indexOf(padId);
      return i === -1 ? r.length : i;
    });
  if (lengths.length !== B) {
    throw new Error(`generate: expected ${B} promptLengths, received ${lengths.length}`);
  }
  lengths.forEach((n, b) => {
    const most = Math.min(maxLength, rows[b].length);
    if (!(Number.isInteger(n) && (n as number) >= 1 && (n as number) <= most)) {
      throw new Error(`generate: prompt ${b} has length ${show(n)}; expected 1 to ${most}`);
    }
  });
  return lengths as number[];
}

interface ConfigLayer {
  name: string;
  getClassName(): string;
  getConfig(): Record<string, unknown>;
  layers?: unknown;
}

/**
 * The longest sequence the model can take, and why: a fixed input length, or the smallest
 * `sequenceLength` (`sequence_length`) in its layers' configs (position embeddings), less a
 * fixed `startIndex`; null when neither is found.
 */
export function positionLimit(model: LayersModel): {limit: number; why: string} | null {
  let best: {limit: number; why: string} | null = null;
  const fixed = model.inputs[0].shape[1];
  if (fixed != null) best = {limit: fixed, why: `the model's input length is ${fixed}`};
  const visit = (layers: readonly ConfigLayer[]) => {
    for (const layer of layers) {
      if (Array.isArray(layer.layers)) visit(layer.layers as ConfigLayer[]);
      let config: Record<string, unknown>;
      try {
        config = layer.getConfig();
      } catch {
        continue; // a layer without a config has no position table we could read
      }
      const n = config.sequenceLength ?? config.sequence_length;
      if (!(Number.isInteger(n) && (n as number) > 0)) continue;
      const start = config.startIndex ?? config.start_index;
      const offset = Number.isInteger(start) && (start as number) > 0 ? (start as number) : 0;
      const limit = (n as number) - offset;
      if (best == null || limit < best.limit) {
        best = {
          limit,
          why:
            `layer '${layer.name}' (${layer.getClassName()}) has sequenceLength ${n as number}` +
            (offset > 0 ? ` and startIndex ${offset}` : ''),
        };
      }
    }
  };
  visit(model.layers as unknown as ConfigLayer[]);
  return best;
}

/**
 * Returns `maxLength` when it is a whole number >= 1 within the model's position limit; `fn`
 * names the public function in the error.
 */
export function checkMaxLength(model: LayersModel, maxLength: unknown, fn = 'generate'): number {
  const limit = positionLimit(model);
  if (!(Number.isInteger(maxLength) && (maxLength as number) >= 1)) {
    throw new Error(
      `${fn}: expected maxLength to be a whole number in [1, ${limit?.limit ?? 'any'}], ` +
        `received ${show(maxLength)}`,
    );
  }
  if (limit != null && (maxLength as number) > limit.limit) {
    throw new Error(
      `${fn}: maxLength ${maxLength as number} exceeds the model's position limit ` +
        `${limit.limit} (${limit.why}); expected maxLength in [1, ${limit.limit}]`,
    );
  }
  return maxLength as number;
}

function bytes(n: number): string {
  if (n >= 2 ** 30) return `${(n / 2 ** 30).toPrecision(3)} GiB`;
  if (n >= 2 ** 20) return `${(n / 2 ** 20).toPrecision(3)} MiB`;
  return `${n} bytes`;
}

/**
 * The memory a run of `generate` needs, in bytes: the logits `[batch, maxLength, vocab]` float32
 * (recomputing predicts them for the whole prefix), the key / value caches of a cached plan
 * (float32), and the ids as JavaScript numbers (8 bytes each).
 */
export function memoryEstimate(
  batch: number,
  maxLength: number,
  vocab: number | null,
  plan: StepPlan | null,
): {total: number; parts: string} {
  const logits = batch * maxLength * (vocab ?? 0) * 4;
  let cache = 0;
  for (const p of plan?.nodes ?? []) {
    if (p.cache == null) continue;
    const shape = p.cache.entry.cacheShape(
      p.cache.config,
      p.node.inputTensors[0].shape,
      batch,
      maxLength,
    );
    cache += shape.reduce((a: number, d) => a * (d ?? 1), 1) * 4;
  }
  const ids = batch * maxLength * 8;
  const parts = [
    vocab != null ? `logits [${batch}, ${maxLength}, ${vocab}] float32: ${bytes(logits)}` : null,
    cache > 0 ? `key / value caches: ${bytes(cache)}` : null,
    `ids: ${bytes(ids)}`,
  ].filter((s) => s != null);
  return {total: logits + cache + ids, parts: parts.join('; ')};
}

/**
 * Throws when the estimate is over `memoryLimit` (bytes; default 2 GiB); `fn` names the public
 * function in the error.
 */
export function checkMemory(
  batch: number,
  maxLength: number,
  vocab: number | null,
  plan: StepPlan | null,
  memoryLimit: unknown,
  fn = 'generate',
): void {
  const limit = memoryLimit ?? DEFAULT_MEMORY_LIMIT;
  if (!(typeof limit === 'number' && limit > 0)) {
    throw new Error(
      `${fn}: expected memoryLimit to be a number of bytes > 0, received ${show(memoryLimit)}`,
    );
  }
  const {total, parts} = memoryEstimate(batch, maxLength, vocab, plan);
  if (total > limit) {
    throw new Error(
      `${fn}: maxLength ${maxLength} for ${batch} prompts needs about ${bytes(total)} ` +
        `(${parts}), over memoryLimit ${bytes(limit)}; expected a smaller maxLength or batch, ` +
        'or a larger memoryLimit',
    );
  }
}
