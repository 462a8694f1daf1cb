/** The parts of tfjs' cpu backend (MathBackendCPU) that this package's cpu kernels use. */
import type * as tf from '@tensorflow/tfjs-core';

export interface CpuBackend {
  readSync(dataId: object): ArrayLike<number>;
  makeTensorInfo(shape: number[], dtype: string, values: Float32Array): tf.TensorInfo;
}
