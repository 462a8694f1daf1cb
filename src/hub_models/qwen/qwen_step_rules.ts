/** The compile rules of Qwen 2.5's own layers (none yet: they decode with the eager stepper). */
import type {StepCompile} from '../../generate/step_program';

/** Qwen 2.5's compile rules, by class name. */
export const QWEN_STEP_RULES: Readonly<Record<string, StepCompile>> = {};
