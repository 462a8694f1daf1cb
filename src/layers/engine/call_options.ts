/** The call options of the attention layers, and the spellings users bring from elsewhere. */

/** Call options every attention layer accepts. */
export const CALL_OPTIONS = [
  'validLens',
  'attentionMask',
  'useCausalMask',
  'returnAttentionScores',
  'training',
  'mask',
] as const;

/** Other spellings users bring from Keras, PyTorch and d2l, and the option they mean. */
const SPELLINGS: Record<string, string> = {
  valid_lens: 'validLens',
  validLen: 'validLens',
  valid_len: 'validLens',
  validLength: 'validLens',
  valid_length: 'validLens',
  validLengths: 'validLens',
  valid_lengths: 'validLens',
  lengths: 'validLens',
  attention_mask: 'attentionMask',
  attnMask: 'attentionMask',
  attn_mask: 'attentionMask',
  key_padding_mask: "validLens (or an attentionMask; note PyTorch's true = ignore)",
  use_causal_mask: 'useCausalMask',
  causal: 'useCausalMask',
  is_causal: 'useCausalMask',
  isCausal: 'useCausalMask',
  return_attention_scores: 'returnAttentionScores',
  need_weights: 'returnAttentionScores',
  returnScores: 'returnAttentionScores',
};

/** Keyword arguments of Keras' attention calls, as a converted model's graph records them. */
const KERAS_NODE_KWARGS = new Set([
  'query',
  'value',
  'key',
  'query_mask',
  'value_mask',
  'key_mask',
  'attention_mask',
  'use_causal_mask',
  'return_attention_scores',
]);

/** Throws on a call option that is not accepted, naming the camelCase one for known spellings. */
export function checkCallOptions(
  kwargs: Record<string, unknown>,
  caller: string,
  extra: readonly string[] = [],
): void {
  const accepted = [...CALL_OPTIONS, ...extra];
  for (const name of Object.keys(kwargs)) {
    if (accepted.includes(name) || kwargs[name] === undefined) continue;
    const hint = SPELLINGS[name];
    throw new Error(
      `${caller}: unknown call option '${name}'` +
        (hint ? `; did you mean '${hint}'?` : '') +
        `. Accepted options: ${accepted.join(', ')}` +
        (KERAS_NODE_KWARGS.has(name)
          ? `. '${name}' is how a Keras model passes it: load a model converted from Keras ` +
            `with loadKerasModel from tfjs-attention, not tf.loadLayersModel`
          : ''),
    );
  }
}
