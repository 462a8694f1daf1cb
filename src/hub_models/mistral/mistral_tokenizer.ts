/** keras-hub's MistralTokenizer (keras_hub/src/models/mistral/mistral_tokenizer.py): SentencePiece. */
import {SentencePieceTokenizer} from '../../tokenizers/sentence_piece';
import type {SentencePieceTokenizerOptions} from '../../tokenizers/sentence_piece';
import {sortedIds} from '../../tokenizers/tokenizer';

/**
 * Mistral's tokenizer (keras-hub's MistralTokenizer): the SentencePiece model of the preset's
 * `vocabulary.spm`; `<s>` starts, `</s>` ends (and stops generation), padding id 0; both are
 * keras-hub's special tokens, stripped from generated text.
 *
 * @example
 * ```js
 * const tokenizer = await loadTokenizer('presets/mistral'); // a keras-hub preset folder
 * tokenizer.decode(tokenizer.encode('Hello world')); // 'Hello world'
 * ```
 */
export class MistralTokenizer extends SentencePieceTokenizer {
  static override get className(): string {
    return 'MistralTokenizer';
  }

  constructor(options: SentencePieceTokenizerOptions) {
    super(options, 'MistralTokenizer');
    this.startTokenId = this.special('<s>');
    this.endTokenId = this.special('</s>');
    this.padTokenId = 0;
    this.stopTokenIds = [this.endTokenId];
    this.specialTokenIds = sortedIds([this.startTokenId, this.endTokenId]);
  }
}
