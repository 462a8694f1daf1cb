/**
 * keras-hub layers called with tensors by keyword (`encoder(x, padding_mask=m)`,
 * `decoder(decoder_sequence=x, encoder_sequence=e)`): tfjs-layers passes only positional inputs,
 * so the loader turns every tensor argument into an input and records each input's role in the
 * layer's config (`input_roles`), as the layers do themselves in functional models.
 */
import {Obj} from './keras_json';
/** A legacy inbound entry `[layerName, nodeIndex, tensorIndex, kwargs]`. */
export type Entry = [string, number, number, Obj];

interface KeywordLayer {
  /** Roles in the layer's order; the first `positional` can be given positionally. */
  roles: string[];
  positional: number;
  /** Non-tensor call arguments kept in the config (their config key), or dropped (null). */
  options: Record<string, string | null>;
}

const camel = (s: string) => s.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
const snake = (s: string) => s.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

export const KEYWORD_LAYERS: Record<string, KeywordLayer> = {
  TransformerEncoder: {
    roles: ['inputs', 'paddingMask', 'attentionMask'],
    positional: 1,
    options: {training: null},
  },
  TransformerDecoder: {
    roles: [
      'decoderSequence',
      'encoderSequence',
      'decoderPaddingMask',
      'decoderAttentionMask',
      'encoderPaddingMask',
      'encoderAttentionMask',
    ],
    positional: 2,
    options: {training: null, use_causal_mask: 'use_causal_mask'},
  },
};

/**
 * The inputs (in the layer's role order) of one call of a keyword layer, with their roles;
 * non-tensor options are written to `config`. Throws on arguments the layer cannot take.
 */
export function keywordCall(
  cls: string,
  name: string,
  positional: Entry[],
  tensorKwargs: Record<string, Entry>,
  kwargs: Obj,
  config: Obj,
): {inputs: Entry[]; roles: string[]} {
  const spec = KEYWORD_LAYERS[cls];
  const byRole = new Map<string, Entry>();
  if (positional.length > spec.positional) {
    throw new Error(
      `loadKerasModel: layer '${name}' (${cls}) is called with ${positional.length} positional ` +
        `tensors; expected at most ${spec.positional} (${spec.roles.slice(0, spec.positional).map(snake).join(', ')})`,
    );
  }
  positional.forEach((e, i) => byRole.set(spec.roles[i], e));
  for (const [k, e] of Object.entries(tensorKwargs)) {
    const role = camel(k);
    if (!spec.roles.includes(role) || byRole.has(role)) {
      throw new Error(
        `loadKerasModel: layer '${name}' (${cls}) is called with the tensor argument '${k}', ` +
          `which it does not take here; it takes ${spec.roles.map(snake).join(', ')}`,
      );
    }
    byRole.set(role, e);
  }
  for (const [k, v] of Object.entries(kwargs)) {
    if (v == null || v === false) continue;
    if (!(k in spec.options)) {
      throw new Error(
        `loadKerasModel: layer '${name}' (${cls}) is called with ${k}=${JSON.stringify(v)}, which ` +
          'this package does not support in a converted model',
      );
    }
    const key = spec.options[k];
    if (key != null) config[key] = v;
  }
  // keras-hub's decoder is causal unless told otherwise
  if (cls === 'TransformerDecoder' && kwargs.use_causal_mask === false) {
    config.use_causal_mask = false;
  }
  const roles = spec.roles.filter((r) => byRole.has(r));
  if (roles[0] !== spec.roles[0]) {
    throw new Error(
      `loadKerasModel: layer '${name}' (${cls}) is called without its ${snake(spec.roles[0])}`,
    );
  }
  return {inputs: roles.map((r) => byRole.get(r) as Entry), roles};
}
