/**
 * Choosing the next token from one row of logits, as keras-hub's samplers do: greedy (argmax),
 * random (sample the softmax), temperature (sample softmax(logits / temperature)), topK (sample
 * among the k most likely), topP (sample among the most likely tokens whose probabilities add up
 * to p). Plain JavaScript on one row: the logits of one step are small.
 */
export type SamplerName = 'greedy' | 'topK' | 'topP' | 'temperature' | 'random';

/** How {@link generate} picks each next token. */
export interface SamplerOptions {
  /** `'greedy'` (the most likely token; the default), `'topK'`, `'topP'`, `'temperature'` or `'random'` (sampling from the whole distribution). */
  sampler?: SamplerName;
  /** topK: how many tokens to keep. Default 5. */
  k?: number;
  /** topP: the probability mass to keep. Default 0.9. */
  p?: number;
  /**
   * Divides the logits before sampling (every sampler but greedy). Default 1. A temperature so
   * small that `1 / temperature` or `logits / temperature` is not finite is an error.
   */
  temperature?: number;
}

const SAMPLERS: SamplerName[] = ['greedy', 'topK', 'topP', 'temperature', 'random'];

/** Throws unless the sampler and its options are valid; `fn` names the public function. */
export function checkSampler(o: SamplerOptions, fn = 'generate'): void {
  const fail = (what: string, value: unknown) => {
    throw new Error(`${fn}: expected ${what}, received ${JSON.stringify(value)}`);
  };
  if (o.sampler !== undefined && !SAMPLERS.includes(o.sampler)) {
    fail(`sampler to be one of ${SAMPLERS.join(', ')}`, o.sampler);
  }
  if (o.k !== undefined && !(Number.isInteger(o.k) && o.k > 0))
    fail('k to be a whole number > 0', o.k);
  if (o.p !== undefined && !(typeof o.p === 'number' && o.p > 0 && o.p <= 1)) {
    fail('p to be a number in (0, 1]', o.p);
  }
  if (
    o.temperature !== undefined &&
    !(
      typeof o.temperature === 'number' &&
      Number.isFinite(o.temperature) &&
      o.temperature > 0 &&
      Number.isFinite(1 / o.temperature)
    )
  ) {
    // JSON.stringify writes Infinity as null
    throw new Error(
      `${fn}: expected temperature to be a finite number > 0 whose inverse is finite, ` +
        `received ${typeof o.temperature === 'number' ? String(o.temperature) : JSON.stringify(o.temperature)}`,
    );
  }
}

function argmax(x: ArrayLike<number>): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** Samples an index of `candidates` by the softmax of their logits. */
function sampleSoftmax(logits: ArrayLike<number>, candidates: number[], rng: () => number): number {
  const max = Math.max(...candidates.map((i) => logits[i]));
  const weights = candidates.map((i) => Math.exp(logits[i] - max));
  const total = weights.reduce((a, b) => a + b, 0);
  let r = rng() * total;
  for (let j = 0; j < candidates.length; j++) {
    r -= weights[j];
    if (r < 0) return candidates[j];
  }
  return candidates[candidates.length - 1];
}

/**
 * Throws unless every logit is finite: a NaN or an infinite logit has no probability (softmax
 * gives NaN weights), so it is refused rather than turned into an arbitrary token.
 */
function checkLogits(row: ArrayLike<number>, where: string): void {
  for (let i = 0; i < row.length; i++) {
    if (!Number.isFinite(row[i])) {
      throw new Error(
        `generate: expected finite logits from the model, received ${row[i]} for token ${i} ` +
          `(${where})`,
      );
    }
  }
}

/**
 * The next token for one row of logits; `where` (row and position) goes into the errors.
 * Non-finite logits, and logits that `temperature` scales out of the finite numbers, are errors.
 */
export function sampleNext(
  row: ArrayLike<number>,
  o: SamplerOptions,
  rng: () => number,
  where = 'one row',
): number {
  checkLogits(row, where);
  const sampler = o.sampler ?? 'greedy';
  if (sampler === 'greedy') return argmax(row);
  const t = sampler === 'random' ? 1 : (o.temperature ?? 1);
  const logits = Array.from(row, (v) => v / t);
  const over = logits.findIndex((v) => !Number.isFinite(v));
  if (over !== -1) {
    throw new Error(
      `generate: temperature ${t} scales the logit ${row[over]} of token ${over} to ` +
        `${logits[over]} (${where}); expected a temperature that keeps logits / temperature finite`,
    );
  }
  const order = logits.map((_, i) => i);
  if (sampler === 'topK') {
    order.sort((a, b) => logits[b] - logits[a] || a - b);
    return sampleSoftmax(logits, order.slice(0, Math.min(o.k ?? 5, order.length)), rng);
  }
  if (sampler === 'topP') {
    order.sort((a, b) => logits[b] - logits[a] || a - b);
    const max = logits[order[0]];
    const e = order.map((i) => Math.exp(logits[i] - max));
    const total = e.reduce((a, b) => a + b, 0);
    const keep: number[] = [];
    let mass = 0;
    for (let j = 0; j < order.length && mass < (o.p ?? 0.9); j++) {
      keep.push(order[j]);
      mass += e[j] / total;
    }
    return sampleSoftmax(logits, keep, rng);
  }
  return sampleSoftmax(logits, order, rng); // temperature, random
}
