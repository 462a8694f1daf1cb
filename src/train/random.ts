/** A small seeded PRNG (mulberry32), so that a seed fixes data, initial weights and shuffling. */
export type Rng = () => number;

export function mulberry32(seed: number): Rng {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
