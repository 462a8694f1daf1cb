/**
 * Every kernel call on the current backend while recording is on, with the data ids of its inputs
 * and outputs (tf.profile gives shapes only), and every tensor written from JavaScript values
 * (an upload): enough to tell whether a computation copies a given tensor (a weight) or only
 * reads it.
 */
import * as tf from '@tensorflow/tfjs';

/** One kernel call: its name, and its inputs and outputs as the backend saw them. */
export interface KernelCall {
  name: string;
  inputs: Array<{dataId: object; size: number; shape: number[]}>;
  outputs: Array<{dataId: object; size: number; shape: number[]}>;
}

/** What a recorder saw while it was on. */
export interface KernelRecorder {
  calls: KernelCall[];
  /** Sizes (elements) of the tensors made from JavaScript values. */
  uploads: number[];
  /** Turns recording on or off (off at first). */
  recording: boolean;
  /** Puts the backend's kernels and the engine's makeTensor back. */
  restore(): void;
}

const size = (shape: number[]) => shape.reduce((p, d) => p * d, 1);
const info = (t: tf.TensorInfo) => ({
  dataId: t.dataId as object,
  size: size(t.shape),
  shape: [...t.shape],
});

/**
 * Wraps every kernel registered for the current backend (the registry's configs are read at each
 * call, so replacing their `kernelFunc` is seen by the engine) and the engine's `makeTensor`.
 */
export function recordKernels(): KernelRecorder {
  const backendName = tf.getBackend();
  const recorder: KernelRecorder = {calls: [], uploads: [], recording: false, restore: () => {}};
  const configs = tf.getKernelsForBackend(backendName) as Array<
    tf.KernelConfig & {kernelFunc: tf.KernelFunc}
  >;
  const originals = configs.map((c) => c.kernelFunc);
  configs.forEach((config, i) => {
    const original = originals[i];
    config.kernelFunc = (args) => {
      const out = original(args);
      if (recorder.recording) {
        const outs = Array.isArray(out) ? out : [out];
        recorder.calls.push({
          name: config.kernelName,
          inputs: Object.values(args.inputs)
            .filter((t): t is tf.TensorInfo => t != null)
            .map(info),
          outputs: outs.map(info),
        });
      }
      return out;
    };
  });
  // tensors made from JavaScript values go through the engine's makeTensor (kernels write their
  // outputs through the backend directly)
  const engine = tf.engine() as unknown as {makeTensor: (...args: unknown[]) => tf.Tensor};
  const makeTensor = engine.makeTensor;
  engine.makeTensor = function (this: unknown, ...args: unknown[]) {
    const t = makeTensor.apply(this, args);
    if (recorder.recording) recorder.uploads.push(t.size);
    return t;
  };
  recorder.restore = () => {
    configs.forEach((config, i) => (config.kernelFunc = originals[i]));
    engine.makeTensor = makeTensor;
  };
  return recorder;
}

/**
 * The calls among `calls` that copy one of `weights` (or a view of one: an output sharing its
 * data id, as a reshape's does): an input is such a tensor, an output of exactly its size lies in
 * other memory, and no other input, weight or not, is as large (a transposed, scaled, cast or
 * re-laid-out copy; not the bias of a product, whose kernel is larger);
 * and every Transpose of such a tensor. Products, lookups and slices read a weight into smaller
 * outputs. Not counted: a vector weight tiled to the activations' shape (tfjs' LayerNormalization
 * tiles gamma and beta to `[B, T, D]` at every call), activation-sized work, which at one row
 * and one position is a copy of the `D` values.
 */
export function weightCopies(calls: KernelCall[], weights: tf.Tensor[]): string[] {
  const known = new Map<object, number>(weights.map((w) => [w.dataId as object, w.size]));
  const found: string[] = [];
  for (const call of calls) {
    const weightIn = call.inputs.filter((x) => known.has(x.dataId));
    // a reshape is a view on every backend: tfjs' cpu, wasm and webgl keep the data id, and
    // TensorFlow's Reshape (tfjs-node) gives a new handle that shares its input's buffer
    const view = call.name === 'Reshape';
    for (const o of call.outputs) {
      // a view (same data) is the weight again
      for (const x of weightIn) if (o.dataId === x.dataId || view) known.set(o.dataId, x.size);
    }
    if (view) continue;
    // a vector weight tiled, or broadcast in an elementwise op, to the activations' shape:
    // activation-sized work (tfjs-node's batch norm scales gamma by each row's statistic)
    const vector = weightIn.every((x) => x.shape.filter((d) => d > 1).length <= 1);
    const broadcast = vector && ['Tile', 'Multiply', 'Add', 'Sub', 'RealDiv'].includes(call.name);
    const copies =
      !broadcast &&
      weightIn.some(
        (x) =>
          call.outputs.some((o) => o.dataId !== x.dataId && o.size === x.size) &&
          call.inputs.every((y) => y === x || y.size < x.size),
      );
    if (copies || (call.name === 'Transpose' && weightIn.length > 0)) {
      const shapes = (xs: KernelCall['inputs']) => xs.map((x) => `[${x.shape}]`).join(', ');
      found.push(`${call.name}(${shapes(call.inputs)}) -> ${shapes(call.outputs)}`);
    }
  }
  return found;
}
