/**
 * Weights held once on tfjs' cpu and tensorflow backends. The compiled step copies each weight
 * into a memory of its own there (generate/step_memory.ts); kept with the model between
 * `generate` calls (generate/kept_step_memory.ts), that copy and the tensor's own values were the
 * weights twice over. Once a weight is copied in (or loaded into such a memory from the start:
 * weight_arena.ts), its tensor's values (the backend's typed array: tfjs-cpu's `data`
 * entry; tfjs-node's `tensorMap` entry while no TensorFlow op has taken them into a TensorFlow
 * tensor) become a view of the copy, and the tensor's former array is left to the garbage
 * collector: one memory for both.
 *
 * The views follow the memory: when it grows (which detaches its former buffer) every view is
 * made again on the new buffer; before a copy's place takes another tensor's values (the weight
 * was assigned new data) the former tensor, if still alive, gets its values back as an array of
 * its own, and so does every aliased tensor when the memory is freed (`releaseGenerateMemory`, a
 * new program or backend). A tensor already held by TensorFlow (a prefill on TensorFlow's matmul
 * took it) or shared in another form is left as it is.
 */
import * as tf from '@tensorflow/tfjs-core';

/** A backend's record of a tensor's data whose `values` may be a JavaScript typed array. */
interface HeldData {
  values?: unknown;
}

/** A backend's DataStorage: `get` of a dataId it lacks asks the engine to move the data. */
interface DataStore {
  has(dataId: tf.DataId): boolean;
  get(dataId: tf.DataId): HeldData | undefined;
}

/** tfjs-cpu's data (`data`) and tfjs-node's (`tensorMap`), as read here. */
interface BackendData {
  data?: DataStore;
  tensorMap?: DataStore;
}

type Typed = Float32Array | Uint8Array;

/** The typed array class a tensor of `dtype` holds its values in, where aliasing applies. */
function typedClass(dtype: tf.DataType): typeof Float32Array | typeof Uint8Array | null {
  return dtype === 'float32' ? Float32Array : dtype === 'bool' ? Uint8Array : null;
}

/** The aliases of one memory of its own, on the backend in use when it was made. */
export class WeightAliases {
  private readonly views = new Map<tf.DataId, {at: number; size: number; float: boolean}>();
  private readonly backend: BackendData | null;

  constructor(private readonly memory: WebAssembly.Memory) {
    const name = tf.getBackend();
    this.backend =
      name === 'cpu' || name === 'tensorflow' ? (tf.backend() as unknown as BackendData) : null;
  }

  /** The backend's record of `dataId`, or null once the data was freed. */
  private held(dataId: tf.DataId): HeldData | null {
    const store = this.backend?.data ?? this.backend?.tensorMap;
    return store != null && store.has(dataId) ? (store.get(dataId) ?? null) : null;
  }

  /**
   * Makes `t`'s values the view of its copy at byte `at` of the memory, when the backend holds
   * them as a typed array of `t`'s size (float32 values, or int8 bytes held as `bool`); returns
   * whether it did.
   */
  alias(t: tf.Tensor, at: number): boolean {
    const cls = typedClass(t.dtype);
    const data = this.held(t.dataId);
    if (cls == null || data == null) return false;
    const values = data.values;
    if (!(values instanceof cls) || values.length !== t.size) return false;
    if (values.buffer !== this.memory.buffer) data.values = new cls(this.memory.buffer, at, t.size);
    this.views.set(t.dataId, {at, size: t.size, float: cls === Float32Array});
    return true;
  }

  /** After the memory grew: every view made again on its new buffer. */
  follow(): void {
    for (const [dataId, v] of this.views) {
      const data = this.held(dataId);
      if (data == null) {
        this.views.delete(dataId); // the tensor was disposed
        continue;
      }
      const values = data.values as Typed | null | undefined;
      if (values == null || values.buffer === this.memory.buffer) continue;
      const cls = v.float ? Float32Array : Uint8Array;
      data.values = new cls(this.memory.buffer, v.at, v.size);
    }
  }

  /** Where `t`'s values are in the memory (a view of it), or null. */
  offsetOf(t: tf.Tensor): number | null {
    const values = this.held(t.dataId)?.values as Typed | null | undefined;
    return values != null && values.buffer === this.memory.buffer ? values.byteOffset : null;
  }

  /** The tensor of `dataId`, if it still reads the memory, gets its values as an array of its own. */
  release(dataId: tf.DataId): void {
    const v = this.views.get(dataId);
    if (v == null) return;
    this.views.delete(dataId);
    const data = this.held(dataId);
    const values = data?.values as Typed | null | undefined;
    if (data != null && values != null && values.buffer === this.memory.buffer) {
      data.values = values.slice();
    }
  }

  /** Every tensor still reading the memory gets its values back (the memory is being freed). */
  releaseAll(): void {
    for (const dataId of [...this.views.keys()]) this.release(dataId);
  }
}
