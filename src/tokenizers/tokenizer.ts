/**
 * The interface every tokenizer of the package implements: keras-hub's tokenizers in
 * JavaScript (byte-level BPE as GPT-2 and Llama 3 use it, WordPiece as BERT uses it).
 */

/** A tokenizer: text to ids and back, as keras-hub's tokenizer of the same preset. */
export interface Tokenizer {
  /**
   * The ids of `text`, as keras-hub's tokenizer gives them in a tf.data pipeline (no start / end
   * token added), keras-hub 0.32's split included; byte-level BPE built with `split: 'model'`
   * splits with the model's own regex instead (Hugging Face's ids). docs/tokenizers.md.
   */
  encode(text: string): number[];
  /** keras-hub's `detokenize(ids)`; invalid UTF-8 becomes U+FFFD (one per maximal invalid run). */
  decode(ids: number[]): string;
  /** The number of entries of the vocabulary (keras-hub's `vocabulary_size()`). */
  readonly vocabularySize: number;
  /** The id of a vocabulary entry, `undefined` for a string that is not one. */
  tokenToId(token: string): number | undefined;
  /** The vocabulary entry of an id, `undefined` for an id outside the vocabulary. */
  idToToken(id: number): string | undefined;
  /** keras-hub's `start_token_id` (GPT-2: `<|endoftext|>`, Llama 3: `<|begin_of_text|>`, BERT: `[CLS]`). */
  readonly startTokenId?: number;
  /** keras-hub's `end_token_id` (GPT-2: `<|endoftext|>`, Llama 3: `<|end_of_text|>`, BERT: `[SEP]`). */
  readonly endTokenId?: number;
  /** keras-hub's `pad_token_id`. */
  readonly padTokenId?: number;
  /**
   * The ids generation stops at, as keras-hub's `CausalLM.generate` stops (its `end_token_id`,
   * and for Llama 3 its `end_token2_id`, `<|eot_id|>`). Absent: `[endTokenId]`.
   */
  readonly stopTokenIds?: readonly number[];
  /**
   * The ids keras-hub strips from generated text (its tokenizer's `special_token_ids`, e.g. Llama
   * 3's `<|start_header_id|>`). Absent: start, end and pad ids.
   */
  readonly specialTokenIds?: readonly number[];
}

/** The id of `token` in a vocabulary, or an error naming the tokenizer and the token. */
export function requireToken(
  vocabulary: ReadonlyMap<string, number>,
  token: string,
  owner: string,
): number {
  const id = vocabulary.get(token);
  if (id === undefined) {
    throw new Error(
      `${owner}: the vocabulary must contain the special token ${JSON.stringify(token)}; ` +
        `it has ${vocabulary.size} entries and not this one.`,
    );
  }
  return id;
}

/** Distinct ids, ascending (keras-hub's `special_token_ids` and stop ids are sets). */
export function sortedIds(ids: readonly number[]): number[] {
  return [...new Set(ids)].sort((a, b) => a - b);
}

/** Checks that every id is a whole number of the vocabulary before decoding. */
export function checkIds(ids: readonly number[], size: number, owner: string): void {
  if (!Array.isArray(ids)) {
    throw new Error(`${owner}.decode: expected an array of token ids, received ${typeof ids}.`);
  }
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (!Number.isInteger(id) || id < 0 || id >= size) {
      throw new Error(
        `${owner}.decode: token id ${String(id)} at position ${i} is not in the vocabulary ` +
          `(expected a whole number in [0, ${size - 1}]).`,
      );
    }
  }
}
