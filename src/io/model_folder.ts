/**
 * What a folder handler made by `fileSystem` offers a loader that streams its weights, found by
 * the handler object. No Node module is imported here, so browser bundles that import the Keras
 * loader stay free of `fs`.
 */
import type * as tf from '@tensorflow/tfjs-core';

/**
 * Receives the weights' bytes in manifest order, `bytes` being those from byte `at` of the
 * concatenated weights files. `bytes` is reused after the call returns: copy what you keep.
 */
export type WeightsSink = (bytes: Uint8Array, at: number) => void;

/** What one attempt at reading the weights writes into. */
export interface WeightsTarget {
  write: WeightsSink;
  /** Called when the attempt fails (a checksum mismatch, a read error): free what it holds. */
  discard(): void;
}

/** Streams weights into a target that `open` makes, returning the target that received them. */
export type WeightsStream = <T extends WeightsTarget>(open: () => T | Promise<T>) => Promise<T>;

/**
 * A model folder's weights before any byte is read: the artifacts without `weightData` (the
 * weights files checked: paths, sizes), and a stream of the weights into targets (safe_read.ts'
 * `streamWeights`: chunk by chunk, the checksum with its `.prev` fallback), or null for a
 * topology-only folder, whose artifacts are then those `load()` gives.
 */
export interface FolderWeights {
  artifacts: tf.io.ModelArtifacts;
  stream: WeightsStream | null;
}

/** The streaming side of a folder handler. */
export interface ModelFolder {
  open(): Promise<FolderWeights>;
}

const folders = new WeakMap<object, ModelFolder>();

/** Records `folder` as the streaming side of `handler`. */
export function registerModelFolder(handler: object, folder: ModelFolder): void {
  folders.set(handler, folder);
}

/** The streaming side of a handler made by `fileSystem`, or null for any other handler. */
export function modelFolderOf(handler: unknown): ModelFolder | null {
  return typeof handler === 'object' && handler != null ? (folders.get(handler) ?? null) : null;
}
