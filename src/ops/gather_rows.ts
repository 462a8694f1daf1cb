/**
 * Rows of a table at ids, `table[ids]`, with a gradient for the table on every backend: tfjs'
 * gather gradient is an `UnsortedSegmentSum`, a kernel the wasm backend does not have. Here the
 * gradient adds each row's gradient into its id's row with that kernel where the backend has it,
 * and in JavaScript where it does not (`[ids, width]` values read once per backward pass).
 */
import * as tf from '@tensorflow/tfjs-core';

/** `dy [N, width]` added into the rows `ids [N]` of a `[rows, width]` zero table. */
function scatterRows(dy: tf.Tensor, ids: tf.Tensor, rows: number): tf.Tensor {
  if (tf.getKernel('UnsortedSegmentSum', tf.getBackend()) != null) {
    return tf.unsortedSegmentSum(dy, ids as tf.Tensor1D, rows);
  }
  const width = dy.shape[1] as number;
  const g = dy.dataSync();
  const at = ids.dataSync();
  const out = new Float32Array(rows * width);
  for (let n = 0; n < at.length; n++) {
    const [src, dst] = [n * width, at[n] * width];
    for (let j = 0; j < width; j++) out[dst + j] += g[src + j];
  }
  return tf.tensor2d(out, [rows, width]);
}

/**
 * `table [rows, width]` at `ids` (int32, any shape; flattened): `[ids.size, width]`, whose
 * gradient w.r.t. the table works on every backend (see the module's comment).
 */
export function gatherRows(table: tf.Tensor, ids: tf.Tensor): tf.Tensor {
  const flat = tf.reshape(ids, [-1]);
  const rows = table.shape[0];
  const gather = tf.customGrad(((t: tf.Tensor, save: tf.GradSaveFunc) => {
    save([flat]);
    return {
      value: tf.gather(t, flat),
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => scatterRows(dy, saved[0], rows),
    };
  }) as unknown as Parameters<typeof tf.customGrad>[0]);
  const out = gather(table);
  flat.dispose();
  return out;
}
