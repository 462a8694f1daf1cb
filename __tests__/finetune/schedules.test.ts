/**
 * The fine-tuning learning-rate schedules (src/finetune/schedules.ts) at chosen steps against
 * their formulas written out here: warm-up step s (0 first) `peak · (s + 1) / warmup`; then
 * constant `peak`, linear `peak · (1 - p)`, cosine `peak · (1 + cos(π p)) / 2` with
 * p = min(1, (s - warmup) / max(1, steps - warmup)). Tolerance 1e-15 relative (float64 both).
 */
import {learningRateSchedule} from '../../src/finetune/schedules';

const rate = (r: ReturnType<typeof learningRateSchedule>, step: number) =>
  typeof r === 'function' ? r(step) : r;

const close = (got: number, want: number) =>
  expect(Math.abs(got - want)).toBeLessThanOrEqual(1e-15 * Math.abs(want) + 1e-300);

describe('learningRateSchedule', () => {
  it('constant without warm-up is the number itself', () => {
    expect(learningRateSchedule('constant', 0.01, 100)).toBe(0.01);
  });

  it('constant with warm-up rises linearly to the peak, then stays', () => {
    const r = learningRateSchedule('constant', 0.01, 100, 4);
    expect(typeof r).toBe('function');
    [0.0025, 0.005, 0.0075, 0.01, 0.01, 0.01].forEach((want, s) => close(rate(r, s), want));
    close(rate(r, 99), 0.01);
    close(rate(r, 150), 0.01);
  });

  it('linear decays from the peak to 0 at `steps`', () => {
    const r = learningRateSchedule('linear', 0.02, 10);
    close(rate(r, 0), 0.02);
    close(rate(r, 1), 0.02 * 0.9);
    close(rate(r, 5), 0.01);
    close(rate(r, 9), 0.02 * 0.1);
    expect(rate(r, 10)).toBe(0);
    expect(rate(r, 12)).toBe(0); // not below zero past the end
  });

  it('linear with warm-up: the decay runs over steps - warmup', () => {
    const r = learningRateSchedule('linear', 0.02, 12, 2);
    close(rate(r, 0), 0.01);
    close(rate(r, 1), 0.02);
    close(rate(r, 2), 0.02); // p = 0
    close(rate(r, 7), 0.01); // p = 5 / 10
    close(rate(r, 11), 0.02 * 0.1);
    expect(rate(r, 12)).toBe(0);
  });

  it('cosine: peak · (1 + cos(π p)) / 2, with warm-up', () => {
    const r = learningRateSchedule('cosine', 0.01, 13, 3);
    close(rate(r, 0), 0.01 / 3);
    close(rate(r, 2), 0.01);
    close(rate(r, 3), 0.01);
    const p = (s: number) => (s - 3) / 10;
    for (const s of [4, 5, 8, 12]) close(rate(r, s), (0.01 * (1 + Math.cos(Math.PI * p(s)))) / 2);
    close(rate(r, 8), 0.005); // half-way
    expect(rate(r, 13)).toBeLessThan(1e-18);
    expect(rate(r, 20)).toBeLessThan(1e-18);
    // all warm-up: the decay span is at least one step
    const w = learningRateSchedule('cosine', 0.01, 2, 2);
    close(rate(w, 1), 0.01);
    close(rate(w, 2), 0.01);
  });

  it('refuses an unknown schedule, a peak that is not positive, a bad warm-up', () => {
    expect(() => learningRateSchedule('step' as never, 0.01, 10)).toThrow(
      "finetune: expected schedule 'constant', 'linear' or 'cosine', received step",
    );
    for (const peak of [0, -1, NaN, Infinity]) {
      expect(() => learningRateSchedule('linear', peak, 10)).toThrow(
        `finetune: expected learningRate to be a positive number, received ${peak}`,
      );
    }
    for (const warm of [-1, 1.5]) {
      expect(() => learningRateSchedule('cosine', 0.01, 10, warm)).toThrow(
        `finetune: expected warmupSteps to be an integer >= 0, received ${warm}`,
      );
    }
  });
});
