/**
 * Training examples as keras-hub's `CausalLMPreprocessor` packs them for `fit`: each text
 * tokenized, packed by a `StartEndPacker` to `sequenceLength + 1` (truncated first to leave room
 * for the start and end tokens, then the start token, the ids, the end token, padding), then
 * shifted: `x` the first `sequenceLength` ids and their padding mask, `y` the next ids,
 * `sample_weight` the mask shifted the same way.
 */
import type {CausalLmBatch} from './train_step';

/** What packing needs of a tokenizer (the package's tokenizers have it). */
export interface PackingTokenizer {
  /** The ids of a text (no start or end token added). */
  encode(text: string): number[];
  /** Put first when the preprocessor adds a start token. */
  startTokenId?: number;
  /** Put last when the preprocessor adds an end token. */
  endTokenId?: number;
  /** Fills a row after its tokens (0 when absent). */
  padTokenId?: number;
}

/** What packing needs of a preprocessor (keras-hub's settings, as a preset gives them). */
export interface PackingPreprocessor {
  /** Tokens per example (keras-hub's `sequence_length`). */
  sequenceLength: number;
  /** Whether the start token is put first. */
  addStartToken: boolean;
  /** Whether the end token is put last (default true, as keras-hub's for training). */
  addEndToken?: boolean;
}

function tokenId(
  tokenizer: PackingTokenizer,
  key: 'startTokenId' | 'endTokenId' | 'padTokenId',
): number | undefined {
  const id = tokenizer[key];
  if (id !== undefined && !(Number.isInteger(id) && id >= 0)) {
    throw new Error(`fine-tuning: the tokenizer's ${key} is ${String(id)}, not a token id`);
  }
  return id;
}

/** One example's packed row: `sequenceLength + 1` ids and their mask. */
function packRow(
  ids: number[],
  length: number,
  start: number | undefined,
  end: number | undefined,
  pad: number,
): {ids: number[]; mask: number[]} {
  const room = length - (start !== undefined ? 1 : 0) - (end !== undefined ? 1 : 0);
  const body = ids.slice(0, Math.max(0, room));
  const row = [
    ...(start !== undefined ? [start] : []),
    ...body,
    ...(end !== undefined ? [end] : []),
  ];
  const kept = row.slice(0, length);
  const mask = kept.map(() => 1);
  while (kept.length < length) {
    kept.push(pad);
    mask.push(0);
  }
  return {ids: kept, mask};
}

/**
 * keras-hub's `preprocessor(texts, sequence_length=sequenceLength)` for training: x (`tokenIds`,
 * `paddingMask`), `y` and `sampleWeight`, each `[texts.length, sequenceLength]`.
 */
export function packCausalLm(
  tokenizer: PackingTokenizer,
  preprocessor: PackingPreprocessor,
  texts: string[],
  sequenceLength: number = preprocessor.sequenceLength,
): CausalLmBatch {
  if (!Number.isInteger(sequenceLength) || sequenceLength < 1) {
    throw new Error(
      `fine-tuning: expected sequenceLength to be a positive integer, received ${sequenceLength}`,
    );
  }
  const start = preprocessor.addStartToken ? tokenId(tokenizer, 'startTokenId') : undefined;
  const end = preprocessor.addEndToken !== false ? tokenId(tokenizer, 'endTokenId') : undefined;
  if (preprocessor.addStartToken && start === undefined) {
    throw new Error('fine-tuning: the preprocessor adds a start token, but the tokenizer has none');
  }
  const pad = tokenId(tokenizer, 'padTokenId') ?? 0;
  const batch: CausalLmBatch = {tokenIds: [], paddingMask: [], y: [], sampleWeight: []};
  for (const text of texts) {
    if (typeof text !== 'string') {
      throw new Error(`fine-tuning: expected texts as strings, received ${typeof text}`);
    }
    const row = packRow(tokenizer.encode(text), sequenceLength + 1, start, end, pad);
    batch.tokenIds.push(row.ids.slice(0, -1));
    batch.paddingMask.push(row.mask.slice(0, -1));
    batch.y.push(row.ids.slice(1));
    batch.sampleWeight.push(row.mask.slice(1));
  }
  return batch;
}

/**
 * A text cut into training examples that each fit `sequenceLength` tokens (with the start and
 * end tokens): paragraphs (split at blank lines), a paragraph too long cut at whitespace. What
 * `finetune` does with a single string; a page can count the examples before training.
 *
 * ```js
 * const examples = textExamples(tokenizer, text, 128); // e.g. ['First paragraph.', ...]
 * if (examples.length < 4) throw new Error(`expected 4 examples, received ${examples.length}`);
 * ```
 */
export function textExamples(
  tokenizer: PackingTokenizer,
  text: string,
  sequenceLength: number,
): string[] {
  const room = Math.max(1, sequenceLength - 1);
  const out: string[] = [];
  for (const paragraph of text.split(/\n\s*\n/)) {
    if (paragraph.trim() === '') continue;
    const words = paragraph.split(/(?<=\s)(?=\S)/); // each word with the whitespace after it
    let piece = '';
    for (const w of words) {
      const next = piece + w;
      if (piece !== '' && tokenizer.encode(next.trimEnd()).length > room) {
        out.push(piece.trimEnd());
        piece = w;
      } else {
        piece = next;
      }
    }
    if (piece.trim() !== '') out.push(piece.trimEnd());
  }
  return out;
}
