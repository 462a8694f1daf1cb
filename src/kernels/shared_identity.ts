/**
 * tfjs-wasm's `Identity` kernel copies its input; tfjs' cpu backend shares the input's buffer
 * instead (tensors are immutable). The gradient tape saves every tensor a gradient needs through
 * `Identity` (`engine.saveTensorsForBackwardMode` clones them), so on wasm a training step copies
 * every saved input: each frozen kernel a product's gradient reads (GPT-2 small's 0.5 GB of
 * weights again, the tied embedding included) and every activation saved by more than one op.
 * {@link useSharedIdentity} makes wasm's `Identity` share the buffer, as cpu's does, for the time
 * of a training step.
 */
import * as tf from '@tensorflow/tfjs-core';

interface RefCountedBackend {
  incRef(dataId: tf.DataId): void;
}

function sharedIdentity({inputs, backend}: {inputs: tf.NamedTensorInfoMap; backend: unknown}) {
  const x = inputs.x as tf.TensorInfo;
  (backend as RefCountedBackend).incRef(x.dataId);
  return {dataId: x.dataId, shape: x.shape, dtype: x.dtype};
}

/**
 * On the wasm backend, registers an `Identity` kernel that shares its input's buffer (cpu's
 * behaviour) and returns a function that puts tfjs-wasm's copying kernel back; elsewhere a no-op.
 * Nothing may write into a tensor's buffer in place while it is on (nothing in a training step
 * does: every kernel writes a new output).
 */
export function useSharedIdentity(): () => void {
  if (tf.getBackend() !== 'wasm') return () => undefined;
  const previous = tf.getKernel(tf.Identity, 'wasm');
  if (previous == null || backendRefCounts(tf.backend()) === false) return () => undefined;
  tf.unregisterKernel(tf.Identity, 'wasm');
  tf.registerKernel({
    kernelName: tf.Identity,
    backendName: 'wasm',
    kernelFunc: sharedIdentity as unknown as tf.KernelFunc,
  });
  return () => {
    tf.unregisterKernel(tf.Identity, 'wasm');
    tf.registerKernel(previous);
  };
}

function backendRefCounts(backend: tf.KernelBackend): boolean {
  return typeof (backend as unknown as Partial<RefCountedBackend>).incRef === 'function';
}
