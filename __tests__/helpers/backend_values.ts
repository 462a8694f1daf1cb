/** What tfjs' cpu backend (`data`) and tfjs-node (`tensorMap`) hold as a tensor's values. */
import * as tf from '@tensorflow/tfjs';

/** The backend's values of `t` as a typed array (cpu, tfjs-node before TensorFlow took them), or null. */
export function heldValues(t: tf.Tensor): ArrayBufferView | null {
  const b = tf.backend() as unknown as {
    data?: {has(id: tf.DataId): boolean; get(id: tf.DataId): {values?: unknown}};
    tensorMap?: {has(id: tf.DataId): boolean; get(id: tf.DataId): {values?: unknown}};
  };
  const store = b.data ?? b.tensorMap;
  if (store == null || !store.has(t.dataId)) return null;
  const v = store.get(t.dataId).values;
  return ArrayBuffer.isView(v) ? v : null;
}
