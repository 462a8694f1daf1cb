/** The options and call arguments of every attention layer, and what a layer's attention returns. */
import type * as tf from '@tensorflow/tfjs-core';
import type {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {LayerArgs} from '@tensorflow/tfjs-layers/dist/engine/topology';

import {Role, ROLES} from './call_spec';

/** Options shared by every attention layer. */
export interface BaseAttentionArgs extends LayerArgs {
  /** Dropout rate on the attention weights, applied in training only. Default 0. */
  dropout?: number;
  /**
   * Causal masking: query `i` attends to keys `<= i`. Kept in the config, so models that need it
   * at `predict` / `fit` time (where tfjs replays no call kwargs) keep it after save and load.
   */
  useCausalMask?: boolean;
  /** Return `[output, scores]` instead of `output`. Kept in the config, like `useCausalMask`. */
  returnAttentionScores?: boolean;
  /**
   * Seed of the dropout masks (advanced on every call) and of the default (glorotUniform) kernel
   * initializers, each weight its own stream derived from it: the same seed builds the same
   * weights. Initializers given explicitly are used as given.
   */
  seed?: number | null;
  /**
   * The role of each input (`'query'`, `'value'`, `'key'`, `'validLens'`, `'attentionMask'`);
   * recorded automatically when a functional model passes lengths or an attention mask, and kept
   * in the config. Rarely given by hand.
   */
  inputRoles?: Role[] | null;
  /**
   * Give a query that may attend to no key zero weights (and a zero attended value) instead of
   * uniform ones, as Keras >= 3.10 does on its non-fused path (dropout > 0, returned scores or
   * several attention axes). `loadKerasModel` sets it where a converted Keras 3 layer takes that
   * path. Default false (tf-keras 2, Keras' fused path, d2l).
   */
  zeroFullyMaskedRows?: boolean;
}

/** Keyword arguments of `apply` / `call` for every attention layer. */
export interface AttentionCallArgs {
  /** int32 lengths, `[batch]` (per sequence) or `[batch, queries]` (per query). */
  validLens?: tf.Tensor | SymbolicTensor | null;
  /** bool or 0/1 mask broadcastable to `[batch, queries, keys]`; true / 1 = attend. */
  attentionMask?: tf.Tensor | SymbolicTensor | null;
  /** Causal masking for this call (overrides the layer's `useCausalMask`). */
  useCausalMask?: boolean;
  /** Return `[output, scores]` from this call (overrides the layer's `returnAttentionScores`). */
  returnAttentionScores?: boolean;
  /** Training mode: dropout is applied. Default false. */
  training?: boolean;
  /** Keras-style masks `[queryMask, valueMask, keyMask?]` (`[batch, length]`, true = keep). */
  mask?: Array<tf.Tensor | null> | tf.Tensor | null;
}

/** {@link AttentionCallArgs} of an eager call: tensor options are concrete tensors. */
export interface EagerCallArgs extends AttentionCallArgs {
  /** int32 lengths, `[batch]` (per sequence) or `[batch, queries]` (per query). */
  validLens?: tf.Tensor | null;
  /** bool or 0/1 mask broadcastable to `[batch, queries, keys]`; true / 1 = attend. */
  attentionMask?: tf.Tensor | null;
}

/** {@link AttentionCallArgs} of a symbolic call (functional model): tensor options are inputs. */
export interface SymbolicCallArgs extends AttentionCallArgs {
  /** int32 lengths, `[batch]` (per sequence) or `[batch, queries]` (per query). */
  validLens?: SymbolicTensor | null;
  /** bool or 0/1 mask broadcastable to `[batch, queries, keys]`; true / 1 = attend. */
  attentionMask?: SymbolicTensor | null;
}

/** The key / value cache options of an eager call of MultiHeadAttention or GroupQueryAttention. */
export interface CacheCallArgs extends EagerCallArgs {
  /**
   * The key / value cache `[batch, 2, maxLength, heads, headDim]` (keras-hub's layout); the call
   * returns the updated cache after its output (and scores).
   */
  cache: tf.Tensor;
  /** Where this call's keys and values are written in the cache; omitted: read it as is. */
  cacheUpdateIndex?: number | null;
}

/**
 * The output of an attention layer's call that does not say `returnAttentionScores`: `T`, or the
 * pair `[output, scores]` when the layer was constructed with `returnAttentionScores: true`
 * (`S` is `true`); either when that is not known (`S` is `boolean`).
 */
export type AttentionOutput<S extends boolean, T> = [S] extends [false]
  ? T
  : [S] extends [true]
    ? [T, T]
    : T | [T, T];

/**
 * The output of a cached call that does not say `returnAttentionScores`: `[output, cache]`, or
 * `[output, scores, cache]` for a layer constructed with `returnAttentionScores: true`.
 */
export type CachedOutput<S extends boolean> = [S] extends [false]
  ? [tf.Tensor, tf.Tensor]
  : [S] extends [true]
    ? [tf.Tensor, tf.Tensor, tf.Tensor]
    : [tf.Tensor, tf.Tensor] | [tf.Tensor, tf.Tensor, tf.Tensor];

/** What a layer's attention returns; scores may be null unless the call returns them. */
export interface AttendResult {
  output: tf.Tensor;
  scores: tf.Tensor | null;
  /** The updated key / value cache, for calls given a cache. */
  cache?: tf.Tensor | null;
}

/** Validates recorded input roles from a config. */
export function checkRoles(roles: unknown, cls: string): Role[] {
  if (
    !Array.isArray(roles) ||
    roles.length === 0 ||
    roles[0] !== 'query' ||
    !roles.every((r) => ROLES.includes(r))
  ) {
    throw new Error(
      `${cls}: expected inputRoles to start with 'query' and name roles among ${ROLES.join(', ')}, received ${JSON.stringify(roles)}`,
    );
  }
  return roles as Role[];
}
