/**
 * Whether a gradient is being recorded (`tf.grad`, `variableGrads`, `model.fit`): tfjs' engine
 * state, not in its public type. Paths that take an op without a gradient (a scatter) or a form
 * whose gradient differs (an untiled batchNorm) check it and keep tfjs' own ops then.
 */
import * as tf from '@tensorflow/tfjs-core';

export function recordingGradients(): boolean {
  const engine = tf.engine() as unknown as {state: {gradientDepth: number}};
  return engine.state.gradientDepth > 0;
}
