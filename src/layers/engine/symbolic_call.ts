/**
 * An attention layer called on symbolic tensors (a functional model): the tensor options
 * `validLens` / `attentionMask` become inputs, `useCausalMask` / `returnAttentionScores` are
 * recorded in the layer (its config), and so are the input roles when a mask or lengths input
 * could not be told from a key at predict time, because tfjs' `predict` and `fit` replay no call
 * options. Returns what the layer hands to tfjs' `Layer.apply`.
 */
import * as tf from '@tensorflow/tfjs-core';
import {SymbolicTensor} from '@tensorflow/tfjs-layers';
import type {Kwargs} from '@tensorflow/tfjs-layers/dist/types';

import {CallSettings, checkCallOptions, dedupeInputs, resolveCall, Role} from './call_spec';

/** What a symbolic call records in its layer. */
export interface SymbolicCallTarget {
  useCausalMask: boolean;
  returnAttentionScores: boolean;
  inputRoles: Role[] | null;
  /** The layer's earlier calls in the model (a recorded setting may not change after one). */
  readonly inboundNodes: unknown[];
}

export function symbolicCall(
  layer: SymbolicCallTarget,
  list: SymbolicTensor[],
  kwargs: Kwargs,
  settings: CallSettings,
): {inputs: SymbolicTensor | SymbolicTensor[]; kwargs: Kwargs; roles: Role[]} {
  checkCallOptions(kwargs, settings.caller, settings.extraOptions);
  if (kwargs.cache != null || kwargs.cacheUpdateIndex != null) {
    throw new Error(
      `${settings.caller}: a key / value cache works in eager calls (token-by-token ` +
        `generation), not in a functional model`,
    );
  }
  const inputs = [...list];
  const kw: Kwargs = {...kwargs};
  const tensorRoles: Role[] = [];
  for (const name of ['validLens', 'attentionMask'] as const) {
    const t = kw[name];
    delete kw[name];
    if (t == null) continue;
    if (!(t instanceof SymbolicTensor)) {
      throw new Error(
        `${settings.caller}: in a functional model, ${name} must be a symbolic tensor ` +
          `(a model input or a layer output), received a ${t instanceof tf.Tensor ? 'concrete tensor' : typeof t}`,
      );
    }
    inputs.push(t);
    tensorRoles.push(name);
  }
  for (const name of ['useCausalMask', 'returnAttentionScores'] as const) {
    if (kw[name] === undefined) continue;
    const value = Boolean(kw[name]);
    delete kw[name];
    if (value === layer[name]) continue;
    if (layer.inboundNodes.length > 0) {
      throw new Error(
        `${settings.caller}: ${name}=${value} differs from an earlier call of this layer in the ` +
          `model (${layer[name]}); tfjs replays no call options at predict time, so a layer has ` +
          `one setting: use a second layer, or set ${name} in the constructor`,
      );
    }
    layer[name] = value; // recorded in the config, like the roles below
  }
  let roles: Role[];
  if (settings.inputRoles != null && settings.inputRoles.length === inputs.length) {
    roles = settings.inputRoles;
  } else {
    const positional = resolveCall(list, {}, {...settings, inputRoles: null}).roles;
    roles = [...positional, ...tensorRoles];
  }
  const deduped = dedupeInputs(inputs, roles);
  // A mask or lengths input cannot always be told from a key by rank and dtype at predict
  // time: the roles are recorded (and saved in the config) for predict, fit and loading.
  if (deduped.roles.some((r) => r === 'attentionMask' || r === 'validLens')) {
    layer.inputRoles = deduped.roles;
  }
  const arg = deduped.inputs.length === 1 ? deduped.inputs[0] : deduped.inputs;
  return {inputs: arg, kwargs: kw, roles: deduped.roles};
}
