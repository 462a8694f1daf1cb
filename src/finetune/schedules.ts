/** Learning-rate schedules of {@link finetune}: a warm-up, then constant, linear or cosine decay. */
import type {LearningRate} from './keras_adam';

/**
 * A learning-rate schedule of `finetune`: after the warm-up, `'constant'`, or a `'linear'` or
 * `'cosine'` decay to 0 at the last step.
 */
export type ScheduleName = 'constant' | 'linear' | 'cosine';

/**
 * The rate at each step (0 first): `warmupSteps` rising linearly to `peak` (step s gets
 * `peak · (s + 1) / warmupSteps`), then `peak` (constant), or decaying to 0 at `steps` (linear,
 * or cosine: `peak · (1 + cos(π · progress)) / 2`).
 */
export function learningRateSchedule(
  name: ScheduleName,
  peak: number,
  steps: number,
  warmupSteps = 0,
): LearningRate {
  if (!['constant', 'linear', 'cosine'].includes(name)) {
    throw new Error(
      `finetune: expected schedule 'constant', 'linear' or 'cosine', received ${String(name)}`,
    );
  }
  if (!(typeof peak === 'number' && peak > 0 && Number.isFinite(peak))) {
    throw new Error(`finetune: expected learningRate to be a positive number, received ${peak}`);
  }
  if (!Number.isInteger(warmupSteps) || warmupSteps < 0) {
    throw new Error(
      `finetune: expected warmupSteps to be an integer >= 0, received ${warmupSteps}`,
    );
  }
  if (name === 'constant' && warmupSteps === 0) return peak;
  return (step: number) => {
    if (step < warmupSteps) return (peak * (step + 1)) / warmupSteps;
    if (name === 'constant') return peak;
    const span = Math.max(1, steps - warmupSteps);
    const progress = Math.min(1, (step - warmupSteps) / span);
    return name === 'linear'
      ? peak * (1 - progress)
      : (peak * (1 + Math.cos(Math.PI * progress))) / 2;
  };
}
