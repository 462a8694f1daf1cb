/** A small seeded PRNG (mulberry32), so that a seed fixes data, initial weights and shuffling. */
import {mulberry32} from '../ops/random';

export type Rng = () => number;

export {mulberry32};

/** An integer in [lo, hi]. */
export function randInt(rng: Rng, lo: number, hi: number): number {
  return lo + Math.floor(rng() * (hi - lo + 1));
}

/**
 * Runs `fn` with `Math.random` replaced by a seeded generator. tfjs draws the seeds of unseeded
 * initializers and `fit`'s shuffling from `Math.random`, so this makes a training run repeatable.
 */
export async function withSeededMathRandom<T>(seed: number, fn: () => Promise<T>): Promise<T> {
  const original = Math.random;
  Math.random = mulberry32(seed ^ 0x9e3779b9);
  try {
    return await fn();
  } finally {
    Math.random = original;
  }
}
