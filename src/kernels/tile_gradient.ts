/**
 * A gradient for tfjs' `Tile` kernel in one reduction: `dy` of shape `[r0 * s0, r1 * s1, ...]` is
 * reshaped to `[r0, s0, r1, s1, ...]` and summed over the repetition axes. tfjs' own gradient adds
 * one slice of `dy` per repetition, `r0 * r1 * ...` kernels: `tf.layers.layerNormalization` tiles
 * its gamma and beta to the input's shape, so its backward pass costs two kernels per
 * `[batch, time]` position and dominates a small transformer's training step (5x on wasm).
 *
 * The sum runs over the repetitions in the same order as tfjs' loop, from 0, so on the wasm
 * backend it gives the same float32 values (cpu sums in float64: within an ulp).
 */
import * as tf from '@tensorflow/tfjs-core';

function tileGrad(
  dy: tf.Tensor | tf.Tensor[],
  saved: tf.Tensor[],
  attrs: tf.NamedAttrMap,
): Record<string, () => tf.Tensor> {
  const [x] = saved;
  const reps = attrs.reps as number[];
  return {
    x: () => {
      const split: number[] = [];
      const axes: number[] = [];
      x.shape.forEach((s, d) => {
        split.push(reps[d], s);
        axes.push(2 * d);
      });
      return tf.sum(tf.reshape(dy as tf.Tensor, split), axes);
    },
  };
}

/**
 * Registers the one-reduction `Tile` gradient (for the whole tfjs instance) and returns a function
 * that puts the previous gradient back.
 */
export function useFastTileGradient(): () => void {
  const previous = tf.getGradient(tf.Tile);
  tf.registerGradient({kernelName: tf.Tile, inputsToSave: ['x'], gradFunc: tileGrad});
  return () => {
    if (previous != null) tf.registerGradient(previous);
    else tf.unregisterGradient(tf.Tile);
  };
}
