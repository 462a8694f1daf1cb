/**
 * keras-hub layers called with tensors by keyword (`encoder(x, padding_mask=m)`,
 * `decoder(decoder_sequence=x, encoder_sequence=e)`): tfjs-layers passes only positional inputs,
 * so the loader turns every tensor argument into an input and records each input's role in the
 * layer's config (`input_roles`), as the layers do themselves in functional models.
 */
import {camelCase} from '../layers/engine/config_objects';
import {snakeCase} from '../layers/engine/contract';
import type {KerasCall} from '../layers/engine/contract';
import {Obj} from './keras_json';
/** A legacy inbound entry `[layerName, nodeIndex, tensorIndex, kwargs]`. */
export type Entry = [string, number, number, Obj];

/** A layer called with tensors by keyword (its contract's Keras call). */
type KeywordLayer = Extract<KerasCall, {kind: 'keyword'}>;

/**
 * The inputs (in the layer's role order) of one call of a keyword layer, with their roles;
 * non-tensor options are written to `config`. Throws on arguments the layer cannot take.
 */
export function keywordCall(
  spec: KeywordLayer,
  cls: string,
  name: string,
  positional: Entry[],
  tensorKwargs: Record<string, Entry>,
  kwargs: Obj,
  config: Obj,
): {inputs: Entry[]; roles: string[]} {
  const byRole = new Map<string, Entry>();
  if (positional.length > spec.positional) {
    throw new Error(
      `loadKerasModel: layer '${name}' (${cls}) is called with ${positional.length} positional ` +
        `tensors; expected at most ${spec.positional} (${spec.roles.slice(0, spec.positional).map(snakeCase).join(', ')})`,
    );
  }
  positional.forEach((e, i) => byRole.set(spec.roles[i], e));
  for (const [k, e] of Object.entries(tensorKwargs)) {
    const role = camelCase(k);
    if (!spec.roles.includes(role) || byRole.has(role)) {
      throw new Error(
        `loadKerasModel: layer '${name}' (${cls}) is called with the tensor argument '${k}', ` +
          `which it does not take here; it takes ${spec.roles.map(snakeCase).join(', ')}`,
      );
    }
    byRole.set(role, e);
  }
  for (const [k, v] of Object.entries(kwargs)) {
    if (k in spec.options) {
      // a kept option is written as given (false too: keras-hub's decoder is causal by default)
      const key = spec.options[k];
      if (key != null && v != null) config[key] = v;
      continue;
    }
    if (v == null || v === false) continue;
    {
      throw new Error(
        `loadKerasModel: layer '${name}' (${cls}) is called with ${k}=${JSON.stringify(v)}, which ` +
          'this package does not support in a converted model',
      );
    }
  }
  const roles = spec.roles.filter((r) => byRole.has(r));
  if (roles[0] !== spec.roles[0]) {
    throw new Error(
      `loadKerasModel: layer '${name}' (${cls}) is called without its ${snakeCase(spec.roles[0])}`,
    );
  }
  return {inputs: roles.map((r) => byRole.get(r) as Entry), roles};
}
