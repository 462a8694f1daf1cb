/**
 * `embedText`: sentence embeddings from a keras-hub TextEmbedder (Gemma 3's embedding models), as
 * keras-hub 0.32's `TextEmbedder.encode_text(texts)` gives them with its preprocessor
 * (`TextEmbedderPreprocessor`: each text tokenized, truncated to `sequence_length - 2`, packed as
 * `[start] + ids + [end]`, right-padded with the pad id; the padding mask is `ids != pad`), then
 * L2-normalised as transformers.js' feature-extraction pipeline does with `normalize: true`.
 */
import * as tf from '@tensorflow/tfjs-core';
import type {LayersModel} from '@tensorflow/tfjs-layers';

/** What {@link embedText} needs of a tokenizer (the package's tokenizers have it). */
export interface EmbedTextTokenizer {
  /** Token ids of a text, no start or end token added. */
  encode(text: string): number[];
  /** The start token the packer puts first. */
  startTokenId?: number;
  /** The end token the packer puts last. */
  endTokenId?: number;
  /** The padding id. Default 0. */
  padTokenId?: number;
}

/** What {@link embedText} reads of keras-hub's TextEmbedderPreprocessor settings. */
export interface EmbedTextPreprocessor {
  /** The packed length (start and end tokens included). */
  sequenceLength: number;
}

/** A text embedder with its tokenizer and preprocessor settings (what `loadKerasHubPreset` gives). */
export interface TextEmbedderParts {
  /** `[token_ids, padding_mask]` -> embeddings `[batch, dim]` (keras-hub's TextEmbedder). */
  model: LayersModel;
  /** Its tokenizer (null is an error). */
  tokenizer: EmbedTextTokenizer | null;
  /** Its preprocessor's settings: the packed length (null is an error). */
  preprocessor: EmbedTextPreprocessor | null;
}

/** Options of {@link embedText}. */
export interface EmbedTextOptions {
  /** L2-normalise each vector (transformers.js' `normalize: true`). Default true. */
  normalize?: boolean;
}

function fail(message: string): never {
  throw new Error(`embedText: ${message}`);
}

/** The token ids and padding mask keras-hub's TextEmbedderPreprocessor packs for `texts`. */
export function packForEmbedding(
  tokenizer: EmbedTextTokenizer,
  texts: readonly string[],
  sequenceLength: number,
): {tokenIds: number[][]; paddingMask: number[][]} {
  const start = tokenizer.startTokenId;
  const end = tokenizer.endTokenId;
  if (start == null || end == null) {
    fail(
      `expected a tokenizer with a start and an end token (keras-hub's packer adds both), ` +
        `received startTokenId ${String(start)}, endTokenId ${String(end)}`,
    );
  }
  if (!(Number.isInteger(sequenceLength) && sequenceLength >= 2)) {
    fail(`expected a sequence length >= 2 (start and end tokens), received ${sequenceLength}`);
  }
  const pad = tokenizer.padTokenId ?? 0;
  const tokenIds = texts.map((text) => {
    const ids = [start, ...tokenizer.encode(text).slice(0, sequenceLength - 2), end];
    return [...ids, ...new Array<number>(sequenceLength - ids.length).fill(pad)];
  });
  const paddingMask = tokenIds.map((row) => row.map((id) => (id === pad ? 0 : 1)));
  return {tokenIds, paddingMask};
}

/**
 * Sentence embeddings of `texts` with a keras-hub TextEmbedder preset (Gemma 3's embedding
 * models, `Gemma3TextEmbedder`): one vector per text, as keras-hub's `encode_text` computes it
 * (its preprocessor's packing and length), L2-normalised unless `normalize` is false (as
 * transformers.js' feature-extraction pipeline with `pooling: 'mean', normalize: true` returns
 * them). No tensor is left behind.
 *
 * ```ts
 * const preset = await loadKerasHubPreset('embedding_gemma/'); // a Gemma3TextEmbedder preset
 * const [a, b] = await embedText(preset, ['a cat sat', 'a dog sat']);
 * const cosine = a.reduce((s, v, i) => s + v * b[i], 0);
 * ```
 */
export async function embedText(
  preset: TextEmbedderParts,
  texts: string | readonly string[],
  options: EmbedTextOptions = {},
): Promise<number[][]> {
  const {model, tokenizer, preprocessor} = preset ?? ({} as TextEmbedderParts);
  if (model == null) fail('expected {model, tokenizer, preprocessor}, received no model');
  if (tokenizer == null) fail('expected a tokenizer, received none (the preset has none)');
  if (preprocessor == null) {
    fail('expected a preprocessor (its sequence length), received none (the preset has none)');
  }
  const list = typeof texts === 'string' ? [texts] : texts;
  if (!Array.isArray(list) || list.some((t) => typeof t !== 'string')) {
    fail(`expected a string or an array of strings, received ${JSON.stringify(texts)}`);
  }
  const unknown = Object.keys(options).filter((k) => k !== 'normalize');
  if (unknown.length > 0) fail(`unknown option ${unknown.join(', ')} (expected only normalize)`);
  const normalize = options.normalize ?? true;
  if (list.length === 0) return [];
  const {tokenIds, paddingMask} = packForEmbedding(tokenizer, list, preprocessor.sequenceLength);
  const vectors = tf.tidy(() => {
    const out = model.predict([
      tf.tensor2d(tokenIds, undefined, 'int32'),
      tf.tensor2d(paddingMask, undefined, 'int32'),
    ]) as tf.Tensor;
    if (out.rank !== 2) {
      fail(`expected the model to return [batch, dim] embeddings, received rank ${out.rank}`);
    }
    if (!normalize) return out;
    // transformers.js' normalize: x / max(||x||, 1e-12)
    return tf.div(out, tf.maximum(tf.norm(out, 'euclidean', -1, true), 1e-12));
  });
  const values = (await vectors.array()) as number[][];
  vectors.dispose();
  return values;
}
